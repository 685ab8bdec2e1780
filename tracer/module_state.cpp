#include "tdfx/tracer/module_state.h"

#include <utility>
#include <vector>

#include "tdfx/tracer/module_tree.h"

namespace tdfx::detail {

void for_each_state(
    const torch::nn::Module& root,
    const std::function<void(std::string path, const at::Tensor& tensor, bool is_parameter)>& visit,
    const std::string& strip) {
  std::vector<std::pair<std::string, const torch::nn::Module*>> modules;
  root.apply([&](const std::string& name, const torch::nn::Module& module) {
    modules.emplace_back(strip_path_prefix(name, strip), &module);
  });
  for (const auto& [prefix, module] : modules) {
    for (const auto& item : module->named_parameters(false)) {
      visit(join_path(prefix, item.key()), item.value(), true);
    }
  }
  for (const auto& [prefix, module] : modules) {
    for (const auto& item : module->named_buffers(false)) {
      if (item.value().defined()) visit(join_path(prefix, item.key()), item.value(), false);
    }
  }
}

std::vector<StateTensor> state_tensors(const torch::nn::Module& root, const std::string& strip) {
  std::vector<StateTensor> out;
  for_each_state(
      root,
      [&](std::string path, const at::Tensor& tensor, bool parameter) {
        out.push_back({std::move(path), tensor, parameter});
      },
      strip);
  return out;
}

}  // namespace tdfx::detail
