#include "tdfx/tracer/module_state.h"

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

}  // namespace

std::vector<StateTensor> state_tensors(const torch::nn::Module& root, const std::string& strip) {
  std::vector<StateTensor> out, buffers;
  // Module::apply visits the modules depth first, as named_parameters(true) does.
  root.apply([&](const std::string& name, const torch::nn::Module& module) {
    const std::string_view prefix = stripped(name, strip);
    for (const auto& item : ParameterAccess::of(module)) {
      if (item.value().defined()) out.push_back({joined(prefix, item.key()), item.value(), true});
    }
    for (const auto& item : module.named_buffers(false)) {
      if (item.value().defined())
        buffers.push_back({joined(prefix, item.key()), item.value(), false});
    }
  });
  out.reserve(out.size() + buffers.size());
  for (StateTensor& buffer : buffers) out.push_back(std::move(buffer));
  return out;
}

}  // namespace tdfx::detail
