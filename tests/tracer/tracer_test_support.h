#pragma once
// Helpers of the tracer tests: torch.fx's reference text from tests/tracer/fx_pipelines.py,
// bit-equal runs against eager, and checks of printed code with Python.

#include <doctest/doctest.h>

#include <map>
#include <string>

#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/support/test_support.h"

namespace tdfx::testing {

/// What torch.fx prints for the Python twins in tests/tracer/fx_pipelines.py, by
/// "<case> graph" and "<case> code". Fails the test with the script's output when Python's
/// torch cannot run it: the comparison is the point of the tests that call this.
inline const std::map<std::string, std::string>& fx_reference() {
  static const std::map<std::string, std::string> reference = [] {
    const CommandResult result =
        run_command("/usr/bin/python3 " + source_dir() + "/tests/tracer/fx_pipelines.py 2>&1");
    auto parsed = sections(result.out);
    if (result.status != 0) parsed.clear();
    if (parsed.empty()) {
      FAIL_CHECK("tests/tracer/fx_pipelines.py failed (python3-torch is needed): " << result.out);
    }
    return parsed;
  }();
  return reference;
}

/// True when `a` and `b` hold the same bytes in the same shape and dtype.
inline bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         at::equal(a.contiguous().reshape({-1}).view(at::kByte),
                   b.contiguous().reshape({-1}).view(at::kByte));
}

/// Checks that `gm` computes exactly what `module` computes on `input`, key by key.
inline void check_runs_like_eager(const std::shared_ptr<TensorDictModuleBase>& module,
                                  const TDGraphModule& gm, const TensorDict& input) {
  TensorDict eager(input);
  module->forward(eager);
  const std::vector<at::Tensor> traced = gm.run(input);
  REQUIRE(traced.size() == gm.out_keys().size());
  for (size_t i = 0; i < traced.size(); ++i) {
    CAPTURE(gm.out_keys()[i]);
    CHECK(bit_equal(traced[i], eager.get(gm.out_keys()[i])));
  }
}

/// The options of a dynamic trace (TraceOptions::dynamic_batch), with `base`'s others.
inline TraceOptions dynamic_batch(TraceOptions base = {}) {
  base.dynamic_batch = true;
  return base;
}

/// A TensorDict of one key "x" holding `x`, with batch size x.size(0).
inline TensorDict batch_of(const at::Tensor& x) { return TensorDict({{"x", x}}, {x.size(0)}); }

}  // namespace tdfx::testing
