#include "tdfx/export/program.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>
#include <string_view>
#include <unordered_map>

#include "tdfx/codegen/python_code.h"
#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/core/time_budget.h"
#include "tdfx/export/passes.h"
#include "tdfx/graph/effects.h"
#include "tdfx/graph/passes.h"
#include "tdfx/tracer/dynamic_batch.h"
#include "tdfx/tracer/program_pass.h"

namespace tdfx {

std::string_view to_string(InputKind kind) {
  switch (kind) {
    case InputKind::kParameter:
      return "parameter";
    case InputKind::kBuffer:
      return "buffer";
    case InputKind::kConstant:
      return "constant";
    case InputKind::kUserInput:
      return "user_input";
  }
  return "?";
}

std::string GraphSignature::str() const {
  std::string out;
  for (const auto& in : inputs) {
    // A target is a key's text: quoted when it is not a plain dotted name, so
    // that no character of it can start a line of its own.
    const bool plain = !in.target.empty() && in.target.find_first_not_of(
                                                 "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                                                 "VWXYZ0123456789_.") == std::string::npos;
    std::string dims;
    for (const int64_t dim : in.batch_dims) {
      dims += fmt::format("{}dim {} is s0", dims.empty() ? " (" : ", ", dim);
    }
    // As the placeholder prints: a traced batch of 1 is shown as 1.
    out += fmt::format("input {} {} -> {}{}\n", to_string(in.kind), in.name,
                       plain ? in.target : python_repr(in.target), dims.empty() ? "" : dims + ")");
  }
  for (const auto& o : outputs) out += fmt::format("output {} -> {}\n", o.name, o.key.repr());
  return out;
}

ExportedModule::ExportedModule(std::shared_ptr<const GraphModule> runner,
                               std::vector<at::Tensor> state, std::vector<std::string> user_inputs,
                               std::optional<BatchSpecialisation> specialisation,
                               std::vector<TensorMeta> input_meta, uint64_t memory_budget,
                               double time_budget)
    : runner_(std::move(runner)),
      state_(std::move(state)),
      user_inputs_(std::move(user_inputs)),
      specialisation_(std::move(specialisation)),
      input_meta_(std::move(input_meta)),
      memory_budget_(memory_budget),
      time_budget_(time_budget) {}

std::vector<c10::IValue> ExportedModule::graph_inputs(const std::vector<at::Tensor>& args) const {
  if (args.size() != user_inputs_.size()) {
    fail<ShapeError>("the exported program takes {} user input(s) ({}); {} given",
                     user_inputs_.size(), fmt::join(user_inputs_, ", "), args.size());
  }
  if (specialisation_) {
    if (const auto batch = detail::input_batch(args)) specialisation_->check(*batch);
  }
  detail::check_inputs(input_meta_, args, [this](size_t i) { return user_inputs_[i]; });
  std::vector<at::Tensor> user(args);
  // The archive does not say which inputs the trace saw contiguous: all are taken as such.
  std::optional<std::vector<bool>> written;  // worked out for the first input that needs it
  detail::contiguous_as_traced(
      user, {},
      [&](size_t i) {
        if (!written) written = inputs_written(runner_->graph());
        return state_.size() + i < written->size() && (*written)[state_.size() + i];
      },
      [this](size_t i) { return user_inputs_[i]; });
  std::vector<c10::IValue> inputs(state_.begin(), state_.end());
  inputs.insert(inputs.end(), user.begin(), user.end());
  return inputs;
}

std::vector<at::Tensor> ExportedModule::operator()(const std::vector<at::Tensor>& args) const {
  std::optional<ScopedMemoryBudget> budget;
  if (memory_budget_ > 0) budget.emplace(memory_budget_, kProgramBudget);
  const ScopedTimeBudget time(time_budget_, kProgramTimeBudget);
  std::vector<at::Tensor> out;
  for (auto& value : runner_->run(graph_inputs(args))) {
    if (!value.isTensor()) {
      fail<RunError>("output {} of the exported program is a {}, not a tensor", out.size(),
                     value.tagKind());
    }
    out.push_back(std::move(value).toTensor());
  }
  return out;
}

std::vector<at::Tensor> ExportedModule::operator()(
    const std::vector<std::pair<std::string, at::Tensor>>& kwargs) const {
  std::vector<at::Tensor> args(user_inputs_.size());
  std::vector<bool> given(user_inputs_.size(), false);
  for (const auto& [name, tensor] : kwargs) {
    auto it = std::find(user_inputs_.begin(), user_inputs_.end(), name);
    if (it == user_inputs_.end()) {
      fail<KeyError>("the exported program has no input '{}'; inputs: {}", name,
                     fmt::join(user_inputs_, ", "));
    }
    const auto index = static_cast<size_t>(it - user_inputs_.begin());
    if (given[index]) fail<KeyError>("input '{}' given twice", name);
    given[index] = true;
    args[index] = tensor;
  }
  for (size_t i = 0; i < given.size(); ++i) {
    if (!given[i]) fail<KeyError>("missing input '{}' of the exported program", user_inputs_[i]);
  }
  return (*this)(args);
}

ExportedProgram::ExportedProgram(Graph graph, GraphSignature signature,
                                 std::map<std::string, at::Tensor> state,
                                 std::optional<BatchSpecialisation> specialisation,
                                 std::vector<ModuleBox> modules)
    : ExportedProgram(std::make_shared<GraphModule>(nullptr, std::move(graph)),
                      std::move(signature), std::move(state), std::move(specialisation),
                      std::move(modules)) {}

ExportedProgram::ExportedProgram(CompileOnFirstRun, Graph graph, GraphSignature signature,
                                 std::map<std::string, at::Tensor> state,
                                 std::optional<BatchSpecialisation> specialisation,
                                 std::vector<ModuleBox> modules)
    : ExportedProgram(std::make_shared<GraphModule>(nullptr, std::move(graph), nullptr,
                                                    GraphModule::Attributes{}),
                      std::move(signature), std::move(state), std::move(specialisation),
                      std::move(modules)) {}

ExportedProgram::ExportedProgram(std::shared_ptr<const GraphModule> runner,
                                 GraphSignature signature, std::map<std::string, at::Tensor> state,
                                 std::optional<BatchSpecialisation> specialisation,
                                 std::vector<ModuleBox> modules)
    : runner_(std::move(runner)),
      signature_(std::move(signature)),
      state_(std::move(state)),
      specialisation_(std::move(specialisation)),
      modules_(std::move(modules)) {
  for (const auto& in : signature_.inputs) {
    if (in.kind != InputKind::kUserInput && !state_.count(in.name)) {
      fail<GraphError>("the program's input {} has no weight", in.name);
    }
  }
  // Which dimensions are dynamic is what the placeholders' metadata says.
  in_meta_.reserve(signature_.inputs.size());
  size_t i = 0;
  for (const Node* node : runner_->graph().nodes()) {
    if (node->op() != OpCode::kPlaceholder || i >= signature_.inputs.size()) continue;
    InputSpec& in = signature_.inputs[i++];
    const TensorMeta& meta = node->meta().tensor;
    // Only a user input's is read: by its checks, and by module()'s.
    in_meta_.push_back(in.kind == InputKind::kUserInput ? meta : TensorMeta{});
    for (const int64_t dim : meta.batch_dims) {
      if (meta.prints_symbolic(static_cast<size_t>(dim))) in.batch_dims.push_back(dim);
    }
  }
}

void ExportedProgram::set_example_inputs(std::map<std::string, at::Tensor> inputs) {
  for (const auto& [name, tensor] : inputs) {
    const TensorMeta* meta = nullptr;
    for (size_t i = 0; i < signature_.inputs.size() && i < in_meta_.size(); ++i) {
      const InputSpec& in = signature_.inputs[i];
      if (in.kind == InputKind::kUserInput && in.name == name) meta = &in_meta_[i];
    }
    if (!meta) fail<GraphError>("example input {}: not a user input of the program", name);
    bool fits = tensor.defined() && (!meta->dtype || *meta->dtype == tensor.scalar_type());
    if (fits && meta->shape) {
      fits = static_cast<size_t>(tensor.dim()) == meta->shape->size();
      for (size_t d = 0; fits && d < meta->shape->size(); ++d) {
        fits = meta->follows_batch(d) || tensor.size(static_cast<int64_t>(d)) == (*meta->shape)[d];
      }
    }
    if (!fits) {
      fail<GraphError>("example input {}: {}, where its placeholder is {} [{}]", name,
                       tensor.defined() ? fmt::format("{} [{}]", dtype_name(tensor.scalar_type()),
                                                      fmt::join(tensor.sizes(), ", "))
                                        : std::string("an undefined tensor"),
                       meta->dtype ? dtype_name(*meta->dtype) : std::string("any dtype"),
                       meta->shape ? fmt::format("{}", fmt::join(*meta->shape, ", ")) : "…");
    }
  }
  example_inputs_ = std::move(inputs);
}

void ExportedProgram::set_optimizer_state(OptimizerState state) {
  const OptimizerKind* kind = optimizer_kind(state.type);
  if (!kind) {
    fail<GraphError>(
        "optimizer state: type '{}' is not one tdfx keeps (Adam, AdamW, SGD, "
        "RMSprop, Adagrad)",
        state.type);
  }
  // Each parameter input by its target, with its weight.
  std::map<std::string, const at::Tensor*> weights;
  for (const InputSpec& in : signature_.inputs) {
    if (in.kind == InputKind::kParameter) weights.emplace(in.target, &state_.at(in.name));
  }
  std::map<std::string, const at::Tensor*> grouped;
  for (size_t i = 0; i < state.groups.size(); ++i) {
    const OptimizerState::Group& group = state.groups[i];
    const bool same_options =
        group.options.size() == kind->options.size() &&
        std::all_of(kind->options.begin(), kind->options.end(), [&](std::string_view o) {
          const auto found = group.options.find(std::string(o));
          return found != group.options.end() && std::isfinite(found->second);
        });
    if (!same_options) {
      fail<GraphError>("optimizer state: group {}: {}'s options are {}, each a finite number", i,
                       state.type, fmt::join(kind->options, ", "));
    }
    for (const auto& [option, value] : group.options) {
      if (const std::string problem = option_problem(*kind, option, value); !problem.empty()) {
        fail<GraphError>("optimizer state: group {}: option {} is {}, not {}", i, option, value,
                         problem);
      }
    }
    for (const std::string& name : group.parameters) {
      const auto weight = weights.find(name);
      if (weight == weights.end() || !grouped.emplace(name, weight->second).second) {
        fail<GraphError>(
            "optimizer state: group {}: {} is not a parameter input of the program, or is in "
            "two groups",
            i, name);
      }
    }
  }
  for (const auto& [name, parameter] : state.parameters) {
    const auto weight = grouped.find(name);
    if (weight == grouped.end()) {
      fail<GraphError>("optimizer state: the state of {} is for no parameter of a group", name);
    }
    if (parameter.step < 0 || (!kind->counts_steps && parameter.step != 0)) {
      fail<GraphError>("optimizer state: {}: step {} for {}", name, parameter.step, state.type);
    }
    const at::Tensor& w = *weight->second;
    for (const auto& [tensor_name, tensor] : parameter.tensors) {
      if (std::find(kind->tensors.begin(), kind->tensors.end(), tensor_name) ==
          kind->tensors.end()) {
        fail<GraphError>("optimizer state: {}: {} keeps no state tensor '{}'", name, state.type,
                         tensor_name);
      }
      if (!tensor.defined() || tensor.scalar_type() != w.scalar_type() ||
          tensor.sizes() != w.sizes()) {
        fail<GraphError>("optimizer state: {}: its {} is not of its parameter's dtype and shape",
                         name, tensor_name);
      }
    }
  }
  optimizer_state_ = std::move(state);
}

ExportedModule ExportedProgram::module() const {
  std::vector<at::Tensor> state;
  std::vector<std::string> user_inputs;
  std::vector<TensorMeta> user_meta;
  for (size_t i = 0; i < signature_.inputs.size(); ++i) {
    const InputSpec& in = signature_.inputs[i];
    if (in.kind == InputKind::kUserInput) {
      user_inputs.push_back(in.target);
      user_meta.push_back(i < in_meta_.size() ? in_meta_[i] : TensorMeta{});
    } else {
      state.push_back(state_.at(in.name));
    }
  }
  return ExportedModule(runner_, std::move(state), std::move(user_inputs), specialisation_,
                        std::move(user_meta), memory_budget_, time_budget_);
}

std::string ExportedProgram::code() const {
  CodeOptions options;
  options.style = CodeStyle::kExport;
  return python_code(graph(), options);
}

std::string ExportedProgram::print_readable() const {
  CodeOptions options = readable_defaults();
  options.style = CodeStyle::kExport;
  return tdfx::print_readable(graph(), options);
}

namespace {

std::string indented(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    if (end - start > 1) out += "    ";
    out.append(text, start, end - start);
    start = end;
  }
  return out;
}

}  // namespace

std::string to_string(const ExportedProgram& value) {
  std::string readable = value.print_readable();
  // print_readable ends as FX's code does, with an indented empty line.
  readable.erase(readable.find_last_not_of(" \n") + 1);
  return "ExportedProgram:\n" + indented(readable) + "\n\nGraph signature:\n" +
         indented(value.graph_signature().str());
}

std::ostream& operator<<(std::ostream& os, const ExportedProgram& value) {
  return os << to_string(value);
}

namespace {

// KeyError when two of forward's parameters would have one name: the placeholders' targets,
// a key's parts joined with `_` and a lifted parameter's `p_` path, are forward's parameters
// in printed code and in an archive (save refuses such a program, Python could not run it).
// Named now, by key, rather than at save.
void refuse_clashing_inputs(const Graph& graph, const GraphSignature& signature,
                            const std::vector<NestedKey>& input_keys) {
  // The first placeholder of each target, by a view of its target: no copy on the way.
  std::unordered_map<std::string_view, const Node*> taken;
  taken.reserve(signature.inputs.size());
  for (const Node* node : graph.nodes()) {
    if (node->op() != OpCode::kPlaceholder) continue;
    const auto [at, added] = taken.emplace(node->target().str(), node);
    if (added) continue;
    // What each of the two stands for: a user input's key (user inputs are in key order), or
    // the parameter or buffer a lifted input is.
    auto what = [&](const Node* input) {
      size_t user = 0;
      for (const InputSpec& in : signature.inputs) {
        const bool is_user = in.kind == InputKind::kUserInput;
        if (in.name == input->name()) {
          return is_user && user < input_keys.size() ? "in key " + input_keys[user].repr()
                                                     : "the lifted input for " + in.target;
        }
        user += is_user ? 1 : 0;
      }
      return "%" + input->name();
    };
    fail<KeyError>(
        "export_program: {} and {} are both called {} as program inputs; rename one of them",
        what(at->second), what(node), python_repr(node->target().str()));
  }
}

// The exported program of a program graph (a trace's, or a recording's) whose get_attr
// targets are paths from `prefix` in the pipeline: paths made whole, Linear's decomposition
// fused, updates of the program's own values made functional, scalar overloads made
// canonical, dead code removed, parameters and buffers lifted to inputs.
// `state`: the pipeline's parameters and buffers (detail::ModuleTable::state()); `modules`: its
// boxes (pipeline_modules).
ExportedProgram export_program_graph(Graph graph, const std::string& prefix,
                                     const std::vector<detail::StateTensor>& state,
                                     const GraphModule::Attributes& constants,
                                     const std::vector<NestedKey>& input_keys,
                                     const std::vector<NestedKey>& out_keys,
                                     const std::optional<BatchSpecialisation>& specialisation,
                                     std::vector<ModuleBox> modules) {
  // Paths from the pipeline rather than from the trace's root; errors name the program's
  // own nodes.
  for (Node* node : graph.nodes()) {
    NodeMeta& meta = node->meta();
    meta.shown_as.clear();
    if (prefix.empty()) continue;
    if (node->op() == OpCode::kGetAttr) {
      node->set_target(detail::join_path(prefix, node->target().str()));
    }
    const bool op = node->op() == OpCode::kCallFunction || node->op() == OpCode::kCallMethod;
    if (op || !meta.module_path.empty()) {
      meta.module_path = detail::join_path(prefix, meta.module_path);
    }
    if (!meta.td_module.empty()) meta.td_module = detail::join_path(prefix, meta.td_module);
  }
  fuse_linear(graph);
  functionalize(graph);
  canonicalize_scalar_overloads(graph);
  graph.eliminate_dead_code();
  GraphSignature signature;
  std::map<std::string, at::Tensor> weights;
  NodeSet lifted_placeholders;
  std::vector<LiftedState> lifted_state = lift_parameters(graph, state, constants);
  signature.inputs.reserve(lifted_state.size() + input_keys.size());
  for (LiftedState& lifted : lifted_state) {
    lifted_placeholders.insert(lifted.placeholder);
    weights.emplace(lifted.name, std::move(lifted.tensor));
    signature.inputs.push_back({lifted.constant    ? InputKind::kConstant
                                : lifted.parameter ? InputKind::kParameter
                                                   : InputKind::kBuffer,
                                std::move(lifted.name),
                                std::move(lifted.path),
                                {}});
  }
  // User placeholders come in the order their keys were read; each is
  // called by its key's joined name, which need not be an identifier.
  size_t next_key = 0;
  for (const Node* node : graph.nodes()) {
    if (node->op() != OpCode::kPlaceholder) continue;
    if (lifted_placeholders.contains(node)) continue;
    if (next_key >= input_keys.size()) {
      throw InternalError("export_program: more user placeholders than keys read");
    }
    signature.inputs.push_back(
        {InputKind::kUserInput, node->name(), input_keys[next_key++].joined("_"), {}});
  }
  refuse_clashing_inputs(graph, signature, input_keys);
  const auto& results = graph.output_node()->args()[0].as<ArgumentList>().items;
  signature.outputs.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const Node* node = results[i].node();
    signature.outputs.push_back({node ? node->name() : std::string("<constant>"), out_keys[i]});
  }
  // The program's GraphModule lints the graph as it compiles it, on its first run.
  return ExportedProgram(ExportedProgram::CompileOnFirstRun{}, std::move(graph),
                         std::move(signature), std::move(weights), specialisation,
                         std::move(modules));
}

}  // namespace

