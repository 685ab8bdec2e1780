#pragma once

/// \file
/// Saving and loading exported programs: one zip archive (PyTorch's stream
/// format, readable by Python's zipfile) holding `program.json` (graph and
/// signature) and `weights.pkl` (the parameters, loadable by `torch.load`).

#include <istream>
#include <string>

#include "export/program.h"

namespace tdfx {

/// Writes `program` to `path` atomically: a temporary file in the same
/// folder, renamed over `path` once complete. ArchiveError naming the path
/// on failure, with no file left behind.
void save(const ExportedProgram& program, const std::string& path);

/// Reads a program saved by save(). A missing, truncated, corrupt or foreign
/// file raises ArchiveError saying what is wrong; it never crashes.
ExportedProgram load(const std::string& path);

/// load() from a stream; `name` is used in error messages.
ExportedProgram load(std::istream& in, const std::string& name = "<stream>");

/// The graph as the archive's JSON text (no weights), for inspection.
std::string program_json(const ExportedProgram& program);

}  // namespace tdfx
