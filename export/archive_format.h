#pragma once

/// \file
/// The archive format's constants, shared by the writer (program_json.h) and the reader
/// (archive.cpp and the readers it calls): program.json's `format` and `version`, its record's
/// name and the bounds on what it may nest.

#include <cstdint>

namespace tdfx::detail {

constexpr const char* kFormat = "tdfx.exported_program";
// Version 3 added the `modules` table (module_table.h); version 2 archives, without it, still
// load and draw without module boxes. Version 4 adds `inputs`, the program's example inputs
// (ExportedProgram::example_inputs): written only by a program that has them, so that every
// other archive stays readable by a tdfx of version 3. Version 5 adds `optimizer`, an
// optimizer's state (ExportedProgram::optimizer_state), likewise written only when there is one.
// kNewestVersion, not kVersion: zip.cpp has a kVersion of its own (the zip format's) in this
// namespace, which a unity build would make ambiguous.
constexpr int64_t kNewestVersion = 5;
constexpr int64_t kVersionWithOptimizer = 5;
constexpr int64_t kVersionWithInputs = 4;
constexpr int64_t kVersionWithoutInputs = 3;
constexpr int64_t kOldestVersion = 2;
constexpr const char* kProgramRecord = "program.json";
// Bounds on what a program document may nest, far above anything tdfx writes.
constexpr int kMaxJsonDepth = 64;
constexpr int kMaxArgumentDepth = 16;
constexpr int kMaxBodyDepth = 8;

}  // namespace tdfx::detail
