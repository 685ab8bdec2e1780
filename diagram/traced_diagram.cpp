#include "tdfx/diagram/traced_diagram.h"

#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx {
namespace {

using Tensors = std::vector<std::pair<std::string, TensorMeta>>;

TensorMeta meta_of(const at::Tensor& tensor) {
  TensorMeta meta;
  meta.dtype = tensor.scalar_type();
  meta.shape = tensor.sizes().vec();
  meta.device = tensor.device();
  return meta;
}

/// `items` (named parameters or buffers, `0.module.fc1.weight`) by the path of the module
/// that owns each (`0.module.fc1`), in their order: one pass, whatever the node count.
std::unordered_map<std::string, Tensors> by_owner(
    const torch::OrderedDict<std::string, at::Tensor>& items) {
  std::unordered_map<std::string, Tensors> out;
  for (const auto& item : items) {
    const auto dot = item.key().rfind('.');
    const std::string owner = dot == std::string::npos ? "" : item.key().substr(0, dot);
    const std::string name = dot == std::string::npos ? item.key() : item.key().substr(dot + 1);
    out[owner].emplace_back(name, meta_of(item.value()));
  }
  return out;
}

}  // namespace

RenderOptions diagram_options(const TDGraphModule& module, bool show_parameters) {
  RenderOptions options;
  options.show_parameters = show_parameters;
  options.output_keys = module.out_keys();
  options.modules = module.modules();
  const auto& root = module.root();
  std::unordered_map<std::string, Tensors> parameters, buffers;
  if (root) {
    parameters = by_owner(root->named_parameters(true));
    buffers = by_owner(root->named_buffers(true));
  }
  for (const Node* node : module.graph().nodes()) {
    if (node->op() != OpCode::kCallModule) continue;
    const std::string& target = node->target().str();
    if (!options.module_descriptions.emplace(target, node->meta().module_type).second) continue;
    if (!root) continue;
    // A target's own tensors only: a submodule's are shown by its own call_module.
    auto own = parameters.find(target);
    options.module_parameters[target] = own == parameters.end() ? Tensors{} : own->second;
    auto own_buffers = buffers.find(target);
    if (own_buffers != buffers.end()) options.module_buffers[target] = own_buffers->second;
  }
  return options;
}

void save_diagram(const TDGraphModule& module, const std::string& path, bool show_parameters) {
  save_diagram(module.graph(), path, diagram_options(module, show_parameters));
}

RenderOptions module_view_options(const std::shared_ptr<TensorDictModuleBase>& module) {
  if (!module) throw Error("module_view_options: the module is null");
  RenderOptions options;
  options.view = View::kModules;
  options.modules = pipeline_modules(*module, detail::graph_root(module, TraceOptions{}).second);
  options.output_keys = module->selected_out_keys();
  return options;
}

}  // namespace tdfx
