#include "tdfx/tracer/module_tree.h"

#include <sstream>

#include "tdfx/core/error.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace tdfx {
namespace detail {

std::string join_path(const std::string& a, const std::string& b) {
  return a.empty() ? b : (b.empty() ? a : a + "." + b);
}

std::string describe_module(const torch::nn::Module& module) {
  std::ostringstream out;
  module.pretty_print(out);
  std::string text = out.str();
  if (text.rfind("torch::nn::", 0) == 0) text = text.substr(11);
  return text;
}

std::string short_type(const torch::nn::Module& module) {
  std::string name = module.name();
  const auto colon = name.rfind("::");
  if (colon != std::string::npos) name = name.substr(colon + 2);
  // `struct LinearImpl` behind TORCH_MODULE(Linear): the user knows it as Linear.
  const std::string impl = "Impl";
  if (name.size() > impl.size() &&
      name.compare(name.size() - impl.size(), impl.size(), impl) == 0) {
    name.resize(name.size() - impl.size());
  }
  return name;
}

}  // namespace detail

namespace {

/// Elements of `tensors` (parameters or buffers).
int64_t elements(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const at::Tensor& t : tensors) n += t.numel();
  return n;
}

/// Walks the module tree as the recorder plans its calls (recorder.cpp, `plan`).
class ModuleWalker {
 public:
  explicit ModuleWalker(std::string strip) : strip_(std::move(strip)) {}

  void walk(const TensorDictModuleBase& module, const std::string& path) {
    if (const auto* seq = dynamic_cast<const TensorDictSequential*>(&module)) {
      if (!path.empty()) {
        ModuleBox box{shown(path), "", seq->in_keys(), seq->selected_out_keys()};
        box.type = "TensorDictSequential";
        box.sequential = true;
        box.parameters = elements(seq->parameters(true));
        box.buffers = elements(seq->buffers(true));
        modules_.push_back(std::move(box));
      }
      const auto& children = seq->children_modules();
      for (size_t i = 0; i < children.size(); ++i) {
        walk(*children[i], detail::join_path(detail::join_path(path, "module"), std::to_string(i)));
      }
      return;
    }
    ModuleBox box{shown(path), "", module.in_keys(), module.selected_out_keys()};
    if (const auto* td = dynamic_cast<const TensorDictModule*>(&module)) {
      const torch::nn::Module& inner = *td->inner_ptr();
      box.label = detail::describe_module(inner);
      box.type = detail::short_type(inner);
      box.parameters = elements(inner.parameters(true));
      box.buffers = elements(inner.buffers(true));
    } else {
      box.type = detail::short_type(module);
    }
    modules_.push_back(std::move(box));
  }

  std::vector<ModuleBox> take() { return std::move(modules_); }

 private:
  std::string shown(const std::string& path) const {
    if (strip_.empty()) return path;
    if (path == strip_) return "";
    if (path.rfind(strip_ + ".", 0) == 0) return path.substr(strip_.size() + 1);
    return path;
  }

  std::string strip_;
  std::vector<ModuleBox> modules_;
};

}  // namespace

std::vector<ModuleBox> pipeline_modules(const TensorDictModuleBase& module,
                                        const std::string& strip_prefix) {
  ModuleWalker walker(strip_prefix);
  walker.walk(module, "");
  return walker.take();
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
