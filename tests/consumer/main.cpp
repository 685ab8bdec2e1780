// A project outside tdfx, built against the installed package: it includes only the
// umbrella header, as the README shows, traces a pipeline, prints with the fmt formatters
// and operator<<, walks the graph, and catches a tdfx error by its category.
#include <fmt/format.h>
#include <tdfx/tdfx.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <iostream>

int main() {
  torch::manual_seed(0);
  auto linear = tdfx::make_td_module(torch::nn::Linear(3, 4), {"x"}, {"hidden"});
  auto relu = tdfx::make_td_module(torch::nn::ReLU(), {"hidden"}, {"y"});
  auto pipeline = tdfx::make_td_sequential({linear, relu});
  tdfx::TensorDict td({{"x", at::randn({2, 3})}}, {2});

  tdfx::TDGraphModule traced = tdfx::symbolic_trace(pipeline, td);
  fmt::print("{}\n", traced.graph());
  std::cout << traced << "\n";  // the forward code
  for (auto& node : traced.graph().nodes()) fmt::print("{} {}\n", node->op(), node->name());

  tdfx::ExportedProgram program = tdfx::export_program(pipeline, {{"x", td.get("x")}});
  fmt::print("{}", program);

  // Drawn by the installed Graphviz helper, which find_package(tdfx) tells the program of.
  const std::string svg =
      tdfx::render(traced.graph(), tdfx::Format::kSvg, tdfx::diagram_options(traced));
  std::cout << "drawn: " << (svg.rfind("<?xml", 0) == 0 ? "an SVG" : "not an SVG") << "\n";

  try {
    td.get("missing");
    return 1;
  } catch (const tdfx::KeyError& e) {
    std::cout << "KeyError: " << e.what() << "\n";
  }
  return 0;
}
