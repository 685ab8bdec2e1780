#pragma once

/// \file
/// lower_view: the runnable program of an FX view that a user edited, for
/// TDGraphModule::recompile(). The call_module bodies are inlined by the one inliner,
/// inline_call_modules (graph/passes.h); then each getitem(tensordict, key) becomes a
/// placeholder named by its key, before any other node, in the order of the reads; a
/// call_method becomes the aten call it runs, every schema argument positional, naming the
/// method in errors (NodeMeta::shown_as); a tensor read by several get_attr nodes (a layer
/// shared by two TensorDictModules) is read by the first. Nodes keep the view's names.
///
/// A traced module's program is not lowered from its view: both are passes over the recording
/// (program_pass.h, fx_view.h).

#include <torch/nn/module.h>

#include <memory>
#include <vector>

#include "tdfx/core/nested_key.h"
#include "tdfx/graph/graph.h"

namespace tdfx::detail {

/// The program of `view`, whose targets are paths in `root`. The keys its placeholders read
/// replace `input_keys` when the view reads them from a tensordict, and are kept when it takes
/// placeholders.
Graph lower_view(const Graph& view, const std::shared_ptr<torch::nn::Module>& root,
                 std::vector<NestedKey>& input_keys);

}  // namespace tdfx::detail
