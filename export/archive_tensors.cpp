// Reading an archive's tensors (TensorReader): its weights, example inputs and optimizer
// state, each entry checked against its placeholder, its record and the memory budget.

#include "tdfx/export/archive_tensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/export/archive_format.h"
#include "tdfx/export/json_checks.h"
#include "tdfx/export/optimizer_state.h"

namespace tdfx::detail {

using nlohmann::json;

namespace {

class TensorReader {
 public:
  TensorReader(const Graph& graph, const GraphSignature& signature, const detail::ZipReader& zip,
               const LoadOptions& options, const std::string& where)
      : zip_(zip), options_(options), where_(where) {
    for (const Node* node : graph.nodes()) {
      if (node->op() == OpCode::kPlaceholder) placeholders_[node->name()] = node;
    }
    for (const InputSpec& in : signature.inputs) {
      (in.kind == InputKind::kUserInput ? user_inputs_ : weights_).insert(in.name);
      if (in.kind == InputKind::kParameter) parameters_.emplace(in.target, in.name);
    }
  }

  // `weights`: the weights' entries; `inputs`: the example inputs', or null; `optimizer`: an
  // optimizer's state, or null.
  ArchiveTensors read(const json& weights, const json* inputs, const json* optimizer) {
    ArchiveTensors out;
    for (const json& entry : weights) read_entry(entry, false, out.weights);
    for (const std::string& name : weights_) {
      if (!out.weights.count(name)) fail<ArchiveError>("{}: input {} has no weight", where_, name);
    }
    if (inputs) {
      for (const json& entry : *inputs) read_entry(entry, true, out.inputs);
    }
    if (optimizer) out.optimizer = read_optimizer(*optimizer);
    // Nothing in the file goes unread: a record the program does not name is refused.
    for (const std::string& name : zip_.names()) {
      if (name != kProgramRecord && !records_.count(name)) {
        fail<ArchiveError>("{}: record {} is not part of the program", where_, python_repr(name));
      }
    }
    return out;
  }

 private:
  void read_entry(const json& entry, bool input, std::map<std::string, at::Tensor>& out) {
    const char* kind = input ? "input" : "weight";
    const std::string name = text(entry, "name", where_ + (input ? ": inputs" : ": weights"));
    const std::string here = fmt::format("{}: {} {}", where_, kind, python_repr(name));
    if (!(input ? user_inputs_ : weights_).count(name) || out.count(name)) {
      fail<ArchiveError>("{}: not a {} input of the signature, or given twice", here,
                         input ? "user" : "parameter or buffer");
    }
    out.emplace(name, read_tensor(entry, here, kind, placeholders_.at(name)->meta().tensor, input));
  }

  // The optimizer section: its type one of optimizer_kinds(), each group's options numbers and
  // its parameters names, each state's tensors of its type's names, each read as a weight of
  // its parameter is. What the state means (each name a parameter of one group, the options
  // its type's) is ExportedProgram::set_optimizer_state's to check.
  OptimizerState read_optimizer(const json& value) {
    const std::string here = where_ + ": optimizer state";
    OptimizerState out;
    out.type = text(value, "type", here);
    const OptimizerKind* kind = optimizer_kind(out.type);
    if (!kind) {
      fail<ArchiveError>("{}: type {} is not one tdfx keeps (Adam, AdamW, SGD, RMSprop, Adagrad)",
                         here, python_repr(out.type));
    }
    for (const json& group : array(value, "groups", here)) {
      const std::string at = fmt::format("{}: group {}", here, out.groups.size());
      OptimizerState::Group kept;
      const json& options = field(group, "options", at);
      if (!options.is_object()) fail<ArchiveError>("{}: options is not an object", at);
      for (const auto& [name, number] : options.items()) {
        if (!number.is_number()) {
          fail<ArchiveError>("{}: option {} is not a number", at, python_repr(name));
        }
        kept.options.emplace(name, number.get<double>());
      }
      for (const json& name : array(group, "parameters", at)) {
        if (!name.is_string()) fail<ArchiveError>("{}: a parameter is not a name", at);
        kept.parameters.push_back(name.get<std::string>());
      }
      out.groups.push_back(std::move(kept));
    }
    for (const json& entry : array(value, "state", here)) {
      const std::string parameter = text(entry, "parameter", here + ": state");
      const std::string at = fmt::format("{}: parameter {}", here, python_repr(parameter));
      const auto placeholder = parameters_.find(parameter);
      if (placeholder == parameters_.end() || out.parameters.count(parameter)) {
        fail<ArchiveError>("{}: not a parameter of the program, or given twice", at);
      }
      OptimizerState::Parameter& kept = out.parameters[parameter];
      const json& step = field(entry, "step", at);
      if (!step.is_number_integer() || step.get<int64_t>() < 0) {
        fail<ArchiveError>("{}: step is not a non-negative int", at);
      }
      kept.step = step.get<int64_t>();
      const TensorMeta& meta = placeholders_.at(placeholder->second)->meta().tensor;
      for (const json& tensor : array(entry, "tensors", at)) {
        const std::string name = text(tensor, "name", at);
        const std::string there = fmt::format("{}: {}", at, python_repr(name));
        if (std::find(kind->tensors.begin(), kind->tensors.end(), name) == kind->tensors.end() ||
            kept.tensors.count(name)) {
          fail<ArchiveError>("{}: not a state tensor of {} ({}), or given twice", there, out.type,
                             fmt::join(kind->tensors, ", "));
        }
        kept.tensors.emplace(name, read_tensor(tensor, there, "state tensor", meta, false));
      }
    }
    return out;
  }

