#pragma once

/// \file
/// Saving and loading exported programs (`.pt2`). An archive is a zip of
/// uncompressed records, readable by Python's `zipfile`:
///
///     program.json   {"format": "tdfx.exported_program", "version": 3,
///                     "nodes": [...], "signature": {...},
///                     "weights": [{"name", "record", "dtype", "shape"}, ...],
///                     "modules": [...]}
///     weights/0 ...  each weight's raw bytes, C-contiguous, little-endian
///
/// Version 3 is a program alone; 4 adds "inputs" (example inputs kept with it), 5 an
/// "optimizer" (a training step's snapshot); "batch_specialisation" is there when the program
/// holds to the batch it was traced at (a static trace). export/archive_format.h holds the
/// versions.
///
/// Loading trusts nothing: every size, offset and checksum of the zip, the
/// JSON's depth and size, every name that reaches printed code, every
/// operator (an allowlist of pure tensor operators), the signature against
/// the graph and each weight against its record and its placeholder are
/// checked before anything runs. No pickle is involved.

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>

#include "tdfx/export/program.h"

namespace tdfx {

/// Bounds on what loading an archive may cost.
struct LoadOptions {
  /// The largest program.json accepted, in bytes.
  uint64_t max_program_bytes = uint64_t{64} << 20;
  /// The most memory, in bytes, that each of these may take: reading program.json (what its
  /// document and the graph made from it hold, charged per JSON value as it is parsed: past
  /// the budget the parse stops), the weights together, any one constant size of the program
  /// (`aten::zeros([n, m])`), and a run of the loaded program at once
  /// (ExportedProgram::memory_budget): an op that would go past it is refused before it
  /// allocates.
  uint64_t memory_budget = uint64_t{4} << 30;
  /// The most time, in seconds, each run of the loaded program may take
  /// (ExportedProgram::time_budget): an op that could not finish in what is left, or that
  /// comes after the deadline, is refused before it starts (core/time_budget.h). 0: none.
  double time_budget = 30;
};

/// Writes `program` to `path` atomically (see write_file_atomically): the
/// archive is built in memory, then written beside `path` and renamed over
/// it. A program that cannot be archived is an ArchiveError, a file that cannot be
/// written a FileError, both naming the path; no file is left behind and an existing
/// file at `path` is unchanged.
void save(const ExportedProgram& program, const std::string& path);

/// Reads a program saved by save(). A missing, unreadable or non-regular file is a
/// FileError; a truncated, corrupt, foreign, over-budget or unsafe one an ArchiveError
/// saying what is wrong; it never crashes.
ExportedProgram load(const std::string& path, const LoadOptions& options = {});

/// load() from a seekable stream; `name` is used in error messages.
ExportedProgram load(std::istream& in, const std::string& name = "<stream>",
                     const LoadOptions& options = {});

/// load() from the archive's bytes in memory.
ExportedProgram load_bytes(std::string_view bytes, const std::string& name = "<memory>",
                           const LoadOptions& options = {});

/// The archive's bytes, as save() writes them: checked as save() checks them, an ArchiveError
/// (starting "cannot archive the program") when load would refuse them.
std::string archive_bytes(const ExportedProgram& program);

/// The archive's program.json text (graph, signature, weight table), for inspection.
std::string program_json(const ExportedProgram& program);

}  // namespace tdfx
