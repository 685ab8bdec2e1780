// Seed 002: traces seed sequential, prints its graph and code, and draws it
// to trace_sequential.svg (or the path given as the first argument).
#include <torch/utils.h>

#include "samples/pipelines.h"
#include "samples/trace_main.h"

int main(int argc, char** argv) try {
  torch::manual_seed(0);
  return tdfx::samples::trace_and_compare(tdfx::samples::seed_sequential(),
                                          tdfx::samples::seed_sequential_input(),
                                          argc > 1 ? argv[1] : "trace_sequential.svg");
} catch (const std::exception& e) {
  std::cerr << "trace_sequential: " << e.what() << "\n";
  return 1;
}
