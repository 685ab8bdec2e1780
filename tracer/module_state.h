#pragma once

/// \file
/// The parameters and buffers of a module tree with their paths, and its modules with the
/// part of that list each one's subtree holds: ModuleTable, made in one walk of the tree,
/// each path made once (a trace binds, and export lifts, every parameter of a pipeline; the
/// leaf calls and the module boxes ask which tensors lie under a module).

#include <torch/nn/module.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tdfx::detail {

/// A parameter or buffer with its path.
struct StateTensor {
  std::string path;
  at::Tensor tensor;
  bool parameter = false;
};

/// A module of a ModuleTable.
struct ModuleEntry {
  /// Its path, stripped as its tensors' paths are ("" for the root).
  std::string path;
  const torch::nn::Module* module = nullptr;
  /// Its subtree's entries are [its own index, end): the walk lists a module's descendants
  /// right after it, before any module that is neither.
  size_t end = 0;
  /// Its subtree's parameters and buffers: index ranges into ModuleTable::state.
  size_t parameters_begin = 0, parameters_end = 0;
  size_t buffers_begin = 0, buffers_end = 0;
};

/// The modules of a tree in Module::apply's order (depth first, each before its children),
/// and its defined parameters in named_parameters(true) order followed by its defined buffers
/// in named_buffers(true) order. A module registered at two paths is listed at each, and so
/// are its tensors. Paths lose `strip` as strip_path_prefix cuts it (module_tree.h).
class ModuleTable {
 public:
  explicit ModuleTable(const torch::nn::Module& root, const std::string& strip = "");

  /// The parameters, then the buffers.
  const std::vector<StateTensor>& state() const { return state_; }
  std::vector<StateTensor>& state() { return state_; }
  const std::vector<ModuleEntry>& modules() const { return modules_; }
  /// The entry of `module` at `path`, or nullptr.
  const ModuleEntry* find(const torch::nn::Module& module, std::string_view path) const;
  /// The elements of the parameters and of the buffers under `entry` (itself included).
  std::pair<int64_t, int64_t> elements(const ModuleEntry& entry) const;

 private:
  std::vector<StateTensor> state_;
  std::vector<ModuleEntry> modules_;
  /// elements_before_[i]: the elements of state_[0, i).
  std::vector<int64_t> elements_before_;
  /// (module, entry index) for every entry, sorted: a module's entries are one range.
  std::vector<std::pair<const torch::nn::Module*, size_t>> by_module_;
};

/// ModuleTable(root, strip).state(): the parameters and buffers alone.
std::vector<StateTensor> state_tensors(const torch::nn::Module& root,
                                       const std::string& strip = "");

}  // namespace tdfx::detail
