// Seed 002: traces nested sequential and prints its graph and code.
#include <torch/utils.h>

#include "samples/pipelines.h"
#include "samples/trace_main.h"

int main() try {
  torch::manual_seed(0);
  return tdfx::samples::trace_and_compare(tdfx::samples::nested_sequential(),
                                          tdfx::samples::nested_sequential_input());
} catch (const std::exception& e) {
  std::cerr << "trace_nested: " << e.what() << "\n";
  return 1;
}
