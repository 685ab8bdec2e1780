// The README's diagrams: traces the actor-critic pipeline (nested sequentials, shared keys)
// and draws its module view and op view, as SVG and PNG, and exports it to a .pt2 that
// `tdfx render --view modules|ops` draws the same way.
//
//   draw_pipeline [OUT_DIR]     (default: .)

#include <torch/utils.h>

#include <filesystem>
#include <iostream>

#include "samples/pipelines.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/tracer/symbolic_trace.h"

int main(int argc, char** argv) try {
  const std::filesystem::path out = argc > 1 ? argv[1] : ".";
  std::filesystem::create_directories(out);
  torch::manual_seed(0);
  auto pipeline = tdfx::samples::actor_critic();
  const tdfx::TensorDict input = tdfx::samples::actor_critic_input();
  const tdfx::TDGraphModule gm = tdfx::symbolic_trace(pipeline, input);
  tdfx::RenderOptions options = tdfx::diagram_options(gm);
  for (const auto view : {tdfx::View::kModules, tdfx::View::kOps}) {
    options.view = view;
    for (const char* ext : {"svg", "png"}) {
      const std::string path =
          (out / ("actor_critic." + std::string(tdfx::to_string(view)) + "." + ext)).string();
      tdfx::save_diagram(gm.graph(), path, options);
      std::cout << "wrote " << path << "\n";
    }
  }
  const tdfx::ExportedProgram program =
      tdfx::export_program(pipeline, {{"observation", input.get("observation")},
                                      {"agent_mask", input.get(tdfx::NestedKey{"agent", "mask"})}});
  const std::string pt2 = (out / "actor_critic.pt2").string();
  tdfx::save(program, pt2);
  std::cout << "wrote " << pt2 << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "draw_pipeline: " << e.what() << "\n";
  return 1;
}
