#include "tdfx/tracer/module_tree.h"

#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "tdfx/core/error.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace tdfx {
namespace detail {

std::string layer_path(const TensorDictModule& module, const std::string& inner_path,
                       const std::string& layer) {
  std::string found;
  int count = 0;
  for (const auto& item : module.inner_ptr()->named_modules("", true)) {
    if (short_type(*item.value()) != layer) continue;
    ++count;
    found = item.key();
  }
  if (count != 1) return "torch::nn::" + layer;
  const std::string path = join_path(inner_path, found);
  return path.empty() ? "torch::nn::" + layer : "'" + path + "' (" + layer + ")";
}

std::string join_path(const std::string& a, const std::string& b) {
  return a.empty() ? b : (b.empty() ? a : a + "." + b);
}

std::string strip_path_prefix(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return path;
  if (path == prefix) return "";
  if (path.size() > prefix.size() && path[prefix.size()] == '.' &&
      path.compare(0, prefix.size(), prefix) == 0) {
    return path.substr(prefix.size() + 1);
  }
  return path;
}

namespace {

// walk_pipeline's recursion. Children's paths are made from the unstripped `path`, so that
// the prefix is cut once, from whole paths.
class PipelineWalk {
 public:
  PipelineWalk(const std::string& strip,
               const std::function<void(const TensorDictModuleBase&, PipelinePlace&&)>& visit)
      : strip_(strip), visit_(visit) {}

  void walk(const TensorDictModuleBase& module, const std::string& path,
            const std::vector<std::pair<int, int>>& levels) {
    const std::string inner = join_path(path, "module");
    PipelinePlace place;
    place.path = strip_path_prefix(path, strip_);
    place.inner_path = strip_path_prefix(inner, strip_);
    place.levels = levels;
    const auto* seq = dynamic_cast<const TensorDictSequential*>(&module);
    if (seq) place.level = sequentials_++;
    const int level = place.level;
    visit_(module, std::move(place));
    if (!seq) return;
    const auto& children = seq->children_modules();
    std::vector<std::pair<int, int>> child_levels;
    child_levels.reserve(levels.size() + 1);
    child_levels.emplace_back(level, 0);
    child_levels.insert(child_levels.end(), levels.begin(), levels.end());
    for (size_t i = 0; i < children.size(); ++i) {
      child_levels.front().second = static_cast<int>(i);
      walk(*children[i], inner + "." + std::to_string(i), child_levels);
    }
  }

 private:
  const std::string& strip_;
  const std::function<void(const TensorDictModuleBase&, PipelinePlace&&)>& visit_;
  int sequentials_ = 0;
};

}  // namespace

void walk_pipeline(const TensorDictModuleBase& root, const std::string& strip_prefix,
                   const std::function<void(const TensorDictModuleBase&, PipelinePlace&&)>& visit) {
  PipelineWalk(strip_prefix, visit).walk(root, "", {});
}

const TensorDictModule& traced_td_module(const TensorDictModuleBase& module) {
  const auto* td_module = dynamic_cast<const TensorDictModule*>(&module);
  if (!td_module) {
    fail<TraceError>(
        "{}: cannot trace this module type; tdfx traces TensorDictModule and "
        "TensorDictSequential",
        module.describe());
  }
  return *td_module;
}

std::string describe_module(const torch::nn::Module& module) {
  // One stream per thread, emptied before each use: a trace describes every module it meets,
  // and making a stream (its locale) costs more than most descriptions. A pretty_print that
  // describes another module (a TensorDictModule its wrapped one) gets a stream of its own.
  thread_local std::ostringstream shared;
  thread_local bool in_use = false;
  std::optional<std::ostringstream> own;
  std::ostringstream& out = in_use ? own.emplace() : shared;
  const bool outermost = !in_use;
  if (outermost) {
    shared.str(std::string());
    shared.clear();
    in_use = true;
  }
  struct Release {
    bool outermost;
    ~Release() {
      if (outermost) in_use = false;
    }
  } release{outermost};
  module.pretty_print(out);
  std::string text = out.str();
  if (text.rfind("torch::nn::", 0) == 0) text.erase(0, 11);
  return text;
}

std::string short_type(const torch::nn::Module& module) { return short_type_of(module.name()); }

std::string short_type_of(std::string_view cpp_name) {
  const auto colon = cpp_name.rfind("::");
  if (colon != std::string_view::npos) cpp_name.remove_prefix(colon + 2);
  // `struct LinearImpl` behind TORCH_MODULE(Linear): the user knows it as Linear.
  constexpr std::string_view kImpl = "Impl";
  if (cpp_name.size() > kImpl.size() && cpp_name.substr(cpp_name.size() - kImpl.size()) == kImpl) {
    cpp_name.remove_suffix(kImpl.size());
  }
  return std::string(cpp_name);
}

}  // namespace detail

