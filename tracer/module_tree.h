#pragma once

/// \file
/// The TensorDictModules and nested TensorDictSequentials of a pipeline, as traces keep them
/// and diagrams show them: path, wrapped module, keys and parameter counts. Read from the modules
/// themselves, without a trace, so that a pipeline's module view needs none, and an
/// exported program can keep them.
///
///     auto modules = pipeline_modules(*samples::nested_sequential(), "module");
///     // {"0", sequential}, {"0.module.0", FC, ["input"] -> ["x"]}, {"0.module.1", ...}, {"1",
///     ...}

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tdfx/tensordict/module_box.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/module_state.h"

namespace tdfx {

/// `module`'s TensorDictModules and nested TensorDictSequentials in run order, a sequential
/// before its children; the root itself only when it is a TensorDictModule (path ""). Paths
/// are as traces name them (the TensorDictModule's `td_module`), `strip_prefix` removed from
/// their front ("module" for symbolic_trace of a sequential, "" for export_program). Each
/// module's `label` is its wrapped module's configuration, `type` its short type name.
std::vector<ModuleBox> pipeline_modules(const TensorDictModuleBase& module,
                                        const std::string& strip_prefix);

namespace detail {
/// pipeline_modules with the element counts taken from `table`, ModuleTable(module,
/// strip_prefix) (a recording's layout holds it), instead of from walking each module's tree
/// again.
std::vector<ModuleBox> pipeline_modules(const TensorDictModuleBase& module,
                                        const std::string& strip_prefix, const ModuleTable& table);

/// `a.b`, or either alone when the other is "".
std::string join_path(const std::string& a, const std::string& b);
/// `path` without `prefix` and its dot in front: `0.module` for `module.0.module` and prefix
/// `module`, "" for the prefix itself. Unchanged when `prefix` is "" or `path` is outside it.
std::string strip_path_prefix(const std::string& path, const std::string& prefix);

/// Where walk_pipeline found a module of a pipeline.
struct PipelinePlace {
  /// Its path from the walked root as traces name it (`0`, `0.module.1`; "" for the root),
  /// without the strip prefix.
  std::string path;
  /// The path of what it holds, likewise stripped: a TensorDictModule's wrapped module or a
  /// sequential's module list (`0.module`).
  std::string inner_path;
  /// For each enclosing TensorDictSequential, innermost first: that sequential's level and
  /// this module's index among its children. Empty for the root.
  std::vector<std::pair<int, int>> levels;
  /// For a TensorDictSequential, its level: its index among the pipeline's sequentials in
  /// walk order (the root's is 0). -1 for any other module.
  int level = -1;
};

/// Visits `root` and the modules below it in run order, a TensorDictSequential before its
/// children (``, `0`, `0.module.0`, `0.module.1`, `1`), as the sequentials run them. The
/// recorder plans its calls and pipeline_modules draws its boxes from this one walk, so that
/// the paths of a trace's nodes and of the module view agree.
/// `visit` may take the place it is given (`PipelinePlace&&`): the walk does not use it after.
void walk_pipeline(const TensorDictModuleBase& root, const std::string& strip_prefix,
                   const std::function<void(const TensorDictModuleBase&, PipelinePlace&&)>& visit);
/// The modules a walk met and their places, in walk order (pipeline_layout keeps them).
using PipelinePlaces = std::vector<std::pair<const TensorDictModuleBase*, PipelinePlace>>;
/// pipeline_modules of the modules a walk met (`places`, with the strip prefix the walk was
/// given), with element counts from `table` as above, and without walking again. A
/// TensorDictModule's label is `*label_of(module)` where that is not null (a description a
/// recording made already), else its wrapped module described here.
std::vector<ModuleBox> pipeline_modules(
    const PipelinePlaces& places, const ModuleTable& table,
    const std::function<const std::string*(const TensorDictModule&)>& label_of);
/// `module` as the TensorDictModule a trace records a call of; TraceError naming it when it is
/// another kind of module (tdfx traces TensorDictModule and TensorDictSequential).
const TensorDictModule& traced_td_module(const TensorDictModuleBase& module);

/// The path of the `layer` module (a type name, `MultiheadAttention`) in `module`'s wrapped
/// module, from the graph root (`inner_path` is the wrapped module's), quoted with its type
/// (`'0.module.attn' (MultiheadAttention)`) when there is one such module; else
/// `torch::nn::MultiheadAttention`. Messages name the layer that failed or read a value by it.
std::string layer_path(const TensorDictModule& module, const std::string& inner_path,
                       const std::string& layer);

/// What the module prints as (`Linear(in_features=3, out_features=4, bias=true)`), without
/// the `torch::nn::` of built-in layers.
std::string describe_module(const torch::nn::Module& module);
/// The module's type as its user knows it: `Linear` for `torch::nn::LinearImpl`.
std::string short_type(const torch::nn::Module& module);
/// short_type of a C++ class name: its last component without a trailing `Impl`
/// (`torch::nn::LinearImpl` → `Linear`).
std::string short_type_of(std::string_view cpp_name);
}  // namespace detail

}  // namespace tdfx
