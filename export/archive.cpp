#include "tdfx/export/archive.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/export/archive_format.h"
#include "tdfx/export/graph_reader.h"
#include "tdfx/export/json_checks.h"
#include "tdfx/export/module_table.h"
#include "tdfx/export/op_policy.h"
#include "tdfx/export/program_json.h"
#include "tdfx/export/zip.h"

namespace tdfx {
namespace {

using detail::array;
using detail::check_signature;
using detail::describe;
using detail::document_text;
using detail::dtype_from_json;
using detail::field;
using detail::graph_from_json;
using detail::kFormat;
using detail::kNewestVersion;
using detail::kOldestVersion;
using detail::kProgramRecord;
using detail::kVersionWithInputs;
using detail::kVersionWithOptimizer;
using detail::parse_program_json;
using detail::shape_from_json;
using detail::signature_from_json;
using detail::specialisation_from_json;
using detail::text;
using detail::weight_records;
using detail::WeightRecords;
using nlohmann::json;

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
  Graph graph = graph_from_json(field(document, "nodes", where), where);
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
