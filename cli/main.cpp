// tdfx: trace seed 002's pipeline, and inspect or draw exported programs.
//
//   tdfx --help | --version
//   tdfx demo [--out DIR]
//   tdfx show FILE.pt2 [--graph | --code | --readable | --signature] [--memory-budget MB]
//   tdfx render FILE.pt2 -o OUT.{svg,png,pdf,dot,html} [--view ops|modules] [--rankdir TB|LR]
//               [--max-nodes N] [--time-budget S] [--memory-budget MB]
//   tdfx diff A.pt2 B.pt2 [-o DIFF.{svg,png,pdf,dot,html}] [--memory-budget MB]
//   tdfx onnx FILE.pt2 -o FILE.onnx [--memory-budget MB]
//   tdfx run FILE.pt2 [--input NAME=FILE.pt]... [--seed N] [--stats] [--profile [--repeats N]]
//            [--find-nonfinite] [-o OVERLAY.{svg,png,pdf,dot,html} [--view ops|modules]]
//            [--save RUN.pt] [--width N] [--memory-budget MB] [--time-budget S]
//            [--backward [--loss sum|OUTPUT] [--grad-stats] [--find-nonfinite-grad]]

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/commands.h"
#include "cli/run.h"
#include "tdfx/core/text_table.h"
#include "tdfx/viz/render.h"

namespace {

constexpr const char* kFooter =
    "Exit status: 0 on success, 1 on a usage error (or any other failure), 2 on a file that\n"
    "cannot be read or written, standard output included (the message on stderr names the\n"
    "file and the problem).\n";

/// Flushes standard output and tells whether everything printed reached it; when not (a
/// full disk, `> /dev/full`, a closed pipe) says so on stderr, since the output is lost.
bool stdout_written() {
  errno = 0;
  std::cout.flush();
  if (std::cout) return true;
  const int error = errno;
  std::cerr << "tdfx: standard output: cannot write";
  if (error != 0) std::cerr << ": " << std::strerror(error);
  std::cerr << "\n";
  return false;
}

/// "" for a whole number written in digits, else why not: CLI11 alone would read `-1` as the
/// largest size_t.
std::string whole_number(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) return "";
  return "expected a whole number, got '" + text + "'";
}

/// Adds `--memory-budget MB` to `command`, read into `megabytes` (0 when not given: the
/// default of LoadOptions, 4096 MB), described by `what`.
void add_memory_budget(CLI::App* command, uint64_t& megabytes, const std::string& what) {
  command->add_option("--memory-budget", megabytes, "MB: " + what + " (default 4096)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
}

/// Says on stderr what was wrong with the command line, as `tdfx: ...` or
/// `tdfx COMMAND: ...`, and where the help is. CLI11 alone reports an unknown command
/// or a top-level option as "A subcommand is required", so those are told here.
void report_usage_error(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands({})) commands.push_back(command->get_name());
  std::string list;
  for (size_t i = 0; i < commands.size(); ++i) {
    list += (i == 0 ? "" : i + 1 == commands.size() ? " or " : ", ") + commands[i];
  }
  const std::string first = argc > 1 ? argv[1] : "";
  const bool known = std::find(commands.begin(), commands.end(), first) != commands.end();
  if (first.empty()) {
    std::cerr << "tdfx: a command is required: " << list << "\n";
  } else if (!known && first[0] == '-') {
    std::cerr << "tdfx: unknown option '" << first << "' (options come after the command: " << list
              << ")\n";
  } else if (!known) {
    std::cerr << "tdfx: unknown command '" << first << "' (the commands: " << list << ")\n";
  } else {
    std::cerr << "tdfx " << first << ": " << error.what() << "\n";
    std::cerr << "Run 'tdfx " << first << " --help' for more information.\n";
    return;
  }
  std::cerr << "Run 'tdfx --help' for more information.\n";
}

