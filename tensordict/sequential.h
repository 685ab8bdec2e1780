#pragma once

/// \file
/// TensorDictSequential: runs TensorDict modules one after the other on the same TensorDict.

#include <torch/nn/modules/container/modulelist.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tdfx/tensordict/tensordict_module.h"

namespace tdfx {

/// Runs its children (TensorDictModules or TensorDictSequentials, nested at any depth) in
/// order. The children live in a ModuleList registered as "module", so the first child's
/// wrapped Linear has the parameter `module.0.module.weight`.
///
/// in_keys are the keys read before any child writes them (order of first read); out_keys are
/// the written keys, each once at its last write: writes hidden, hidden, latent, hidden give
/// [latent, hidden].
class TensorDictSequential : public TensorDictModuleBase {
 public:
  /// A sequence of `modules`; with `selected_out_keys`, as if select_out_keys was called.
  explicit TensorDictSequential(
      std::vector<TensorDictModuleBasePtr> modules,
      std::optional<std::vector<NestedKey>> selected_out_keys = std::nullopt);

  /// The children, in run order.
  const std::vector<TensorDictModuleBasePtr>& children_modules() const { return modules_; }
  /// The ModuleList registered as "module".
  const torch::nn::ModuleList& module_list() const { return list_; }

  /// `TensorDictSequential(in_keys=[...], out_keys=[...])`.
  std::string describe() const override;
  /// Same as describe().
  void pretty_print(std::ostream& stream) const override;

 protected:
  void run(TensorDict& td) override;

 private:
  std::vector<TensorDictModuleBasePtr> modules_;
  torch::nn::ModuleList list_;
};

/// Shared handle to a TensorDictSequential.
using TensorDictSequentialPtr = std::shared_ptr<TensorDictSequential>;

/// `std::make_shared<TensorDictSequential>(...)`, Python's `Seq(*modules, selected_out_keys=...)`.
TensorDictSequentialPtr make_td_sequential(
    std::vector<TensorDictModuleBasePtr> modules,
    std::optional<std::vector<NestedKey>> selected_out_keys = std::nullopt);

}  // namespace tdfx
