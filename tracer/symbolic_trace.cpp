#include "tracer/symbolic_trace.h"

#include "codegen/python_code.h"
#include "core/error.h"
#include "tracer/graph_builder.h"
#include "tracer/recorder.h"

namespace tdfx {

TDGraphModule::TDGraphModule(GraphModule module, std::vector<NestedKey> input_keys,
                             std::vector<NestedKey> out_keys, std::vector<TracedModule> modules)
    : module_(std::move(module)),
      input_keys_(std::move(input_keys)),
      out_keys_(std::move(out_keys)),
      modules_(std::move(modules)) {}

std::string TDGraphModule::code() const { return python_code(module_.graph()); }

std::vector<at::Tensor> TDGraphModule::run(const TensorDict& td) const {
  // The graph's one input is the TensorDict; its getitem nodes look keys up
  // in a dictionary keyed as the graph module keys them.
  c10::Dict<std::string, at::Tensor> inputs;
  for (const NestedKey& key : input_keys_) inputs.insert(key.repr(), td.get(key));
  auto outputs = module_.run({c10::IValue(inputs)});
  std::vector<at::Tensor> tensors;
  tensors.reserve(outputs.size());
  for (auto& value : outputs) tensors.push_back(std::move(value).toTensor());
  return tensors;
}

TensorDict& TDGraphModule::forward(TensorDict& td) const { return forward(td, td); }

TensorDict& TDGraphModule::forward(const TensorDict& td, TensorDict& tensordict_out) const {
  auto outputs = run(td);
  for (size_t i = 0; i < outputs.size(); ++i) tensordict_out.set(out_keys_[i], outputs[i]);
  return tensordict_out;
}

namespace detail {

std::pair<std::shared_ptr<torch::nn::Module>, std::string> graph_root(
    const std::shared_ptr<TensorDictModuleBase>& module, const TraceOptions& options) {
  if (auto seq = std::dynamic_pointer_cast<TensorDictSequential>(module)) {
    return {seq->module_list().ptr(), "module"};
  }
  if (auto td_module = std::dynamic_pointer_cast<TensorDictModule>(module)) {
    const auto& inner = td_module->inner_ptr();
    const bool leaf =
        is_builtin_leaf(*inner) || (options.is_leaf_module && options.is_leaf_module(*inner, ""));
    if (!leaf) return {inner, "module"};
  }
  return {module, ""};
}

}  // namespace detail

TDGraphModule symbolic_trace(const std::shared_ptr<TensorDictModuleBase>& module,
                             const TensorDict& example, TraceOptions options) {
  if (!module) throw TraceError("symbolic_trace: the module is null");
  auto [root, prefix] = detail::graph_root(module, options);
  detail::Recording recording = detail::record(*module, example, prefix);
  detail::BuiltGraph built = detail::build_graph(recording, *root, options);
  std::vector<TracedModule> modules;
  for (const auto& call : recording.calls) {
    modules.push_back(
        {call.td_path, call.module->describe(), call.module->in_keys(), call.module->out_keys()});
  }
  GraphModule graph_module(root, std::move(built.graph));
  return TDGraphModule(std::move(graph_module), std::move(built.input_keys),
                       std::move(built.output_keys), std::move(modules));
}

}  // namespace tdfx
