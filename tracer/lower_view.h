#pragma once

/// \file
/// lower_view: the runnable program of an FX view that a user edited, for
/// TDGraphModule::recompile() — the one inliner. In one walk, each getitem(tensordict, key)
/// becomes a placeholder named by its key, before any other node, in the order of the reads; a
/// call_module's body is inlined (its get_attr paths made whole, its result bound to the call's
/// users, getitem picking from a tuple result; a parameter read by several bodies is one
/// get_attr); a call_method is the aten call it runs, every schema argument positional. Nodes
/// keep the view's names, made unique. Ops of a body belong to the module the call ran and name
/// the call in errors (NodeMeta::shown_as), as does a method call.
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
