// Saving and loading archives (archive.h): the zip and its records. read_archive checks
// program.json's format and version and reads its parts through json_checks.h, graph_reader.h,
// archive_tensors.h and module_table.h; saving writes them through program_json.h.

#include "tdfx/export/archive.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tdfx/export/archive_format.h"
#include "tdfx/export/archive_tensors.h"
#include "tdfx/export/graph_reader.h"
#include "tdfx/export/json_checks.h"
#include "tdfx/export/module_table.h"
#include "tdfx/export/op_policy.h"
#include "tdfx/export/program_json.h"
#include "tdfx/export/zip.h"

namespace tdfx {
namespace {

using detail::ArchiveTensors;
using detail::array;
using detail::check_signature;
using detail::describe;
using detail::document_text;
using detail::field;
using detail::graph_from_json;
using detail::kFormat;
using detail::kNewestVersion;
using detail::kOldestVersion;
using detail::kProgramRecord;
using detail::kVersionWithInputs;
using detail::kVersionWithOptimizer;
using detail::parse_program_json;
using detail::signature_from_json;
using detail::specialisation_from_json;
using detail::tensors_from_json;
using detail::text;
using detail::weight_records;
using detail::WeightRecords;
using nlohmann::json;

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
  ArchiveTensors tensors = tensors_from_json(array(document, "weights", where), inputs, optimizer,
                                             graph, signature, zip, options, where);
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

// Reads with `fn`: a bug (InternalError) and the reader's own refusals pass; a file that could
// not be read (FileError) is not a bad file; anything else the reading met (LibTorch's error,
// an allocation that failed, another tdfx error) is a bad file.
template <typename Fn>
ExportedProgram guarded(const std::string& where, Fn&& fn) {
  return rethrow_as<ArchiveError, ArchiveError, FileError>(where + ": cannot read the archive",
                                                           std::forward<Fn>(fn));
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

namespace {

// The archive's bytes, put through load's every check before they are handed out: what tdfx
// writes, tdfx reads (a key with a control character traces and exports, but no archive keeps
// it). Load's budgets are the reader's to set (LoadOptions), so none is applied here. While it
// runs the weights are held three times: the program's, the archive's bytes, the copy read.
// ArchiveErrors begin with `where`.
std::string checked_archive_bytes(const ExportedProgram& program, const std::string& where) {
  std::string bytes;
  try {
    const WeightRecords weights = weight_records(program);
    detail::ZipWriter zip;
    // program.json first, so that a reader meets the document before the weights.
    zip.add(kProgramRecord, document_text(program, weights));
    for (const auto& [record, tensor] : weights.records) {
      zip.add(record,
              std::string_view(static_cast<const char*>(tensor.data_ptr()), tensor.nbytes()));
    }
    bytes = zip.finish();
  } catch (const ArchiveError& e) {
    fail<ArchiveError>("{}: {}", where, e.what());
  }
  LoadOptions unbounded;
  unbounded.max_program_bytes = std::numeric_limits<uint64_t>::max();
  unbounded.memory_budget = std::numeric_limits<uint64_t>::max();
  const std::string refused = where + ": load would refuse the archive";
  guarded(refused, [&] {
    const detail::MemorySource source(bytes);
    return read_archive(source, refused, unbounded);
  });
  return bytes;
}

}  // namespace

std::string archive_bytes(const ExportedProgram& program) {
  return checked_archive_bytes(program, "cannot archive the program");
}

void save(const ExportedProgram& program, const std::string& path) {
  write_file_atomically(path, checked_archive_bytes(program, path + ": cannot save"));
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
