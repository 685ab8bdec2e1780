// Exports the benchmarks' chain of N TensorDictModules (relu(Linear(64, 64)) from "h{i}" to
// "h{i+1}", samples/chain.h) to a .pt2: a pipeline at the scale where drawings must stay
// readable. The browser test draws its page.
//
//   export_chain N OUT.pt2
#include <cstdlib>
#include <iostream>
#include <string>

#include "samples/chain.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: export_chain N OUT.pt2\n";
    return 1;
  }
  const long length = std::strtol(argv[1], nullptr, 10);
  if (length < 1 || length > 100000) {
    std::cerr << "export_chain: N must be 1 to 100000, got '" << argv[1] << "'\n";
    return 1;
  }
  try {
    at::manual_seed(0);
    const auto chain = tdfx::samples::chain(length);
    tdfx::save(
        tdfx::export_program(chain.pipeline, {{"h0", tdfx::samples::chain_input().get("h0")}}),
        argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "export_chain: " << e.what() << "\n";
    return 1;
  }
  std::cout << "wrote " << argv[2] << "\n";
}
