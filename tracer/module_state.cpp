#include "tdfx/tracer/module_state.h"

#include <algorithm>
#include <functional>
#include <string_view>
#include <utility>

namespace tdfx::detail {
namespace {

// Module::parameters_ is protected: read here through a derived type, which named_parameters
// would copy into a new ordered dictionary (its keys, its index) for every module.
struct ParameterAccess : torch::nn::Module {
  static const torch::OrderedDict<std::string, at::Tensor>& of(const torch::nn::Module& module) {
    return module.*(&ParameterAccess::parameters_);
  }
};

// `path` without `strip` (strip_path_prefix's rule, on a view).
std::string_view stripped(std::string_view path, std::string_view strip) {
  if (strip.empty()) return path;
  if (path == strip) return {};
  if (path.size() > strip.size() && path.substr(0, strip.size()) == strip &&
      path[strip.size()] == '.') {
    return path.substr(strip.size() + 1);
  }
  return path;
}

std::string joined(std::string_view prefix, const std::string& name) {
  if (prefix.empty()) return name;
  std::string out;
  out.reserve(prefix.size() + 1 + name.size());
  out.append(prefix).append(1, '.').append(name);
  return out;
}

// The depth of a module apply names `name`: 0 for the root, 1 for `a`, 2 for `a.b`.
size_t depth_of(const std::string& name) {
  if (name.empty()) return 0;
  size_t depth = 1;
  for (const char c : name) depth += c == '.' ? 1 : 0;
  return depth;
}

// Orders ModuleTable::by_module_ by module address, then entry index.
bool by_address(const std::pair<const torch::nn::Module*, size_t>& a,
                const std::pair<const torch::nn::Module*, size_t>& b) {
  if (a.first != b.first) return std::less<const torch::nn::Module*>()(a.first, b.first);
  return a.second < b.second;
}

}  // namespace

ModuleTable::ModuleTable(const torch::nn::Module& root, const std::string& strip) {
  std::vector<StateTensor> buffers;
  // The entries whose subtrees are still open, with their depths: a module closes the open
  // ones at its depth or deeper.
  std::vector<std::pair<size_t, size_t>> open;
  auto close_to = [&](size_t depth) {
    while (!open.empty() && open.back().second >= depth) {
      ModuleEntry& entry = modules_[open.back().first];
      entry.end = modules_.size();
      entry.parameters_end = state_.size();
      entry.buffers_end = buffers.size();
      open.pop_back();
    }
  };
  // Module::apply visits the modules depth first, as named_parameters(true) does.
  root.apply([&](const std::string& name, const torch::nn::Module& module) {
    const size_t depth = depth_of(name);
    close_to(depth);
    const std::string_view prefix = stripped(name, strip);
    ModuleEntry entry;
    entry.path = std::string(prefix);
    entry.module = &module;
    entry.parameters_begin = state_.size();
    entry.buffers_begin = buffers.size();
    by_module_.emplace_back(&module, modules_.size());
    open.emplace_back(modules_.size(), depth);
    modules_.push_back(std::move(entry));
    for (const auto& item : ParameterAccess::of(module)) {
      if (item.value().defined())
        state_.push_back({joined(prefix, item.key()), item.value(), true});
    }
    for (const auto& item : module.named_buffers(false)) {
      if (item.value().defined())
        buffers.push_back({joined(prefix, item.key()), item.value(), false});
    }
  });
  close_to(0);
  std::sort(by_module_.begin(), by_module_.end(), by_address);
  // Buffers follow the parameters.
  const size_t parameters = state_.size();
  for (ModuleEntry& entry : modules_) {
    entry.buffers_begin += parameters;
    entry.buffers_end += parameters;
  }
  state_.reserve(parameters + buffers.size());
  for (StateTensor& buffer : buffers) state_.push_back(std::move(buffer));
  elements_before_.reserve(state_.size() + 1);
  elements_before_.push_back(0);
  for (const StateTensor& entry : state_) {
    elements_before_.push_back(elements_before_.back() + entry.tensor.numel());
  }
}

const ModuleEntry* ModuleTable::find(const torch::nn::Module& module, std::string_view path) const {
  auto it = std::lower_bound(by_module_.begin(), by_module_.end(),
                             std::pair<const torch::nn::Module*, size_t>(&module, 0), by_address);
  for (; it != by_module_.end() && it->first == &module; ++it) {
    if (modules_[it->second].path == path) return &modules_[it->second];
  }
  return nullptr;
}

std::pair<int64_t, int64_t> ModuleTable::elements(const ModuleEntry& entry) const {
  return {elements_before_[entry.parameters_end] - elements_before_[entry.parameters_begin],
          elements_before_[entry.buffers_end] - elements_before_[entry.buffers_begin]};
}

std::vector<StateTensor> state_tensors(const torch::nn::Module& root, const std::string& strip) {
  return std::move(ModuleTable(root, strip).state());
}

}  // namespace tdfx::detail
