#pragma once

/// \file
/// An optimizer's state as a snapshot keeps it: the optimizer's type (one of LibTorch's), its
/// parameter groups' options and parameters, and per parameter its step count and state
/// tensors, every parameter by its name in the module (`module.0.module.weight`). An archive
/// keeps it beside the program (ExportedProgram::optimizer_state, format version 5), so that a
/// training step kept at its first bad step (Watch) can be taken again, update and all:
///
///     tdfx::OptimizerState state = tdfx::optimizer_state_of(optimizer, *policy);
///     ...
///     torch::optim::Adam fresh(policy->parameters());
///     tdfx::restore_optimizer_state(program.optimizer_state().value(), fresh, *policy);

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace torch {
namespace nn {
class Module;
}  // namespace nn
namespace optim {
class Optimizer;
}  // namespace optim
}  // namespace torch

namespace tdfx {

/// An optimizer's state, as the file comment says: its type, its parameter groups, and each
/// parameter's step count and state tensors.
struct OptimizerState {
  /// One of LibTorch's: `Adam`, `AdamW`, `SGD`, `RMSprop`, `Adagrad` (optimizer_kinds()).
  std::string type;
  /// One parameter group: its options and its parameters.
  struct Group {
    /// Every option of its type by LibTorch's name (`lr`, `eps`, `weight_decay`; Adam's betas
    /// as `beta1` and `beta2`; a flag such as `amsgrad` as 0 or 1).
    std::map<std::string, double> options;
    /// Its parameters by name, in the optimizer's order.
    std::vector<std::string> parameters;
  };
  /// The optimizer's parameter groups, in its order.
  std::vector<Group> groups;
  /// What the optimizer keeps for one parameter.
  struct Parameter {
    /// The steps it has taken (0 for SGD, which does not count them).
    int64_t step = 0;
    /// Its state tensors by LibTorch's names (`exp_avg`, `exp_avg_sq`, `momentum_buffer`), each
    /// of its parameter's dtype and shape.
    std::map<std::string, at::Tensor> tensors;
  };
  /// Per parameter the optimizer holds state for (none before its first step).
  std::map<std::string, Parameter> parameters;
};

/// What an OptimizerState of one type holds: its options, the state tensors it may hold, and
/// whether it counts steps.
struct OptimizerKind {
  /// The optimizer's type (`Adam`).
  std::string_view type;
  /// The names of its options (`lr`, `betas_0`, ...).
  std::vector<std::string_view> options;
  /// The names of the state tensors it may keep per parameter (`exp_avg`).
  std::vector<std::string_view> tensors;
  /// Whether it counts each parameter's steps (SGD does not).
  bool counts_steps = true;
  ///@{
  /// The options that are flags, 0 or 1 (`amsgrad`), and those below 1 (Adam's betas); every
  /// option is a finite number of at least 0, as LibTorch's constructors check.
  std::vector<std::string_view> flags, below_one;
  ///@}
};

/// Why `value` is not a value of option `option` of `kind`, "" when it is.
std::string option_problem(const OptimizerKind& kind, std::string_view option, double value);

/// The optimizer types tdfx keeps, LibTorch's own.
const std::vector<OptimizerKind>& optimizer_kinds();

/// The kind of `type`, or nullptr.
const OptimizerKind* optimizer_kind(std::string_view type);

/// The state of `optimizer`, whose parameters are `module`'s (named_parameters), its tensors
/// copied. Error for an optimizer of another type (LBFGS, one of the user's own, or a class
/// derived from one of LibTorch's, whose step may differ), or a
/// parameter that is not one of `module`'s.
OptimizerState optimizer_state_of(const torch::optim::Optimizer& optimizer,
                                  const torch::nn::Module& module);

/// Puts `state` into `optimizer`, which must be of its type (exactly: not a class derived
/// from it) with groups of the same parameters
/// of `module`, by name and in order: each group's options, and each parameter's state
/// (copied; a parameter without state in `state` has none after). Error naming what differs.
void restore_optimizer_state(const OptimizerState& state, torch::optim::Optimizer& optimizer,
                             const torch::nn::Module& module);

}  // namespace tdfx