/// `status`, or kExitFile when it was a success (or a finding) whose output was lost.
int finish(int status) {
  using tdfx::cli::kExitFile;
  using tdfx::cli::kExitOk;
  // Output lost: a report nobody saw is no success, nor a finding a script could act on.
  if (!stdout_written() && (status == kExitOk || status == tdfx::cli::kExitNonFinite)) {
    return kExitFile;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tdfx::cli;
  CLI::App app{"tdfx: TensorDict pipelines traced to graphs, exported, shown and drawn.", "tdfx"};
  app.footer(kFooter);
  app.require_subcommand(1);
  app.set_version_flag("--version", "tdfx " TDFX_VERSION);

  std::string out_dir = ".";
  CLI::App* demo = app.add_subcommand(
      "demo",
      "Trace seed 002's sequential; print its graph and code; write its SVG, page and .pt2.");
  demo->add_option("--out", out_dir,
                   "Directory for trace_sequential.{svg,html,pt2} (created if missing)")
      ->capture_default_str();
  demo->footer(kFooter);

  std::string show_file;
  bool graph = false, code = false, readable = false, signature = false;
  CLI::App* show = app.add_subcommand("show", "Print an exported program (.pt2).");
  show->add_option("FILE", show_file, "The exported program (.pt2)")->required();
  CLI::Option* graph_flag = show->add_flag("--graph", graph, "Print the graph");
  CLI::Option* code_flag = show->add_flag("--code", code, "Print the generated code");
  CLI::Option* readable_flag =
      show->add_flag("--readable", readable, "Print the readable module (the default)");
  CLI::Option* signature_flag = show->add_flag(
      "--signature", signature,
      "Print the graph signature, and a snapshot's example inputs and optimizer state");
  uint64_t show_budget_mb = 0;
  add_memory_budget(show, show_budget_mb,
                    "the most memory loading the program may take, its weights and its "
                    "program.json; past it, the file is refused");
  const std::vector<CLI::Option*> flags{graph_flag, code_flag, readable_flag, signature_flag};
  for (CLI::Option* flag : flags) {
    for (CLI::Option* other : flags) {
      if (other != flag) flag->excludes(other);
    }
  }
  show->footer(kFooter);

  std::string render_file, render_out;
  CLI::App* render = app.add_subcommand("render", "Draw an exported program's graph.");
  render->add_option("FILE", render_file, "The exported program (.pt2)")->required();
  // Checked before the program is loaded: a bad extension is a usage error.
  render
      ->add_option("-o,--output", render_out,
                   "The drawing: .svg, .png, .pdf, .dot, .gv, or .html for an interactive page")
      ->required()
      ->check(CLI::Validator(check_render_extension, "OUT.{svg,png,pdf,dot,gv,html}", "extension"));
  size_t max_nodes = tdfx::kDefaultMaxNodes;
  render
      ->add_option("--max-nodes", max_nodes,
                   "Refuse to lay out a graph of more nodes than this (layout time grows "
                   "faster than the graph; .dot output has no limit)")
      ->capture_default_str()
      ->check(CLI::Validator(whole_number, "N", "whole number"));
  double render_seconds = tdfx::kDefaultDrawingSeconds;
  render
      ->add_option("--time-budget", render_seconds,
                   "S: the most seconds Graphviz may take to lay out and render the drawing "
                   "(each view of a page); past it, it is stopped")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  std::string view = "ops";
  render
      ->add_option("--view", view,
                   "ops: every op, boxed by TensorDictModule; modules: one node per "
                   "TensorDictModule, one edge per key, nested sequentials as boxes")
      ->capture_default_str()
      ->check(CLI::IsMember({"ops", "modules"}));
  std::string rankdir = "TB";
  uint64_t render_budget_mb = 0;
  add_memory_budget(render, render_budget_mb,
                    "the most memory loading the program may take, its weights and its "
                    "program.json; past it, the file is refused");
  render->add_option("--rankdir", rankdir, "The drawing flows top-down (TB) or left-right (LR)")
      ->capture_default_str()
      ->check(CLI::IsMember({"TB", "LR"}));
  render->footer(kFooter);

  std::string onnx_file, onnx_out;
  CLI::App* onnx = app.add_subcommand(
      "onnx", "Write an exported program (.pt2) as an ONNX model (opset 17), checked by ONNX.");
  onnx->add_option("FILE", onnx_file, "The exported program (.pt2)")->required();
  onnx->add_option("-o,--output", onnx_out, "The model (.onnx)")
      ->required()
      ->check(CLI::Validator(check_onnx_extension, "OUT.onnx", "extension"));
  uint64_t onnx_budget_mb = 0;
  add_memory_budget(onnx, onnx_budget_mb,
                    "the most memory loading the program, and the tensors the converter makes "
                    "itself, may take; past it, the file or the node is refused");
  onnx->footer(kFooter);

  std::string diff_a, diff_b, diff_out;
  CLI::App* diff = app.add_subcommand(
      "diff",
      "Compare two exported programs node by node: nodes added, removed and changed, the "
      "signature's changes and the weights that differ (two checkpoints: each module's and "
      "weight's relative change and cosine similarity).");
  diff->add_option("A", diff_a, "The program before (.pt2)")->required();
  diff->add_option("B", diff_b, "The program after (.pt2)")->required();
  diff->add_option("-o,--output", diff_out,
                   "Draw B with what was added and changed marked, and what was removed "
                   "named (.svg, .png, .pdf, .dot, .html)")
      ->check(CLI::Validator(check_render_extension, "OUT.{svg,png,pdf,dot,gv,html}", "extension"));
  uint64_t diff_budget_mb = 0;
  add_memory_budget(diff, diff_budget_mb,
                    "the most memory loading both programs may take, their weights and "
                    "program.json files together; past it, the second file is refused");
  diff->footer(
      "Exit status: 0 when the programs are equal (nodes renamed alone are equal), 1 when they\n"
      "differ, 2 on any failure: a usage error, a file that cannot be read or loaded.\n");

  std::string run_file;
  std::vector<std::string> run_inputs;
  uint64_t seed = 0;
  CLI::App* run = app.add_subcommand(
      "run",
      "Run an exported program on tensors from files or drawn at random; summarise its "
      "outputs.");
  run->add_option("FILE", run_file, "The exported program (.pt2)")->required();
  run->add_option("--input", run_inputs,
                  "NAME=FILE: input NAME from a file torch.save wrote (a tensor, or a dict "
                  "holding NAME); repeat for more inputs")
      ->check(CLI::Validator(check_input_argument, "NAME=FILE", "input"));
  run->add_option("--seed", seed,
                  "Seed of the inputs not given, drawn from their dtype and traced shape "
                  "(floats normal, integers 0..9, bools fair)")
      ->capture_default_str()
      ->check(CLI::Validator(whole_number, "N", "whole number"));
  RunReports reports;
  run->add_flag("--stats", reports.stats,
                "Print every node's dtype, shape, min, max, mean, std, NaN/Inf counts, zeros");
  CLI::Option* profile = run->add_flag("--profile", reports.profile,
                                       "Print each node's and module's median time, slowest first");
  run->add_option("--repeats", reports.repeats, "Runs the profile takes the median of")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->needs(profile);
  run->add_flag("--find-nonfinite", reports.find_nonfinite,
                "Print the first node whose output holds NaN or Inf from finite inputs");
  CLI::Option* backward =
      run->add_flag("--backward", reports.backward,
                    "Run backward from --loss after the forward pass and print the loss");
  run->add_option("--loss", reports.loss,
                  "What backward starts from: sum (of every output) or one output by key or "
                  "node name (its sum)")
      ->capture_default_str()
      ->needs(backward);
  run->add_flag("--grad-stats", reports.grad_stats,
                "With --backward: print every node's and parameter's gradient norm, min, max, "
                "mean, NaN/Inf counts and zeros")
      ->needs(backward);
  run->add_flag("--find-nonfinite-grad", reports.find_nonfinite_grad,
                "With --backward: print the first node, in backward order, whose gradient holds "
                "NaN or Inf from finite ones")
      ->needs(backward);
  uint64_t budget_mb = 0;
  add_memory_budget(run, budget_mb,
                    "the most memory loading the program, and then its run, may hold at once, "
                    "the inputs drawn and read included; an op that would go past it is "
                    "refused before it allocates");
  run->add_option("--time-budget", reports.time_budget,
                  "S: the most seconds the run may take, every report's runs included "
                  "(default 30); an op that could not finish in what is left, or that comes "
                  "after it, is refused before it starts")
      ->check(CLI::Range(0.001, 1e6));
  run->add_option("--width", reports.width,
                  "The widest line of the tables (default: COLUMNS, else 80 and 100 for "
                  "the reports)")
      ->check(CLI::Range(tdfx::kMinTableWidth, tdfx::kMaxTableWidth));
  CLI::Option* overlay =
      run->add_option("-o,--output", reports.overlay,
                      "Draw the graph with what --stats, --profile, --find-nonfinite and "
                      "--backward found (.svg, .png, .pdf, .dot, .html)")
          ->check(
              CLI::Validator(check_render_extension, "OUT.{svg,png,pdf,dot,gv,html}", "extension"));
  std::string run_view = "ops";
  run->add_option("--view", run_view,
                  "The overlay drawing: ops (every node) or modules (one node per "
                  "TensorDictModule); an .html page holds both")
      ->capture_default_str()
      ->check(CLI::IsMember({"ops", "modules"}))
      ->needs(overlay);
  run->add_option("--save", reports.save,
                  "Write the run's inputs and outputs to FILE.pt, a dict torch.load reads "
                  "(input:NAME, output:KEY, the key joined with _)");
  run->footer(
      "Exit status: 0 on success, 1 on a usage error (or any other failure), 2 on a file that\n"
      "cannot be read or written, standard output included (the message on stderr names the\n"
      "file and the problem), 3 when --find-nonfinite or --find-nonfinite-grad found a NaN or\n"
      "Inf.\n");

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return finish(app.exit(e) == 0 ? kExitOk : kExitUsage);  // the help, on stdout
  } catch (const CLI::ParseError& e) {
    report_usage_error(app, e, argc, argv);
    return finish(argc > 1 && std::string(argv[1]) == "diff" ? kExitDiffTrouble : kExitUsage);
  }
  if (diff->parsed()) {
    try {
      const bool different = run_diff(diff_a, diff_b, diff_out, diff_budget_mb << 20);
      // A report that was lost answers nothing: trouble, as diff(1) says.
      if (!stdout_written()) return kExitDiffTrouble;
      return different ? kExitDifferent : kExitOk;
    } catch (const std::exception& e) {
      std::cerr << "tdfx: " << e.what() << "\n";
      return finish(kExitDiffTrouble);
    }
  }

  try {
    if (demo->parsed()) {
      run_demo(out_dir);
    } else if (show->parsed()) {
      const ShowWhat what = graph       ? ShowWhat::kGraph
                            : code      ? ShowWhat::kCode
                            : signature ? ShowWhat::kSignature
                                        : ShowWhat::kReadable;
      run_show(show_file, what, show_budget_mb << 20);
    } else if (render->parsed()) {
      run_render(render_file, render_out, max_nodes, *tdfx::view_from_string(view),
                 rankdir == "LR" ? tdfx::Rankdir::kLeftRight : tdfx::Rankdir::kTopBottom,
                 render_seconds, render_budget_mb << 20);
    } else if (onnx->parsed()) {
      run_onnx(onnx_file, onnx_out, onnx_budget_mb << 20);
    } else if (run->parsed()) {
      std::vector<InputArgument> inputs;
      for (const std::string& text : run_inputs) inputs.push_back(parse_input_argument(text));
      reports.view = *tdfx::view_from_string(run_view);
      reports.memory_budget = budget_mb << 20;
      if (run_program(run_file, inputs, seed, reports)) return finish(kExitNonFinite);
    }
    return finish(kExitOk);
  } catch (const tdfx::FileError& e) {
    std::cerr << "tdfx: " << e.what() << "\n";
    return finish(kExitFile);
  } catch (const tdfx::ArchiveError& e) {
    std::cerr << "tdfx: " << e.what() << "\n";
    return finish(kExitFile);
  } catch (const std::exception& e) {
    std::cerr << "tdfx: " << e.what() << "\n";
    return finish(kExitUsage);
  }
}
