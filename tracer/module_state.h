#pragma once

/// \file
/// for_each_state: every parameter and buffer of a module tree with its path, as
/// named_parameters(true) and named_buffers(true) list them, without building their ordered
/// dictionaries: each module's path is made once, not once per tensor (a trace binds, and
/// export lifts, every parameter of a pipeline).

#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

namespace tdfx::detail {

/// Calls `visit(path, tensor, is_parameter)` for each parameter of `root` and its descendants,
/// in named_parameters(true) order, then for each defined buffer, in named_buffers(true) order.
/// Paths lose `strip` as strip_path_prefix cuts it (module_tree.h).
void for_each_state(
    const torch::nn::Module& root,
    const std::function<void(std::string path, const at::Tensor& tensor, bool is_parameter)>& visit,
    const std::string& strip = "");

/// A parameter or buffer with its path.
struct StateTensor {
  std::string path;
  at::Tensor tensor;
  bool parameter = false;
};

/// What for_each_state visits, in its order.
std::vector<StateTensor> state_tensors(const torch::nn::Module& root,
                                       const std::string& strip = "");

}  // namespace tdfx::detail
