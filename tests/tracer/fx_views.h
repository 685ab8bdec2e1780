#pragma once

// The FX view that `options` give of one recording of a module, for tests that look at views
// symbolic_trace does not build (the flat one with method calls off, say).

#include "tdfx/tracer/fx_view.h"
#include "tdfx/tracer/program_pass.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace tdfx::testing {

/// A recording with the passes' analyses, kept together (the view points into the recording).
struct ViewedRecording {
  detail::PipelineRecording recording;
  detail::FxView view(const TraceOptions& options) const {
    const detail::LiveNodes live(recording, options);
    const detail::StateUpdates updates(recording);
    const detail::LeafCalls leaves =
        detail::find_leaf_calls(recording.graph, recording, live, updates, options);
    detail::FxView view =
        detail::fx_view(recording.graph, recording, live, leaves, updates, options);
    view.graph.lint();
    return view;
  }
};

/// One recording of `module` on `input`, its graph root chosen by `options`.
inline ViewedRecording record_for_view(const TensorDictModuleBasePtr& module,
                                       const TensorDict& input, const TraceOptions& options) {
  const auto [root, prefix] = detail::graph_root(module, options);
  ViewedRecording viewed{detail::record_pipeline(*module, input, prefix)};
  detail::describe_modules(viewed.recording);
  return viewed;
}

}  // namespace tdfx::testing
