#include "tracer/diagram.h"

namespace tdfx {

RenderOptions diagram_options(const TDGraphModule& module, bool show_parameters) {
  RenderOptions options;
  options.show_parameters = show_parameters;
  options.output_keys = module.out_keys();
  for (const TracedModule& traced : module.modules()) {
    if (traced.path.empty()) continue;  // a root module: the whole graph is its box
    options.modules.push_back({traced.path, traced.label, traced.in_keys, traced.out_keys});
  }
  const auto& root = module.root();
  for (const Node* node : module.graph().nodes()) {
    if (node->op() != OpCode::kCallModule) continue;
    const std::string& target = node->target().str();
    options.module_descriptions[target] = node->meta().module_type;
    if (!root) continue;
    auto& params = options.module_parameters[target];
    for (const auto& item : root->named_parameters(true)) {
      if (item.key().rfind(target + ".", 0) != 0) continue;
      const std::string name = item.key().substr(target.size() + 1);
      if (name.find('.') != std::string::npos) continue;  // a submodule's
      TensorMeta meta;
      meta.dtype = item.value().scalar_type();
      meta.shape = item.value().sizes().vec();
      meta.device = item.value().device();
      params.emplace_back(name, meta);
    }
  }
  return options;
}

void write_diagram(const TDGraphModule& module, const std::string& path, bool show_parameters) {
  write(module.graph(), path, diagram_options(module, show_parameters));
}

}  // namespace tdfx
