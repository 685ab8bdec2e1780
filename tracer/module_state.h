#pragma once

/// \file
/// state_tensors: every parameter and buffer of a module tree with its path, as
/// named_parameters(true) and named_buffers(true) list them, without building their ordered
/// dictionaries: one walk of the tree, each tensor's path made once (a trace binds, and export
/// lifts, every parameter of a pipeline).

#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace tdfx::detail {

/// A parameter or buffer with its path.
struct StateTensor {
  std::string path;
  at::Tensor tensor;
  bool parameter = false;
};

/// Each defined parameter of `root` and its descendants, in named_parameters(true) order, then
/// each defined buffer, in named_buffers(true) order. Paths lose `strip` as strip_path_prefix
/// cuts it (module_tree.h).
std::vector<StateTensor> state_tensors(const torch::nn::Module& root,
                                       const std::string& strip = "");

}  // namespace tdfx::detail
