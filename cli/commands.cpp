#include "cli/commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <filesystem>
#include <iostream>

// `tdfx demo` traces seed 002's pipeline, which the samples and tests share from here.
#include "samples/pipelines.h"
#include "tdfx/core/dtype_names.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/diagram/program_diagram.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/export/program_diff.h"
#include "tdfx/onnx/onnx_export.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tdfx/viz/render.h"

namespace tdfx::cli {

void run_demo(const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw FileError(out_dir, "cannot create the directory: " + ec.message());

  torch::manual_seed(0);
  auto sequential = samples::seed_sequential();
  const TensorDict input = samples::seed_sequential_input();
  // A dynamic batch: the archive runs at any batch size (`tdfx run` shows it as s0). The
  // pipeline is recorded at batches 32, 33, 1 and 131, which agree.
  TraceOptions options;
  options.dynamic_batch = true;
  TDGraphModule graph_module = symbolic_trace(sequential, input, options);
  std::cout << graph_module.graph() << "\n";
  std::cout << graph_module.code() << "\n";

  const std::string svg = (std::filesystem::path(out_dir) / "trace_sequential.svg").string();
  writing(svg, [&] { save_diagram(graph_module, svg); });
  const std::string html = (std::filesystem::path(out_dir) / "trace_sequential.html").string();
  writing(html, [&] { save_diagram(graph_module, html); });

  // The program of the same trace: exported inputs are named by their in keys joined with "_".
  ExportedProgram program = export_program(graph_module);
  const std::string pt2 = (std::filesystem::path(out_dir) / "trace_sequential.pt2").string();
  writing(pt2, [&] { save(program, pt2); });
}

LoadOptions load_options_within(uint64_t memory_budget) {
  LoadOptions options;
  if (memory_budget > 0) options.memory_budget = memory_budget;
  return options;
}

void run_show(const std::string& path, ShowWhat what, uint64_t memory_budget) {
  const ExportedProgram program = load(path, load_options_within(memory_budget));
  switch (what) {
    case ShowWhat::kReadable:
      std::cout << program.print_readable() << "\n";
      break;
    case ShowWhat::kGraph:
      std::cout << to_string(program.graph()) << "\n";
      break;
    case ShowWhat::kCode:
      std::cout << program.code() << "\n";
      break;
    case ShowWhat::kSignature:
      std::cout << program.graph_signature().str();
      // What a training step's snapshot keeps besides the program (Watch).
      for (const auto& [name, tensor] : program.example_inputs()) {
        std::cout << fmt::format("example input {} {} [{}]\n", name,
                                 dtype_name(tensor.scalar_type()), fmt::join(tensor.sizes(), ", "));
      }
      if (const auto& optimizer = program.optimizer_state()) {
        for (size_t i = 0; i < optimizer->groups.size(); ++i) {
          std::vector<std::string> options;
          for (const auto& [name, value] : optimizer->groups[i].options) {
            options.push_back(fmt::format("{} {:g}", name, value));
          }
          std::cout << fmt::format("optimizer {} group {}: {}; {} parameters\n", optimizer->type, i,
                                   fmt::join(options, ", "),
                                   optimizer->groups[i].parameters.size());
        }
        for (const auto& [name, state] : optimizer->parameters) {
          std::vector<std::string> tensors;
          for (const auto& [tensor_name, tensor] : state.tensors) tensors.push_back(tensor_name);
          std::cout << fmt::format("optimizer state {}: step {}, {}\n", name, state.step,
                                   fmt::join(tensors, ", "));
        }
      }
      break;
  }
}

std::string check_render_extension(const std::string& path) {
  try {
    format_from_extension(path);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

RenderOptions program_render_options(const ExportedProgram& program, size_t max_nodes) {
  RenderOptions options = diagram_options(program);
  options.max_nodes = max_nodes;
  return options;
}

void run_render(const std::string& path, const std::string& out, size_t max_nodes, View view,
                Rankdir rankdir, double time_budget, uint64_t memory_budget) {
  const ExportedProgram program = load(path, load_options_within(memory_budget));
  RenderOptions options = program_render_options(program, max_nodes);
  options.view = view;
  options.rankdir = rankdir;
  options.time_budget = time_budget;
  writing(out, [&] { save_diagram(program.graph(), out, options); });
}

bool run_diff(const std::string& a_path, const std::string& b_path, const std::string& out,
              uint64_t memory_budget) {
  LoadOptions options = load_options_within(memory_budget);
  const ExportedProgram a = load(a_path, options);
  // One budget for both programs: B's weights get what A's left.
  uint64_t a_bytes = 0;
  for (const auto& [name, tensor] : a.state()) a_bytes += tensor.nbytes();
  if (a_bytes >= options.memory_budget) {
    fail<Error>(
        "{}: its weights take {}, the whole memory budget (--memory-budget) of {}, which "
        "leaves nothing for {}",
        a_path, bytes_text(a_bytes), bytes_text(options.memory_budget), b_path);
  }
  const uint64_t whole = options.memory_budget;
  options.memory_budget -= a_bytes;
  const ExportedProgram b = [&] {
    try {
      return load(b_path, options);
    } catch (const ArchiveError& e) {
      if (a_bytes == 0) throw;
      fail<ArchiveError>("{} (what {}'s weights, {}, leave of the memory budget of {})", e.what(),
                         a_path, bytes_text(a_bytes), bytes_text(whole));
    }
  }();
  const ProgramDiff diff = diff_programs(a, b);
  std::cout << diff.report();
  if (!out.empty()) {
    RenderOptions options = diff_render_options(b, diff);
    writing(out, [&] { save_diagram(b.graph(), out, options); });
  }
  return !diff.equal();
}

void run_onnx(const std::string& path, const std::string& out, uint64_t memory_budget) {
  const ExportedProgram program = load(path, load_options_within(memory_budget));
  // The converter's own tensors are held to the budget the program was loaded with.
  writing(out, [&] { save_onnx(program, out); });
}

std::string check_onnx_extension(const std::string& path) {
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension == ".onnx") return "";
  return "the model's name must end in .onnx (got '" + extension + "')";
}

}  // namespace tdfx::cli
