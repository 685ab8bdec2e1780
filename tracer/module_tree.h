#pragma once

/// \file
/// The TensorDictModules and nested TensorDictSequentials of a pipeline, as the diagrams
/// show them: path, wrapped module, keys and parameter counts. Read from the modules
/// themselves, without a trace, so that a pipeline's module view needs none, and an
/// exported program can keep them.
///
///     auto modules = pipeline_modules(*samples::nested_sequential(), "module");
///     // {"0", sequential}, {"0.module.0", FC, ["input"] -> ["x"]}, {"0.module.1", ...}, {"1",
///     ...}

#include <string>
#include <vector>

#include "tdfx/tensordict/modules.h"
#include "tdfx/viz/render.h"

namespace tdfx {

/// `module`'s TensorDictModules and nested TensorDictSequentials in run order, a sequential
/// before its children; the root itself only when it is a TensorDictModule (path ""). Paths
/// are as traces name them (the TensorDictModule's `td_module`), `strip_prefix` removed from
/// their front ("module" for symbolic_trace of a sequential, "" for export_program). Each
/// module's `label` is its wrapped module's configuration, `type` its short type name.
std::vector<ModuleBox> pipeline_modules(const TensorDictModuleBase& module,
                                        const std::string& strip_prefix);

/// The module view's options for `module`, drawn without tracing it: pipeline_modules
/// (paths as symbolic_trace names them) and its selected out keys.
RenderOptions module_view_options(const std::shared_ptr<TensorDictModuleBase>& module);

namespace detail {
/// `a.b`, or either alone when the other is "".
std::string join_path(const std::string& a, const std::string& b);
/// What the module prints as (`Linear(in_features=3, out_features=4, bias=true)`), without
/// the `torch::nn::` of built-in layers.
std::string describe_module(const torch::nn::Module& module);
/// The module's type as its user knows it: `Linear` for `torch::nn::LinearImpl`.
std::string short_type(const torch::nn::Module& module);
}  // namespace detail

}  // namespace tdfx
