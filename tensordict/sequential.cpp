#include "tdfx/tensordict/sequential.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>
#include <set>

#include "tdfx/core/error.h"

namespace tdfx {

TensorDictSequential::TensorDictSequential(std::vector<TensorDictModuleBasePtr> modules,
                                           std::optional<std::vector<NestedKey>> selected_out_keys)
    : TensorDictModuleBase("TensorDictSequential"), modules_(std::move(modules)) {
  // Sets beside the ordered lists keep a pipeline of 10,000 modules linear to build.
  std::vector<NestedKey> written;  // every write, in order, duplicates included
  std::set<NestedKey> known;       // keys written so far or read from outside
  for (size_t i = 0; i < modules_.size(); ++i) {
    const TensorDictModuleBasePtr& child = modules_[i];
    if (!child) fail<Error>("TensorDictSequential: child {} is null", i);
    for (const NestedKey& key : child->in_keys()) {
      if (known.insert(key).second) in_keys_.push_back(key);
    }
    const auto& child_out = child->selected_out_keys();
    written.insert(written.end(), child_out.begin(), child_out.end());
    known.insert(child_out.begin(), child_out.end());
    list_->push_back(child);
  }
  // Each key once, at its last write.
  std::set<NestedKey> later;
  for (size_t i = written.size(); i-- > 0;) {
    if (later.insert(written[i]).second) out_keys_.push_back(written[i]);
  }
  std::reverse(out_keys_.begin(), out_keys_.end());
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
