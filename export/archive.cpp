#include "tdfx/export/archive.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/enum_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/export/archive_format.h"
#include "tdfx/export/json_checks.h"
#include "tdfx/export/module_table.h"
#include "tdfx/export/op_policy.h"
#include "tdfx/export/program_json.h"
#include "tdfx/export/zip.h"
#include "tdfx/graph/namespace.h"

namespace tdfx {
namespace {

using detail::array;
using detail::batch_dims_from_json;
using detail::derived_dims_from_json;
using detail::describe;
using detail::device_from_json;
using detail::document_text;
using detail::dtype_from_json;
using detail::enum_from_json;
using detail::field;
using detail::is_module_path;
using detail::key_from_json;
using detail::kFormat;
using detail::kMaxArgumentDepth;
using detail::kMaxBodyDepth;
using detail::kNewestVersion;
using detail::kOldestVersion;
using detail::kProgramRecord;
using detail::kVersionWithInputs;
using detail::kVersionWithOptimizer;
using detail::parse_program_json;
using detail::printable;
using detail::shape_from_json;
using detail::text;
using detail::weight_records;
using detail::WeightRecords;
using nlohmann::json;

class GraphReader {
 public:
  explicit GraphReader(std::string where) : where_(std::move(where)) {}

  Graph read(const json& nodes, int depth = 0) {
    if (depth > kMaxBodyDepth) fail<ArchiveError>("{}: bodies nested too deeply", where_);
    if (!nodes.is_array()) fail<ArchiveError>("{}: 'nodes' is not a list", where_);
    Graph graph;
    std::unordered_map<std::string, Node*> by_name;
    std::unordered_set<std::string> input_names;  // the placeholders' targets: forward's
    for (size_t i = 0; i < nodes.size(); ++i) {
      const json& entry = nodes[i];
      const std::string name = text(entry, "name", fmt::format("{}: node {}", where_, i));
      if (!is_python_identifier(name) || Namespace::is_reserved(name)) {
        fail<ArchiveError>("{}: node {}: name {} is not a legal, unreserved identifier", where_, i,
                           python_repr(name));
      }
      const std::string where = fmt::format("{}: node %{}", where_, name);
      const std::string op = text(entry, "op", where);
      const std::string target_text = printable(text(entry, "target", where), "target", where);
      if (op == "placeholder" &&
          (target_text == "self" || !input_names.insert(target_text).second)) {
        // Either would print `def forward(self, x, self)` or `(self, x, x)`: not Python.
        fail<ArchiveError>(
            "{}: placeholder target {} {}", where, python_repr(target_text),
            target_text == "self" ? "is the module's own name" : "repeats another input's");
      }
      auto arg = [&](const json& value) { return argument(value, by_name, where, 0); };
      Args args;
      for (const json& value : array(entry, "args", where)) args.push_back(arg(value));
      Kwargs kwargs;
      std::unordered_set<std::string> kwarg_names;
      for (const json& pair : array(entry, "kwargs", where)) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
          fail<ArchiveError>("{}: a keyword argument must be [name, value]", where);
        }
        const std::string kwarg = pair[0].get<std::string>();
        if (!is_python_identifier(kwarg) || !kwarg_names.insert(kwarg).second) {
          fail<ArchiveError>("{}: keyword argument {} is not an identifier or repeats", where,
                             python_repr(kwarg));
        }
        kwargs.emplace_back(kwarg, arg(pair[1]));
      }
      Node* node = nullptr;
      try {
        node = create(graph, op, target_text, std::move(args), std::move(kwargs), name, where);
      } catch (const ArchiveError&) {
        throw;
      } catch (const Error& e) {
        fail<ArchiveError>("{}: {}", where, e.what());
      }
      if (node->name() != name) {
        fail<ArchiveError>("{}: node name '{}' is used twice", where, name);
      }
      read_meta(field(entry, "meta", where), node->meta(), where);
      if (entry.contains("body")) {
        node->set_body(
            std::make_shared<Graph>(GraphReader(where + " body").read(entry["body"], depth + 1)));
      }
      by_name[name] = node;
    }
    try {
      graph.lint();
    } catch (const GraphError& e) {
      fail<ArchiveError>("{}: the graph is malformed: {}", where_, e.what());
    }
    return graph;
  }

