// Pipelines whose sizes are functions of the batch (samples/attention.h), exported with a
// dynamic batch: writes NAME.pt2 and its TorchScript NAME.pt into the current directory for
// each, and prints each program's signature. Python's loader reads them
// (tests/python/test_loader.py) and runs them at batches the trace never saw.
#include <iostream>

#include "samples/attention.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/export/torchscript.h"

int main() try {
  using namespace tdfx;
  for (auto& [name, module] : samples::batch_sized_pipelines()) {
    at::manual_seed(0);
    ExportOptions options;
    options.dynamic_batch = true;
    const ExportedProgram program =
        export_program(module, {{"obs", samples::batch_sized_input(4).get("obs")}}, options);
    save(program, name + ".pt2");
    save_torchscript(program, name + ".pt");
    std::cout << name << ".pt2 and " << name << ".pt:\n" << program.graph_signature().str();
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "export_batch_sized: " << e.what() << "\n";
  return 1;
}