  // One tensor of an entry (`record`, `dtype`, `shape`): its dtype and shape `meta`'s (a
  // dimension that follows the batch may differ when `batch_free`), its bytes within the
  // budget, read from a record no other entry names.
  at::Tensor read_tensor(const json& entry, const std::string& here, const char* kind,
                         const TensorMeta& meta, bool batch_free) {
    const std::string record = text(entry, "record", here);
    if (record == kProgramRecord || !records_.insert(record).second) {
      fail<ArchiveError>("{}: record {} is not a {} record of its own", here, python_repr(record),
                         kind);
    }
    const c10::ScalarType dtype = dtype_from_json(field(entry, "dtype", here), here);
    const std::vector<int64_t> shape = shape_from_json(field(entry, "shape", here), here);
    bool fits = !meta.dtype || *meta.dtype == dtype;
    if (fits && meta.shape) {
      fits = meta.shape->size() == shape.size();
      for (size_t d = 0; fits && d < shape.size(); ++d) {
        fits = (batch_free && meta.follows_batch(d)) || (*meta.shape)[d] == shape[d];
      }
    }
    if (!fits) fail<ArchiveError>("{}: its dtype or shape differs from its placeholder's", here);
    // The byte count, checked against overflow and the budget before any allocation.
    const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
    uint64_t bytes = empty ? 0 : c10::elementSize(dtype);
    for (const int64_t d : empty ? std::vector<int64_t>{} : shape) {
      if (d != 0 && bytes > options_.memory_budget / static_cast<uint64_t>(d)) {
        bytes = options_.memory_budget + 1;
        break;
      }
      bytes *= static_cast<uint64_t>(d);
    }
    total_ += bytes;
    if (bytes > options_.memory_budget || total_ > options_.memory_budget) {
      fail<ArchiveError>(
          "{}: the weights need more than the memory budget of {} bytes "
          "(LoadOptions::memory_budget)",
          here, options_.memory_budget);
    }
    if (zip_.size(record) != bytes) {
      fail<ArchiveError>("{}: a {} tensor of shape [{}] needs {} bytes; record {} holds {}", here,
                         dtype_name(dtype), fmt::join(shape, ", "), bytes, python_repr(record),
                         zip_.size(record));
    }
    at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(dtype));
    if (bytes > 0) zip_.read_into(record, static_cast<char*>(tensor.data_ptr()), bytes);
    if (dtype == c10::ScalarType::Bool) {
      const auto* data = static_cast<const unsigned char*>(tensor.data_ptr());
      if (std::any_of(data, data + bytes, [](unsigned char b) { return b > 1; })) {
        fail<ArchiveError>("{}: a bool tensor holds bytes other than 0 and 1", here);
      }
    }
    return tensor;
  }

  const detail::ZipReader& zip_;
  const LoadOptions& options_;
  const std::string& where_;
  std::unordered_map<std::string, const Node*> placeholders_;
  std::unordered_set<std::string> weights_, user_inputs_;
  // Each parameter's placeholder by its target (`module.0.module.weight`).
  std::unordered_map<std::string, std::string> parameters_;
  std::unordered_set<std::string> records_;
  uint64_t total_ = 0;
};

}  // namespace

ArchiveTensors tensors_from_json(const json& weights, const json* inputs, const json* optimizer,
                                 const Graph& graph, const GraphSignature& signature,
                                 const ZipReader& zip, const LoadOptions& options,
                                 const std::string& where) {
  return TensorReader(graph, signature, zip, options, where).read(weights, inputs, optimizer);
}

}  // namespace tdfx::detail
