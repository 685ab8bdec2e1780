#include "tdfx/tensordict/sequential.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "tdfx/core/error.h"

namespace tdfx {

TensorDictSequential::TensorDictSequential(std::vector<TensorDictModuleBasePtr> modules,
                                           std::optional<std::vector<NestedKey>> selected_out_keys)
    : TensorDictModuleBase("TensorDictSequential"), modules_(std::move(modules)) {
  std::vector<NestedKey> written;  // every write, in order, duplicates included
  for (size_t i = 0; i < modules_.size(); ++i) {
    const TensorDictModuleBasePtr& child = modules_[i];
    if (!child) fail<Error>("TensorDictSequential: child {} is null", i);
    for (const NestedKey& key : child->in_keys()) {
      const bool known = std::find(written.begin(), written.end(), key) != written.end() ||
                         std::find(in_keys_.begin(), in_keys_.end(), key) != in_keys_.end();
      if (!known) in_keys_.push_back(key);
    }
    const auto& child_out = child->selected_out_keys();
    written.insert(written.end(), child_out.begin(), child_out.end());
    list_->push_back(child);
  }
  for (size_t i = 0; i < written.size(); ++i) {
    if (std::find(written.begin() + i + 1, written.end(), written[i]) == written.end()) {
      out_keys_.push_back(written[i]);
    }
  }
  register_module("module", list_);
  if (selected_out_keys) select_out_keys(*selected_out_keys);
}

void TensorDictSequential::run(TensorDict& td) {
  for (const TensorDictModuleBasePtr& child : modules_) child->forward(td);
}

std::string TensorDictSequential::describe() const {
  return fmt::format("TensorDictSequential({})", keys_description());
}

void TensorDictSequential::pretty_print(std::ostream& stream) const { stream << describe(); }

TensorDictSequentialPtr make_td_sequential(
    std::vector<TensorDictModuleBasePtr> modules,
    std::optional<std::vector<NestedKey>> selected_out_keys) {
  return std::make_shared<TensorDictSequential>(std::move(modules), std::move(selected_out_keys));
}

}  // namespace tdfx