 private:
  static Node* create(Graph& graph, const std::string& op, const std::string& target, Args args,
                      Kwargs kwargs, const std::string& name, const std::string& where) {
    if (op == "placeholder") {
      if (!is_python_identifier(target) || is_python_keyword(target)) {
        fail<ArchiveError>("{}: placeholder target {} is not an identifier (or is a keyword)",
                           where, python_repr(target));
      }
      return graph.create_node(OpCode::kPlaceholder, Target(target), {}, {}, name);
    }
    if (op == "call_module") {
      if (!is_module_path(target)) {
        fail<ArchiveError>("{}: call_module target {} is not a module path", where,
                           python_repr(target));
      }
      return graph.create_node(OpCode::kCallModule, Target(target), std::move(args),
                               std::move(kwargs), name);
    }
    if (op == "output") {
      if (args.size() != 1 || !kwargs.empty()) {
        fail<ArchiveError>("{}: output takes one argument", where);
      }
      return graph.create_node(OpCode::kOutput, Target("output"), std::move(args), {}, name);
    }
    if (op == "call_function") {
      std::optional<Target> builtin = Target::builtin(target);
      Target t = builtin ? *builtin : Target::aten(target);
      return graph.create_node(OpCode::kCallFunction, std::move(t), std::move(args),
                               std::move(kwargs), name);
    }
    // get_attr and call_method cannot run without a module: refused here.
    fail<ArchiveError>("{}: op {} cannot appear in a loaded program", where, python_repr(op));
  }

