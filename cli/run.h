#pragma once

/// \file
/// `tdfx run FILE.pt2 [--input NAME=FILE]... [--seed N]`: runs a loaded
/// program on inputs read from tensor files (export/tensor_file.h) or drawn at
/// random, and prints what came out. Each report is a function of the loaded
/// program and its prepared inputs (print_run today), so that further reports
/// (statistics per node, a profile, the first non-finite node) are siblings of
/// it, chosen by run_program.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tdfx/export/program.h"
#include "tdfx/viz/render_options.h"

namespace tdfx::cli {

/// One `--input NAME=FILE`.
struct InputArgument {
  std::string name;
  std::string file;
};

/// Parses `NAME=FILE`; "" when `text` has that form, otherwise why not (for
/// the argument parser's validator).
std::string check_input_argument(const std::string& text);

/// Splits `NAME=FILE` (checked by check_input_argument) at its first `=`.
InputArgument parse_input_argument(const std::string& text);

/// A user input of the program, ready to run, and where it came from.
struct RunInput {
  std::string name;
  at::Tensor value;
  /// The file it was read from, `the archive's example`, or `random (seed N)` when drawn.
  std::string source;
};

/// The program's user inputs, in signature order. An input named by `given`
/// is read from its file, which holds a single tensor or a dict holding the
/// input's name. An input not given whose example the archive keeps
/// (ExportedProgram::example_inputs: a training step's snapshot) is that example. Every
/// other input is drawn from its placeholder's dtype and traced shape, its batch dimensions (s0) at
/// the given inputs' batch size: floats from a standard normal, integers from 0..9, bools fair. The
/// draws come from one generator seeded with `seed`, in signature order, made for every input
/// whether given or not, so that an input's random value depends only on the seed, the program and
/// the batch size.
///
/// ArchiveError for a file that cannot be read or is refused (exit 2);
/// tdfx::Error naming the input and what was expected for an unknown or
/// repeated name, a dict without the name, a tensor of another dtype or
/// shape, or given inputs of different batch sizes (exit 1).
std::vector<RunInput> prepare_inputs(const ExportedProgram& program,
                                     const std::vector<InputArgument>& given, uint64_t seed);

/// Runs `program` on `inputs` and prints two tables to `out`, each at most
/// `width` columns wide: the inputs (name, dtype, shape, source) and the outputs
/// (key, dtype, shape, and min, max and mean for floating types; min and max
/// for integers).
void print_run(const ExportedProgram& program, const std::vector<RunInput>& inputs,
               std::ostream& out, size_t width = 80);

/// `tdfx run`: loads the archive at `path` (its refusal an ArchiveError), prepares
/// the inputs and prints print_run's report to standard output.
/// The reports `tdfx run` prints after its input and output tables, and the overlay it draws.
struct RunReports {
  /// `--stats`: each node's dtype, shape, min, max, mean, std, NaN/Inf counts, zeros.
  bool stats = false;
  /// `--profile`: each node's median time over `repeats` runs, and per module.
  bool profile = false;
  size_t repeats = 20;
  /// `--find-nonfinite`: the first node whose output holds NaN or Inf from finite inputs.
  bool find_nonfinite = false;
  /// `--backward`: a backward pass from `loss` after the forward one; with it,
  /// `--grad-stats` prints each node's and parameter's gradient and `--find-nonfinite-grad`
  /// the first node whose gradient holds NaN or Inf from finite ones.
  bool backward = false;
  /// `--loss`: "sum" (of every output, the default), or an output named by its key or node.
  std::string loss = "sum";
  bool grad_stats = false;
  bool find_nonfinite_grad = false;
  /// `--memory-budget MB`: the most memory the program's run may hold at once, in bytes
  /// (LoadOptions::memory_budget; 0 keeps its default, 4 GiB).
  uint64_t memory_budget = 0;
  /// The most time the whole command may take with every report's runs, in seconds: each op
  /// is checked before it starts (LoadOptions::time_budget; 0 keeps its default, 30 s).
  double time_budget = 0;
  /// `--width N`: the widest line of the tables; 0 takes the terminal's `COLUMNS`, else 80
  /// for the input and output tables and 100 for the reports.
  size_t width = 0;
  /// `--view`: which view the overlay drawing shows (an .html page holds both).
  View view = View::kOps;
  /// `-o FILE`: the graph drawn with what the reports found (.svg, .png, .pdf, .dot, .html);
  /// with `--backward`, each node's gradient and each TensorDictModule's flow.
  std::string overlay;
  /// `--save FILE.pt`: the inputs and outputs of the run, as a dict Python's torch.load reads:
  /// `input:NAME` for each user input, `output:NODE` for each output (its node's name in the
  /// signature).
  std::string save;
};

/// `tdfx run`: loads `path`, prepares its inputs, prints print_run's tables and the reports
/// asked for, and writes the overlay drawing. Returns true when a `--find-nonfinite*` report
/// found a non-finite value or gradient (the command then exits kExitNonFinite).
bool run_program(const std::string& path, const std::vector<InputArgument>& given, uint64_t seed,
                 const RunReports& reports = {});

}  // namespace tdfx::cli