namespace {

/// Elements of the parameters and of the buffers of `module` and its children, as
/// parameters(true) and buffers(true) would list them, in one walk and without making the
/// path of each.
std::pair<int64_t, int64_t> elements(const torch::nn::Module& module) {
  std::pair<int64_t, int64_t> n{0, 0};
  module.apply([&](const torch::nn::Module& m) {
    for (const at::Tensor& t : m.parameters(false)) {
      if (t.defined()) n.first += t.numel();
    }
    for (const at::Tensor& t : m.buffers(false)) {
      if (t.defined()) n.second += t.numel();
    }
  });
  return n;
}

/// The elements of the parameters and of the buffers of `module` at `path`, from `table` when
/// given, else from its modules.
std::pair<int64_t, int64_t> elements_at(const torch::nn::Module& module, const std::string& path,
                                        const detail::ModuleTable* table) {
  if (!table) return elements(module);
  const detail::ModuleEntry* entry = table->find(module, path);
  if (!entry)
    throw InternalError("pipeline_modules: the module table has no module at '" + path + "'");
  return table->elements(*entry);
}

/// The module view's box of `module`, found at `place`; its element counts from `table` when
/// given, else from its modules.
ModuleBox box_of(const TensorDictModuleBase& module, const detail::PipelinePlace& place,
                 const detail::ModuleTable* table, const std::string* label = nullptr) {
  ModuleBox box;
  box.path = place.path;
  box.in_keys = module.in_keys();
  box.out_keys = module.selected_out_keys();
  if (const auto* seq = dynamic_cast<const TensorDictSequential*>(&module)) {
    box.type = "TensorDictSequential";
    box.sequential = true;
    std::tie(box.parameters, box.buffers) = elements_at(*seq, place.path, table);
  } else if (const auto* td = dynamic_cast<const TensorDictModule*>(&module)) {
    const torch::nn::Module& inner = *td->inner_ptr();
    box.label = label ? *label : detail::describe_module(inner);
    box.type = detail::short_type(inner);
    std::tie(box.parameters, box.buffers) = elements_at(inner, place.inner_path, table);
  } else {
    box.type = detail::short_type(module);
  }
  return box;
}

std::vector<ModuleBox> boxes_of(const TensorDictModuleBase& module, const std::string& strip_prefix,
                                const detail::ModuleTable* table) {
  std::vector<ModuleBox> boxes;
  detail::walk_pipeline(module, strip_prefix,
                        [&](const TensorDictModuleBase& m, const detail::PipelinePlace& place) {
                          // A root sequential is the graph itself, not a box in it.
                          if (place.level == 0) return;
                          boxes.push_back(box_of(m, place, table));
                        });
  return boxes;
}

}  // namespace

std::vector<ModuleBox> pipeline_modules(const TensorDictModuleBase& module,
                                        const std::string& strip_prefix) {
  return boxes_of(module, strip_prefix, nullptr);
}

std::vector<ModuleBox> detail::pipeline_modules(const TensorDictModuleBase& module,
                                                const std::string& strip_prefix,
                                                const ModuleTable& table) {
  return boxes_of(module, strip_prefix, &table);
}

std::vector<ModuleBox> detail::pipeline_modules(
    const PipelinePlaces& places, const ModuleTable& table,
    const std::function<const std::string*(const TensorDictModule&)>& label_of) {
  std::vector<ModuleBox> boxes;
  boxes.reserve(places.size());
  for (const auto& [module, place] : places) {
    if (place.level == 0) continue;  // a root sequential is the graph itself
    const auto* td = dynamic_cast<const TensorDictModule*>(module);
    boxes.push_back(box_of(*module, place, &table, td ? label_of(*td) : nullptr));
  }
  return boxes;
}

}  // namespace tdfx