ExportedProgram export_program(const std::shared_ptr<TensorDictModuleBase>& module,
                               const std::vector<std::pair<std::string, at::Tensor>>& inputs,
                               const ExportOptions& options) {
  if (!module) throw TraceError("export_program: the module is null");
  // The example TensorDict, from keyword names joined with "_".
  TensorDict example;
  std::vector<std::string> accepted;
  for (const NestedKey& key : module->in_keys()) {
    const std::string name = key.joined("_");
    auto same = std::find(accepted.begin(), accepted.end(), name);
    if (same != accepted.end()) {
      fail<KeyError>(
          "{}: in keys {} and {} are both called '{}' as program inputs; rename one of them",
          module->describe(),
          module->in_keys()[static_cast<size_t>(same - accepted.begin())].repr(), key.repr(), name);
    }
    accepted.push_back(name);
  }
  for (const auto& [name, tensor] : inputs) {
    auto it = std::find(accepted.begin(), accepted.end(), name);
    if (it == accepted.end()) {
      fail<KeyError>("{}: unknown input '{}'; inputs: {}", module->describe(), name,
                     fmt::join(accepted, ", "));
    }
    example.set(module->in_keys()[static_cast<size_t>(it - accepted.begin())], tensor);
  }
  // The program is a pass over the recording; the FX view is built only to name where a
  // dynamic trace's recordings part.
  TraceOptions trace;
  trace.dynamic_batch = options.dynamic_batch;
  trace.batch_probes = options.batch_probes;
  detail::ContractRecording recorded = detail::record_with_contract(*module, example, "", trace);
  detail::PipelineRecording& recording = recorded.recording;
  const detail::LiveNodes live(recording, trace);
  const detail::StateUpdates updates(recording);
  if (recorded.divergence) {
    detail::refuse_divergence(recorded, live, updates, trace, module->describe());
  }
  detail::FlatProgram program = detail::flat_program(recording, live, updates, trace);
  GraphModule::Attributes constants;
  for (const auto& [path, tensor] : recording.constants) constants.emplace(path, tensor);
  // The boxes from the layout's walk, labelled with the descriptions flat_program made.
  std::unordered_map<const TensorDictModule*, const std::string*> described;
  for (const detail::RecordedCall& call : recording.calls) {
    described.emplace(call.module, &call.module_type);
  }
  std::vector<ModuleBox> modules = detail::pipeline_modules(
      recorded.layout.places, *recorded.layout.table, [&](const TensorDictModule& m) {
        const auto it = described.find(&m);
        return it == described.end() ? nullptr : it->second;
      });
  return export_program_graph(std::move(program.graph), "", recorded.layout.table->state(),
                              constants, program.input_keys, program.out_keys,
                              detail::specialisation_of(recorded), std::move(modules));
}

ExportedProgram export_program(const TDGraphModule& traced) {
  // Paths from the pipeline, as export_program_graph makes the graph's.
  GraphModule::Attributes constants;
  for (const auto& [path, tensor] : traced.constants()) {
    constants.emplace(detail::join_path(traced.root_prefix(), path), tensor);
  }
  const detail::ModuleTable table(*traced.pipeline());
  return export_program_graph(traced.program_graph().copy(), traced.root_prefix(), table.state(),
                              constants, traced.input_keys(), traced.out_keys(),
                              traced.batch_specialisation(),
                              detail::pipeline_modules(*traced.pipeline(), "", table));
}

}  // namespace tdfx
