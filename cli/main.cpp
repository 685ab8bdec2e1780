// tdfx: trace seed 002's pipeline, and inspect or draw exported programs.
//
//   tdfx demo [--out DIR]
//   tdfx show FILE.pt2 [--graph | --code | --readable | --signature]
//   tdfx render FILE.pt2 -o OUT.{svg,png,pdf,dot}

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"

namespace {

constexpr const char* kFooter =
    "Exit status: 0 on success, 1 on a usage error (or any other failure), 2 on a file that\n"
    "cannot be read or written (the message on stderr names the file and the problem).\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace tdfx::cli;
  CLI::App app{"tdfx: TensorDict pipelines traced to graphs, exported, shown and drawn.", "tdfx"};
  app.footer(kFooter);
  app.require_subcommand(1);

  std::string out_dir = ".";
  CLI::App* demo = app.add_subcommand(
      "demo", "Trace seed 002's sequential; print its graph and code; write its SVG and .pt2.");
  demo->add_option("--out", out_dir,
                   "Directory for trace_sequential.{svg,pt2} (created if missing)")
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
  CLI::Option* signature_flag =
      show->add_flag("--signature", signature, "Print the graph signature");
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
  render->add_option("-o,--output", render_out, "The drawing: .svg, .png, .pdf, .dot or .gv")
      ->required()
      ->check(CLI::Validator(check_render_extension, "OUT.{svg,png,pdf,dot,gv}", "extension"));
  render->footer(kFooter);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == static_cast<int>(CLI::ExitCodes::Success) ? kExitOk : kExitUsage;
  }

  try {
    if (demo->parsed()) {
      run_demo(out_dir);
    } else if (show->parsed()) {
      const ShowWhat what = graph       ? ShowWhat::kGraph
                            : code      ? ShowWhat::kCode
                            : signature ? ShowWhat::kSignature
                                        : ShowWhat::kReadable;
      run_show(show_file, what);
    } else if (render->parsed()) {
      run_render(render_file, render_out);
    }
    return kExitOk;
  } catch (const FileError& e) {
    std::cerr << "tdfx: " << e.what() << "\n";
    return kExitFile;
  } catch (const std::exception& e) {
    std::cerr << "tdfx: " << e.what() << "\n";
    return kExitUsage;
  }
}
