// Another library holding the dispatch key the recorder needs: a process that registers its
// own fallback on TESTING_ONLY_GenericMode before recording gets a TraceError that says so,
// and the other library's fallback stays. Run by CTest (test_dispatch_key_held); prints the
// error and exits 0 when it is the one expected.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/ones.h>
#include <torch/library.h>

#include <iostream>
#include <string>

#include "tdfx/core/error.h"
#include "tdfx/tracer/dispatch_recorder.h"

namespace {

void other_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                    torch::jit::Stack* stack) {
  c10::impl::ExcludeDispatchKeyGuard below(c10::DispatchKey::TESTING_ONLY_GenericMode);
  op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER,
                                                c10::DispatchKey::TESTING_ONLY_GenericMode),
                     stack);
}

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&other_fallback>());
}

}  // namespace

int main() {
  const at::Tensor x = at::ones({2});
  tdfx::Graph graph;
  tdfx::detail::DispatchRecorder recorder(graph);
  recorder.bind(x, graph.placeholder("x"));
  try {
    recorder.record([&] { (void)(x + 1); });
  } catch (const tdfx::TraceError& e) {
    const std::string expected =
        "another library in this process registered a fallback on the dispatch key "
        "TESTING_ONLY_GenericMode, which tdfx's recorder needs (dispatch_recorder.cpp says "
        "why); tdfx cannot record in this process";
    std::cout << e.what() << "\n";
    return e.what() == expected ? 0 : 1;
  }
  std::cout << "recorded: expected a TraceError\n";
  return 1;
}
