#pragma once

/// \file
/// RAII guards that put back what running a module changes besides its outputs: the default
/// CPU generator's state (Dropout draws from it) and a module's parameters and buffers
/// (BatchNorm's running statistics, a counter buffer a module adds to). A recording and the
/// shape propagation of recompile() run the user's module for what they learn, not to change it.

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <utility>
#include <vector>

namespace tdfx::detail {

/// Puts back the default CPU generator's state when the scope ends.
class GeneratorRestore {
 public:
  GeneratorRestore();
  ~GeneratorRestore();
  GeneratorRestore(const GeneratorRestore&) = delete;
  GeneratorRestore& operator=(const GeneratorRestore&) = delete;

 private:
  at::Generator generator_;
  at::Tensor state_;
};

/// Copies every parameter and buffer of a module and writes the copies back when the scope
/// ends, with the generator's state: for a whole run that may write any of them. (A recording
/// copies only the tensors an op writes, as it writes them: DispatchRecorder::restore_state.)
class ModuleStateRestore {
 public:
  explicit ModuleStateRestore(torch::nn::Module& module);
  ~ModuleStateRestore();
  ModuleStateRestore(const ModuleStateRestore&) = delete;
  ModuleStateRestore& operator=(const ModuleStateRestore&) = delete;

 private:
  GeneratorRestore generator_;
  std::vector<std::pair<at::Tensor, at::Tensor>> saved_;  // (the tensor, its copy)
};

}  // namespace tdfx::detail
