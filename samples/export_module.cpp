// Seed 000 ("Exporting tensordict modules") in C++: export the model to a
// program on plain tensors, print it, call it, select an output, re-export.
#include <torch/utils.h>

#include <iostream>

#include "samples/pipelines.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/export/torchscript.h"

namespace {

bool all_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

int main() try {
  using namespace tdfx;
  auto model = samples::seed_000_model();
  torch::manual_seed(0);
  const at::Tensor x = at::randn({1, 3});
  const auto outputs = model->call({}, {{"x", x}});
  std::cout << "model(x=x):\n";
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::cout << model->out_keys()[i] << ": " << outputs[i] << "\n";
  }

  ExportedProgram program = export_program(model, {{"x", x}});
  std::cout << "\nsignature:\n" << program.graph_signature().str();
  std::cout << "\n" << program.print_readable() << "\n";
  const bool same = all_equal(outputs, program.module()({{"x", x}}));
  std::cout << "exported outputs equal the model's: " << (same ? "yes" : "no") << "\n";

  auto nested = samples::seed_000_nested_model();
  ExportedProgram nested_program = export_program(nested, {{"some_key", x}});
  std::cout << "\nexported module with nested input:" << nested_program.code() << "\n";
  const auto nested_out = nested_program.module()({{"some_key", x}});
  std::cout << "nested output equals x: " << (at::allclose(nested_out.at(0), x) ? "yes" : "no")
            << "\n";

  // Saving the exported program, and loading it back.
  save(program, "model.pt2");
  ExportedProgram loaded = load("model.pt2");
  const bool loaded_same = all_equal(outputs, loaded.module()({{"x", x}}));
  std::cout << "\nsaved model.pt2; loaded outputs equal: " << (loaded_same ? "yes" : "no") << "\n";
  save_torchscript(program, "model.pt");
  std::cout << "wrote model.pt (TorchScript)\n";

  model->select_out_keys("loc");
  ExportedProgram loc_program = export_program(model, {{"x", x}});
  std::cout << "\nafter select_out_keys('loc'):\n" << loc_program.print_readable() << "\n";
  const bool loc_same = all_equal(model->call({}, {{"x", x}}), loc_program.module()({{"x", x}}));
  std::cout << "loc output equal: " << (loc_same ? "yes" : "no") << "\n";
  return same && loaded_same && loc_same ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "export_module: " << e.what() << "\n";
  return 1;
}