  Argument argument(const json& value, const std::unordered_map<std::string, Node*>& nodes,
                    const std::string& where, int depth) {
    if (depth > kMaxArgumentDepth) fail<ArchiveError>("{}: arguments nested too deeply", where);
    if (!value.is_object() || value.size() != 1 + (value.contains("is_tuple") ? 1 : 0)) {
      fail<ArchiveError>("{}: malformed argument ({})", where, describe(value));
    }
    if (value.contains("none") && value["none"].is_null()) return None{};
    if (value.contains("bool") && value["bool"].is_boolean()) return value["bool"].get<bool>();
    if (value.contains("int") && value["int"].is_number_integer())
      return value["int"].get<int64_t>();
    if (value.contains("float")) {
      const json& f = value["float"];
      if (f.is_number()) return f.get<double>();
      if (f == "inf") return std::numeric_limits<double>::infinity();
      if (f == "-inf") return -std::numeric_limits<double>::infinity();
      if (f == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    if (value.contains("str") && value["str"].is_string()) return value["str"].get<std::string>();
    if (value.contains("key")) {
      const bool is_tuple = value.contains("is_tuple") && value["is_tuple"].is_boolean() &&
                            value["is_tuple"].get<bool>();
      return key_from_json(value["key"], is_tuple, where);
    }
    if (value.contains("dtype")) return dtype_from_json(value["dtype"], where);
    if (value.contains("memory_format")) {
      return enum_from_json(value["memory_format"], "memory format", memory_format_from_name,
                            memory_format_name, where);
    }
    if (value.contains("layout"))
      return enum_from_json(value["layout"], "layout", layout_from_name, layout_name, where);
    if (value.contains("device")) return device_from_json(value["device"], where);
    if (value.contains("node") && value["node"].is_string()) {
      auto it = nodes.find(value["node"].get<std::string>());
      if (it == nodes.end()) {
        fail<ArchiveError>("{}: reads node {}, which is not defined before it", where,
                           describe(value["node"]));
      }
      return it->second;
    }
    for (const char* kind : {"list", "tuple"}) {
      if (value.contains(kind) && value[kind].is_array()) {
        ArgumentList items{{}, std::string(kind) == "tuple"};
        for (const json& item : value[kind]) {
          items.items.push_back(argument(item, nodes, where, depth + 1));
        }
        return items;
      }
    }
    fail<ArchiveError>("{}: malformed argument", where);
  }

  static void read_meta(const json& meta, NodeMeta& out, const std::string& where) {
    out.module_path = printable(text(meta, "module_path", where), "module path", where);
    out.module_type = printable(text(meta, "module_type", where), "module type", where);
    out.td_module = printable(text(meta, "td_module", where), "module path", where);
    if (meta.contains("dtype")) out.tensor.dtype = dtype_from_json(meta["dtype"], where);
    if (meta.contains("device")) out.tensor.device = device_from_json(meta["device"], where);
    if (meta.contains("shape")) out.tensor.shape = shape_from_json(meta["shape"], where);
    if (meta.contains("batch_dims")) {
      out.tensor.batch_dims = batch_dims_from_json(meta["batch_dims"], out.tensor.shape, where);
    }
    if (meta.contains("derived_dims")) {
      out.tensor.derived_dims = derived_dims_from_json(meta["derived_dims"], out.tensor, where);
    }
  }

  std::string where_;
};

GraphSignature signature_from_json(const json& value, const std::string& where) {
  GraphSignature signature;
  for (const json& in : array(value, "inputs", where)) {
    const std::string kind = text(in, "kind", where);
    InputKind k;
    if (kind == "parameter") {
      k = InputKind::kParameter;
    } else if (kind == "buffer") {
      k = InputKind::kBuffer;
    } else if (kind == "constant") {
      k = InputKind::kConstant;
    } else if (kind == "user_input") {
      k = InputKind::kUserInput;
    } else {
      fail<ArchiveError>("{}: unknown input kind {}", where, python_repr(kind));
    }
    signature.inputs.push_back({k,
                                text(in, "name", where),
                                printable(text(in, "target", where), "input target", where),
                                {}});
  }
  for (const json& out : array(value, "outputs", where)) {
    const bool is_tuple =
        out.contains("is_tuple") && out["is_tuple"].is_boolean() && out["is_tuple"].get<bool>();
    signature.outputs.push_back(
        {text(out, "name", where), key_from_json(field(out, "key", where), is_tuple, where)});
  }
  return signature;
}

// The signature must describe the graph exactly: its inputs are the
// placeholders in order, its outputs the nodes the output node returns.
void check_signature(const Graph& graph, const GraphSignature& signature,
                     const std::string& where) {
  std::vector<std::string> placeholders;
  for (const Node* node : graph.nodes()) {
    if (node->op() == OpCode::kPlaceholder) placeholders.push_back(node->name());
  }
  if (placeholders.size() != signature.inputs.size()) {
    fail<ArchiveError>("{}: the signature lists {} inputs but the graph has {} placeholders", where,
                       signature.inputs.size(), placeholders.size());
  }
  std::unordered_set<std::string> user_targets;
  for (size_t i = 0; i < placeholders.size(); ++i) {
    const InputSpec& in = signature.inputs[i];
    if (placeholders[i] != in.name) {
      fail<ArchiveError>("{}: signature input {} is {} but the placeholder is '{}'", where, i,
                         python_repr(in.name), placeholders[i]);
    }
    if (in.kind == InputKind::kUserInput && !user_targets.insert(in.target).second) {
      fail<ArchiveError>("{}: two user inputs are called {}", where, python_repr(in.target));
    }
  }
  const Node* output = graph.output_node();
  if (!output) fail<ArchiveError>("{}: the graph has no output node", where);
  const Argument& result = output->args().at(0);
  if (!result.is<ArgumentList>() || result.as<ArgumentList>().items.empty()) {
    fail<ArchiveError>("{}: the output node must return a non-empty tuple of nodes", where);
  }
  const auto& items = result.as<ArgumentList>().items;
  if (items.size() != signature.outputs.size()) {
    fail<ArchiveError>("{}: the signature lists {} outputs but the graph returns {}", where,
                       signature.outputs.size(), items.size());
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const Node* node = items[i].node();
    if (!node || node->name() != signature.outputs[i].name) {
      fail<ArchiveError>("{}: output {} of the signature is {} but the graph returns {}", where, i,
                         python_repr(signature.outputs[i].name),
                         node ? "%" + node->name() : std::string("a constant"));
    }
  }
}

// A batch specialisation names a node of the graph (or none) and a positive batch.
std::optional<BatchSpecialisation> specialisation_from_json(const json& document,
                                                            const Graph& graph,
                                                            const std::string& where) {
  if (!document.contains("batch_specialisation")) return std::nullopt;
  const std::string here = where + ": batch_specialisation";
  const json& value = document["batch_specialisation"];
  const json& batch = field(value, "traced_batch", here);
  if (!batch.is_number_integer() || batch.get<int64_t>() < 0) {
    fail<ArchiveError>("{}: traced_batch is not a non-negative int", here);
  }
  BatchSpecialisation out{batch.get<int64_t>(), text(value, "node", here),
                          printable(text(value, "module", here), "module path", here)};
  bool found = out.node.empty();
  for (const Node* node : graph.nodes()) found = found || node->name() == out.node;
  if (!found) fail<ArchiveError>("{}: names no node of the graph", here);
  return out;
}

// The tensors of an archive: its weights (`weights`, one per parameter and buffer input) and,
// in version 4, its example inputs (`inputs`, any of the user inputs). Each entry names a
// placeholder, a record of its own, a dtype and a shape, checked against the placeholder's
// (a dimension that follows the batch may differ for an input) and, with every tensor read
// before it, against the memory budget before anything is allocated.
struct ArchiveTensors {
  std::map<std::string, at::Tensor> weights, inputs;
  std::optional<OptimizerState> optimizer;
};

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

// --- the archive ----------------------------------------------------------------

ExportedProgram read_archive(const detail::ByteSource& source, const std::string& where,
                             const LoadOptions& options) {
  const detail::ZipReader zip(source, where, [&](const std::vector<std::string>& names) {
    // tdfx before format 2 wrote through PyTorch's stream writer, which puts
    // every record under a folder ("model/program.json").
    for (const std::string& name : names) {
      const auto slash = name.find('/');
      if (slash != std::string::npos &&
          name.compare(slash, std::string::npos, "/program.json") == 0) {
        fail<ArchiveError>(
            "{}: this is a tdfx archive of format version 1 (pickled weights), which is not "
            "supported; this tdfx reads versions {} to {}: export the program again with this "
            "tdfx",
            where, kOldestVersion, kNewestVersion);
      }
    }
  });
  if (!zip.has(kProgramRecord)) {
    fail<ArchiveError>("{}: not a tdfx archive (no record '{}')", where, kProgramRecord);
  }
  const std::string document_text =
      zip.read(kProgramRecord, options.max_program_bytes, "LoadOptions::max_program_bytes");
  json document = parse_program_json(document_text, options.memory_budget, where);
  if (!document.is_object() || !document.contains("format") || document["format"] != kFormat) {
    fail<ArchiveError>("{}: not a tdfx exported program", where);
  }
  const json& version = field(document, "version", where);
  if (!version.is_number_integer() || version.get<int64_t>() < kOldestVersion ||
      version.get<int64_t>() > kNewestVersion) {
    fail<ArchiveError>(
        "{}: archive format version {} is not supported; this tdfx reads versions {} to {} "
        "(export the program again with this tdfx; version 1 archives pickled their weights)",
        where, describe(version), kOldestVersion, kNewestVersion);
  }
  Graph graph = GraphReader(where).read(field(document, "nodes", where));
  check_program_operations(graph, options.memory_budget, where);
  GraphSignature signature = signature_from_json(field(document, "signature", where), where);
  check_signature(graph, signature, where);
  const json* inputs = nullptr;
  if (document.contains("inputs")) {
    if (version.get<int64_t>() < kVersionWithInputs) {
      fail<ArchiveError>("{}: an archive of version {} has no example inputs", where,
                         version.get<int64_t>());
    }
    inputs = &array(document, "inputs", where);
  }
  const json* optimizer = nullptr;
  if (document.contains("optimizer")) {
    if (version.get<int64_t>() < kVersionWithOptimizer) {
      fail<ArchiveError>("{}: an archive of version {} has no optimizer state", where,
                         version.get<int64_t>());
    }
    optimizer = &document["optimizer"];
  }
  ArchiveTensors tensors = TensorReader(graph, signature, zip, options, where)
                               .read(array(document, "weights", where), inputs, optimizer);
  auto specialisation = specialisation_from_json(document, graph, where);
  std::vector<ModuleBox> modules;
  if (version.get<int64_t>() >= 3) {
    modules = detail::modules_from_json(field(document, "modules", where), graph, where);
  }
  try {
    ExportedProgram program(std::move(graph), std::move(signature), std::move(tensors.weights),
                            std::move(specialisation), std::move(modules));
    program.set_example_inputs(std::move(tensors.inputs));
    if (tensors.optimizer) program.set_optimizer_state(std::move(*tensors.optimizer));
    program.set_memory_budget(options.memory_budget);
    program.set_time_budget(options.time_budget);
    return program;
  } catch (const Error& e) {
    // The graph does not compile: an argument does not fit its operator's schema.
    fail<ArchiveError>("{}: {}", where, e.what());
  }
}

template <typename Fn>
ExportedProgram guarded(const std::string& where, Fn&& fn) {
  try {
    return fn();
  } catch (const InternalError&) {
    throw;  // a bug in tdfx: never dressed as a bad file
  } catch (const ArchiveError&) {
    throw;
  } catch (const FileError&) {
    throw;  // the file could not be read: what it holds was not the problem
  } catch (const c10::Error& e) {
    fail<ArchiveError>("{}: cannot read the archive: {}", where, e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    fail<ArchiveError>("{}: cannot read the archive: out of memory", where);
  } catch (const std::exception& e) {
    fail<ArchiveError>("{}: cannot read the archive: {}", where, e.what());
  }
}

// Reads with seek and read on a stream.
class StreamSource : public detail::ByteSource {
 public:
  StreamSource(std::istream& in, std::string name) : in_(in), name_(std::move(name)) {
    in_.seekg(0, std::ios::end);
    const auto end = in_.tellg();
    if (!in_ || end < 0) fail<ArchiveError>("{}: the stream cannot seek", name_);
    size_ = static_cast<uint64_t>(end);
  }
  uint64_t size() const override { return size_; }
  void read_at(uint64_t offset, char* out, size_t n) const override {
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    in_.read(out, static_cast<std::streamsize>(n));
    if (!in_ || static_cast<size_t>(in_.gcount()) != n) {
      fail<ArchiveError>("{}: cannot read {} bytes at offset {}", name_, n, offset);
    }
  }

 private:
  std::istream& in_;
  std::string name_;
  uint64_t size_ = 0;
};

}  // namespace

std::string program_json(const ExportedProgram& program) {
  return document_text(program, weight_records(program));
}

std::string archive_bytes(const ExportedProgram& program) {
  const WeightRecords weights = weight_records(program);
  detail::ZipWriter zip;
  // program.json first, so that a reader meets the document before the weights.
  zip.add(kProgramRecord, document_text(program, weights));
  for (const auto& [record, tensor] : weights.records) {
    zip.add(record, std::string_view(static_cast<const char*>(tensor.data_ptr()), tensor.nbytes()));
  }
  return zip.finish();
}

void save(const ExportedProgram& program, const std::string& path) {
  std::string bytes;
  try {
    bytes = archive_bytes(program);
  } catch (const ArchiveError& e) {
    fail<ArchiveError>("{}: cannot save: {}", path, e.what());
  }
  // What save writes, load reads: the archive goes through load's every check before it is
  // written (a key with a control character traces and exports, but no archive keeps it).
  // Load's budgets are the reader's to set (LoadOptions), so none is applied here. While it
  // runs the weights are held three times: the program's, the archive's bytes, the copy read.
  LoadOptions unbounded;
  unbounded.max_program_bytes = std::numeric_limits<uint64_t>::max();
  unbounded.memory_budget = std::numeric_limits<uint64_t>::max();
  const std::string where = path + ": cannot save: load would refuse the archive";
  guarded(where, [&] {
    const detail::MemorySource source(bytes);
    return read_archive(source, where, unbounded);
  });
  write_file_atomically(path, bytes);
}

ExportedProgram load(const std::string& path, const LoadOptions& options) {
  const RegularFile file = RegularFile::open(path);
  const detail::FileSource source(file);
  return guarded(path, [&] { return read_archive(source, path, options); });
}

ExportedProgram load(std::istream& in, const std::string& name, const LoadOptions& options) {
  return guarded(name, [&] {
    const StreamSource source(in, name);
    return read_archive(source, name, options);
  });
}

ExportedProgram load_bytes(std::string_view bytes, const std::string& name,
                           const LoadOptions& options) {
  return guarded(name, [&] {
    const detail::MemorySource source(bytes);
    return read_archive(source, name, options);
  });
}

}  // namespace tdfx
