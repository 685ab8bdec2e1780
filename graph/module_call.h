#pragma once

/// \file
/// Calls a module of a graph's root that has no body graph: the built-in
/// torch::nn layers, whose forward takes tensors and returns one. This is
/// what runs a hand-built `call_module` node (`g.call_module("fc1", {x})`).

#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "tdfx/graph/plan.h"

namespace tdfx::detail {

/// A call of the submodule of `root` at `path` ("" is the root itself), for
/// `node`. GraphError naming the node when the path names no module, or a
/// module whose forward tdfx cannot call (a user module: give the node a body
/// graph, or override Interpreter::call_module), or the node passes a number of
/// arguments the layer does not take.
LeafCall module_call(const std::shared_ptr<torch::nn::Module>& root, const std::string& path,
                     const Node& node);

}  // namespace tdfx::detail
