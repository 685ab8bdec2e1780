#pragma once

/// \file
/// Graph rewrites used by export. Each keeps the graph's invariants (Graph::lint holds after
/// it when it held before); export_program's program lints the graph once, after all of them, as it
/// compiles it.

#include <torch/nn/module.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "tdfx/graph/graph.h"
#include "tdfx/tracer/module_state.h"

namespace tdfx {

/// Rewrites the ops LibTorch's C++ Linear records into one `aten::linear`,
/// which computes the same values bit for bit:
///
///     before: %t = aten.t(%w); %addmm = aten.addmm(%b, %x, %t)        (2-D input)
///             %t = aten.t(%w); %matmul = aten.matmul(%x, %t); %add_ = aten.add_(%matmul, %b)
///     after:  %linear = aten.linear(%x, %w, %b)
///
/// Only rewrites when the intermediate values have no other users and beta and
/// alpha are 1. Returns the number of rewrites.
size_t fuse_linear(Graph& graph);

/// Spells arithmetic with a number as torch.export does, on the Tensor
/// overload (the number becomes a wrapped 0-dim tensor when run, which
/// computes the same values bit for bit):
///
///     before: %add = aten.add.Scalar(%x, 0.5)     after: %add = aten.add.Tensor(%x, 0.5)
///
/// Covers add, sub, mul and div with a constant number; a number the graph computes
/// (`aten.mul.Scalar(%x, %size)`) stays as it is. Returns the number of rewrites.
size_t canonicalize_scalar_overloads(Graph& graph);

/// A parameter, buffer or constant lift_parameters made a placeholder of.
struct LiftedState {
  ///@{
  /// The placeholder's name (`p_0_module_weight`) and the tensor's path in the root.
  std::string name, path;
  ///@}
  /// The parameter's, buffer's or constant's tensor.
  at::Tensor tensor;
  /// True for a parameter, false for a buffer or a constant.
  bool parameter = true;
  /// A tensor the module captured (a trace's `_tensor_constant0`), not the root's.
  bool constant = false;
  /// The placeholder, in the graph lift_parameters was given.
  const Node* placeholder = nullptr;
};

/// Replaces every get_attr node by a placeholder named `p_<path>` (parameter)
/// or `b_<path>` (buffer) with dots as `_`, placed before the other
/// placeholders, in `root`'s parameter then buffer order. Returns them in that
/// order. GraphError for a path `root` lacks.
std::vector<LiftedState> lift_parameters(Graph& graph, torch::nn::Module& root);
/// As above, from `root`'s parameters and buffers as detail::state_tensors lists them, and
/// then the get_attr nodes reading `constants` (tensors the module captured, by path), in
/// graph order, as placeholders named `c_<path>`.
std::vector<LiftedState> lift_parameters(
    Graph& graph, const std::vector<detail::StateTensor>& state,
    const std::unordered_map<std::string, at::Tensor>& constants = {});

}  // namespace tdfx
