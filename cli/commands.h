#pragma once

/// \file
/// The subcommands of the `tdfx` tool, apart from their argument parsing
/// (main.cpp), so that each reads as the job it does.

#include <cstddef>
#include <iostream>
#include <string>

#include "tdfx/core/error.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/viz/render.h"

namespace tdfx::cli {

/// Exit codes: success, a usage error (bad arguments, or any other tdfx
/// error), a file that cannot be read, written or loaded (tdfx::FileError,
/// tdfx::ArchiveError: both name the file).
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitFile = 2;
/// `tdfx run --find-nonfinite` or `--find-nonfinite-grad` found a NaN or Inf.
inline constexpr int kExitNonFinite = 3;
/// `tdfx diff` exits as diff(1) does: 0 equal, 1 different, 2 on any failure.
inline constexpr int kExitDifferent = 1;
inline constexpr int kExitDiffTrouble = 2;

/// Which text `tdfx show` prints.
enum class ShowWhat { kReadable, kGraph, kCode, kSignature };

/// `tdfx demo`: traces seed 002's sequential, prints its graph and code, and
/// writes `out_dir`/trace_sequential.svg, the interactive page
/// `out_dir`/trace_sequential.html and `out_dir`/trace_sequential.pt2
/// (creating `out_dir` if missing).
void run_demo(const std::string& out_dir);

/// The options every command loads a program with: LoadOptions' defaults, with the memory
/// budget `memory_budget` bytes unless it is 0.
LoadOptions load_options_within(uint64_t memory_budget);

/// `tdfx show`: loads `path` within `memory_budget` bytes (load_options_within) and prints the
/// part of it named by `what`.
void run_show(const std::string& path, ShowWhat what, uint64_t memory_budget = 0);

/// Runs `fn`, which produces the file `path`, and prints `wrote PATH`. A file that cannot
/// be written is fn's FileError or ArchiveError, which names it.
template <typename Fn>
void writing(const std::string& path, Fn&& fn) {
  fn();
  std::cout << "wrote " << path << "\n";
}

/// What `render` draws of a loaded program beyond its graph: the key of each output and the
/// module boxes the archive keeps (diagram_options).
RenderOptions program_render_options(const ExportedProgram& program, size_t max_nodes);

/// `tdfx render`: loads `path` within `memory_budget` bytes (load_options_within) and draws it to
/// `out` (.svg, .png, .pdf, .dot, .gv; .html: the interactive page) in `view` (every op boxed by
/// TensorDictModule, or one node per module) and `rankdir`, the outputs labelled with their keys. A
/// drawing over `max_nodes` (RenderOptions::max_nodes) is refused, as is one Graphviz cannot draw
/// or lay out within `time_budget` seconds (RenderOptions::time_budget): a tdfx::Error, not a
/// FileError.
void run_render(const std::string& path, const std::string& out, size_t max_nodes,
                View view = View::kOps, Rankdir rankdir = Rankdir::kTopBottom,
                double time_budget = kDefaultDrawingSeconds, uint64_t memory_budget = 0);

/// `tdfx diff`: loads both programs within one memory budget of `memory_budget` bytes
/// (load_options_within; B within what A's weights leave of it), prints how `b_path` differs from
/// `a_path` (ProgramDiff::report, nothing when equal) and, with `out`, draws `b_path` with the
/// differences marked (diff_render_options; .svg, .png, .pdf, .dot, .html). True when they
/// differ.
bool run_diff(const std::string& a_path, const std::string& b_path, const std::string& out,
              uint64_t memory_budget = 0);

/// `tdfx onnx`: loads `path` and writes it to `out` as a checked ONNX model (save_onnx); an
/// operator with no ONNX form is an OnnxError naming the node, and nothing is written. The
/// program is loaded, and the tensors the converter makes are held, within `memory_budget`
/// bytes (0: LoadOptions' default, 4 GiB).
void run_onnx(const std::string& path, const std::string& out, uint64_t memory_budget = 0);

/// "" when `path` ends in `.onnx`, otherwise why not.
std::string check_onnx_extension(const std::string& path);

/// "" when `path` names a format `render` can write, otherwise why not.
std::string check_render_extension(const std::string& path);

}  // namespace tdfx::cli
