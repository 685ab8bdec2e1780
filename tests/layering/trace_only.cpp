// A program that traces and prints, and draws nothing: linked with tdfx::tracer alone, it
// must load no Graphviz, Pango or Cairo library (tests/layering/run.sh checks with ldd).
#include <iostream>

#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/symbolic_trace.h"

int main() {
  auto module = tdfx::make_td_module([](const at::Tensor& x) { return x * 2; }, {"x"}, {"y"});
  const tdfx::TDGraphModule gm =
      tdfx::symbolic_trace(module, tdfx::TensorDict({{"x", at::ones({2, 3})}}, {2}));
  std::cout << gm.code();
  return 0;
}
