#include "tdfx/tracer/symbolic_trace.h"

#include <ostream>

#include "tdfx/codegen/python_code.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/graph/interpreter.h"
#include "tdfx/graph/namespace.h"
#include "tdfx/graph/passes.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/tracer/batch_generalise.h"
#include "tdfx/tracer/dispatch_trace.h"
#include "tdfx/tracer/fx_view.h"
#include "tdfx/tracer/graph_builder.h"
#include "tdfx/tracer/program_pass.h"
#include "tdfx/tracer/recorder.h"

namespace tdfx {

namespace {

// Builds the program graph of a printed graph, as traced or edited (recompile), in one walk:
// each getitem(tensordict, key) becomes a placeholder named by its key, before any other node,
// in the order of the reads; a call_module's body is inlined (its get_attr paths made whole,
// its result bound to the call's users, getitem picking from a tuple result); a call_method is
// the aten call it runs, every schema argument positional; every node takes its
// NodeMeta::program_name when it has one. Ops of a body belong to the module the call ran and
// name the call in errors (shown_as), as does a method call.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(const std::shared_ptr<torch::nn::Module>& root) : root_(root) {}

  Graph build(const Graph& printed, std::vector<NestedKey>& input_keys) {
    input_keys_ = &input_keys;
    for (const Node* node : printed.nodes()) {
      if (node->op() == OpCode::kPlaceholder && node->target().str() == "tensordict") {
        tensordict_ = node;
        input_keys.clear();  // the reads give them, in order
      }
    }
    copy_nodes(printed, nullptr, "");
    out_.lint();
    return std::move(out_);
  }

 private:
  Argument map(const Argument& arg) const {
    if (const Node* node = arg.node()) return env_.at(node);
    if (arg.is<ArgumentList>()) {
      const auto& list = arg.as<ArgumentList>();
      std::vector<Argument> items;
      items.reserve(list.items.size());
      for (const Argument& item : list.items) items.push_back(map(item));
      return ArgumentList{std::move(items), list.is_tuple};
    }
    return arg;
  }
  Args map_all(const Args& args) const {
    Args out;
    out.reserve(args.size());
    for (const Argument& arg : args) out.push_back(map(arg));
    return out;
  }
  Kwargs map_all(const Kwargs& kwargs) const {
    Kwargs out;
    for (const auto& [name, arg] : kwargs) out.emplace_back(name, map(arg));
    return out;
  }
  static const std::string& name_of(const Node& node) {
    return node.meta().program_name.empty() ? node.name() : node.meta().program_name;
  }

  // Copies `graph`'s nodes; `call` is the call_module whose body it is (null for the top),
  // `prefix` its target with a dot.
  void copy_nodes(const Graph& graph, const Node* call, const std::string& prefix) {
    size_t next_arg = 0;
    for (const Node* node : graph.nodes()) {
      switch (node->op()) {
        case OpCode::kPlaceholder:
          if (call) {
            env_[node] = map(call->args().at(next_arg++));
          } else if (node != tensordict_) {
            env_[node] = add_placeholder(*node, node->target().str());
          }
          continue;
        case OpCode::kOutput:
          if (call) {
            env_[call] = map(node->args().at(0));
          } else {
            finish(out_.output(map(node->args().at(0))), *node, nullptr);
          }
          continue;
        case OpCode::kCallModule:
          if (node->body()) {
            copy_nodes(*node->body(), node, prefix + node->target().str() + ".");
            continue;
          }
          break;
        case OpCode::kGetAttr: {
          const std::string path = prefix + node->target().str();
          Node*& read = attribute_reads_[tensor_at(path)];
          if (!read || !tensor_at(path)) {
            read = finish(out_.create_node(OpCode::kGetAttr, Target(path), {}, {}, name_of(*node)),
                          *node, call);
          }
          env_[node] = read;
          continue;
        }
        case OpCode::kCallMethod:
          if (node->target().has_operator()) {
            env_[node] =
                finish(out_.create_node(OpCode::kCallFunction, node->target().as_function(),
                                        map_all(schema_arguments(*node)), {}, name_of(*node)),
                       *node, call, /*method=*/true);
            continue;
          }
          break;
        case OpCode::kCallFunction:
          if (node->target().is_getitem() && tensordict_ &&
              node->args().at(0).node() == tensordict_) {
            const auto& key = node->args().at(1).as<NestedKey>();
            input_keys_->push_back(key);
            env_[node] = add_placeholder(*node, parameter_name(key.joined("_")));
            continue;
          }
          if (node->target().is_getitem()) {
            // An item of a body's tuple result is that item.
            const Argument source = map(node->args().at(0));
            if (source.is<ArgumentList>() && node->args().at(1).is<int64_t>()) {
              env_[node] = source.as<ArgumentList>().items.at(
                  static_cast<size_t>(node->args()[1].as<int64_t>()));
              continue;
            }
          }
          break;
      }
      env_[node] = finish(out_.create_node(node->op(), node->target(), map_all(node->args()),
                                           map_all(node->kwargs()), name_of(*node)),
                          *node, call);
    }
  }

  Node* add_placeholder(const Node& node, const std::string& target) {
    Node* input;
    {
      auto guard = first_op_ ? out_.inserting_before(first_op_) : Graph::InsertGuard(out_, nullptr);
      input = out_.placeholder(target);
    }
    if (!node.meta().program_name.empty()) out_.rename(input, node.meta().program_name);
    input->meta() = node.meta();
    input->meta().program_name.clear();
    return input;
  }

  Node* finish(Node* copy, const Node& node, const Node* call, bool method = false) {
    if (!first_op_ && copy->op() != OpCode::kPlaceholder) first_op_ = copy;
    NodeMeta& meta = copy->meta();
    meta = node.meta();
    meta.program_name.clear();
    if (call) {
      const NodeMeta& called = call->meta();
      meta.module_path = called.module_path;
      meta.module_type = called.module_type;
      meta.td_module = called.td_module;
      meta.shown_as = called.shown_as.empty() ? describe(*call) : called.shown_as;
    } else if (meta.shown_as.empty() && (method || copy->name() != node.name())) {
      meta.shown_as = describe(node);  // errors name the node as printed
    }
    return copy;
  }

  // The tensor of root_ at `path`, or null: bodies that read one tensor (a layer shared by two
  // TensorDictModules) share its get_attr, as its first path.
  const c10::TensorImpl* tensor_at(const std::string& path) {
    if (!root_) return nullptr;
    if (tensors_.empty()) {
      for (const auto& item : root_->named_parameters(true))
        tensors_[item.key()] = item.value().unsafeGetTensorImpl();
      for (const auto& item : root_->named_buffers(true))
        tensors_[item.key()] = item.value().unsafeGetTensorImpl();
    }
    auto it = tensors_.find(path);
    return it == tensors_.end() ? nullptr : it->second;
  }

  std::shared_ptr<torch::nn::Module> root_;
  std::unordered_map<std::string, const c10::TensorImpl*> tensors_;
  std::unordered_map<const c10::TensorImpl*, Node*> attribute_reads_;
  Graph out_;
  const Node* tensordict_ = nullptr;
  Node* first_op_ = nullptr;
  std::vector<NestedKey>* input_keys_ = nullptr;
  std::unordered_map<const Node*, Argument> env_;
};

// The program graph of a printed graph whose targets are paths in `root` (ProgramBuilder); the
// keys its placeholders read replace `input_keys` when it reads them from a tensordict, and
// are kept when it takes placeholders.
Graph program_from_printed(const Graph& printed, const std::shared_ptr<torch::nn::Module>& root,
                           std::vector<NestedKey>& input_keys) {
  return ProgramBuilder(root).build(printed, input_keys);
}

}  // namespace

TDGraphModule::TDGraphModule(std::shared_ptr<TensorDictModuleBase> pipeline,
                             std::shared_ptr<torch::nn::Module> root, std::string root_prefix,
                             Graph graph, Graph program, std::vector<NestedKey> input_keys,
                             std::vector<NestedKey> out_keys, std::vector<ModuleBox> modules,
                             std::optional<BatchSpecialisation> specialisation,
                             std::vector<int64_t> recorded_batches)
    : pipeline_(std::move(pipeline)),
      root_(std::move(root)),
      root_prefix_(std::move(root_prefix)),
      graph_(std::move(graph)),
      out_keys_(std::move(out_keys)),
      modules_(std::move(modules)),
      input_keys_(std::move(input_keys)),
      specialisation_(std::move(specialisation)),
      recorded_batches_(std::move(recorded_batches)),
      runner_(std::make_unique<GraphModule>(root_, std::move(program))) {
  note_input_meta();
  note_modes();
  compiled_generation_ = graph_.generation();
}

const Graph& TDGraphModule::program_graph() const {
  check_not_edited();
  return runner_->graph();
}

void TDGraphModule::note_input_meta() {
  input_meta_.clear();
  for (const Node* node : runner_->graph().nodes()) {
    if (node->op() == OpCode::kPlaceholder) input_meta_.push_back(node->meta().tensor);
  }
}

void TDGraphModule::note_modes() {
  if (!root_) return;
  for (const auto& item : root_->named_modules("", true)) {
    modes_.push_back({item.key(), item.value(), item.value()->is_training()});
  }
}

void TDGraphModule::check_modes() const {
  // Innermost first: train() on a model changes every module, and its Dropout says most.
  for (auto mode = modes_.rbegin(); mode != modes_.rend(); ++mode) {
    if (mode->module->is_training() == mode->training) continue;
    auto name = [](bool training) { return training ? "training" : "eval"; };
    fail<RunError>(
        "{} was in {} mode when traced and is in {} mode now; the graph holds the ops of the "
        "traced mode (dropout, batch statistics): trace it again after train() or eval()",
        mode->path.empty() ? "the traced module" : "module '" + mode->path + "'",
        name(mode->training), name(!mode->training));
  }
}

std::string TDGraphModule::code() const { return python_code(graph_); }

std::string to_string(const TDGraphModule& value) { return value.code(); }

std::ostream& operator<<(std::ostream& os, const TDGraphModule& value) {
  return os << to_string(value);
}

Graph& TDGraphModule::mutable_graph() {
  std::atomic_store(&printed_, std::shared_ptr<const GraphModule>());
  return graph_;
}

void TDGraphModule::check_not_edited() const {
  if (graph_.generation() != compiled_generation_) {
    fail<GraphError>("the graph was edited; call recompile() before running it");
  }
}

namespace {

// Zeros of each input's traced dtype and shape: values ShapeProp can run the graph on.
c10::IValue example_inputs(const std::vector<NestedKey>& keys,
                           const std::vector<TensorMeta>& meta) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (size_t i = 0; i < keys.size(); ++i) {
    const TensorMeta& m = meta.at(i);
    if (!m.shape || !m.dtype) {
      fail<GraphError>("input {} has no traced shape to propagate shapes with", keys[i].repr());
    }
    dict.insert(keys[i].repr(), at::zeros(*m.shape, at::TensorOptions().dtype(*m.dtype)));
  }
  return dict;
}

bool lacks_meta(const Node& node) {
  return node.op() != OpCode::kOutput && !node.meta().tensor.shape.has_value();
}

}  // namespace

void TDGraphModule::recompile() {
  graph_.lint();
  const Node* output = graph_.output_node();
  const size_t returned = !output ? 0
                          : output->args().at(0).is<ArgumentList>()
                              ? output->args()[0].as<ArgumentList>().items.size()
                              : 1;
  if (returned != out_keys_.size()) {
    fail<GraphError>("the edited graph returns {} value(s); the module writes {} out key(s)",
                     returned, out_keys_.size());
  }
  bool needs_shapes = false;
  for (const Node* node : graph_.nodes()) needs_shapes |= lacks_meta(*node);
  if (needs_shapes) {
    // Shapes come from a copy (ShapeProp writes the meta of the graph it runs), then are
    // given to the nodes of graph_ that lack them; names are unique, so they match.
    GraphModule copy(root_, graph_.copy());
    ShapeProp(copy).propagate({example_inputs(input_keys_, input_meta_)});
    std::unordered_map<std::string, const Node*> by_name;
    for (const Node* node : copy.graph().nodes()) by_name[node->name()] = node;
    for (Node* node : graph_.nodes()) {
      if (lacks_meta(*node)) node->meta().tensor = by_name.at(node->name())->meta().tensor;
    }
  }
  std::vector<NestedKey> input_keys = input_keys_;
  runner_ = std::make_unique<GraphModule>(root_, program_from_printed(graph_, root_, input_keys));
  input_keys_ = std::move(input_keys);
  note_input_meta();
  std::atomic_store(&printed_, std::shared_ptr<const GraphModule>());
  compiled_generation_ = graph_.generation();
}

const GraphModule& TDGraphModule::graph_module() const {
  check_not_edited();
  auto printed = std::atomic_load(&printed_);
  if (!printed) {
    printed = std::make_shared<const GraphModule>(root_, graph_.copy());
    std::atomic_store(&printed_, printed);
  }
  return *printed;
}

std::vector<c10::IValue> TDGraphModule::graph_inputs(const TensorDict& td) const {
  const auto tensors = checked_inputs(td);
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (size_t i = 0; i < tensors.size(); ++i) dict.insert(input_keys_[i].repr(), tensors[i]);
  return {dict};
}

std::vector<at::Tensor> TDGraphModule::checked_inputs(const TensorDict& td) const {
  check_not_edited();
  check_modes();
  std::vector<at::Tensor> tensors_in;
  tensors_in.reserve(input_keys_.size());
  for (const NestedKey& key : input_keys_) tensors_in.push_back(td.get(key));
  if (specialisation_) {
    const auto batch =
        td.batch_size().empty() ? detail::input_batch(tensors_in) : td.batch_size()[0];
    if (batch) specialisation_->check(*batch);
  }
  detail::check_inputs(input_meta_, tensors_in, [this](size_t i) { return input_keys_[i].repr(); });
  return tensors_in;
}

std::vector<at::Tensor> TDGraphModule::run(const TensorDict& td) const {
  const auto tensors_in = checked_inputs(td);
  auto outputs = runner_->run(std::vector<c10::IValue>(tensors_in.begin(), tensors_in.end()));
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
    if (!is_leaf(options, *inner, "")) return {inner, "module"};
  }
  return {module, ""};
}

}  // namespace detail

namespace {

// A trace by tdfx's recorder on the dispatcher: one recording, the program and the FX view
// passes over it. Each program node that the view shows otherwise (inside a leaf call, as a
// method, or by another name) names its view node in errors.
TDGraphModule dispatch_trace(const std::shared_ptr<TensorDictModuleBase>& module,
                             const TensorDict& example, const TraceOptions& options) {
  if (options.dynamic_batch) {
    fail<TraceError>(
        "{}: TraceOptions::dispatch_recorder records a static batch only so far; trace "
        "without it for a dynamic batch",
        module->describe());
  }
  const auto [root, prefix] = detail::graph_root(module, options);
  detail::PipelineRecording recording = detail::record_pipeline(*module, example, prefix);
  const detail::LiveNodes live(recording, options);
  const detail::StateUpdates updates(recording);
  const detail::LeafCalls leaves = detail::find_leaf_calls(recording, live, updates, options);
  detail::FlatProgram program = detail::flat_program(recording, live, leaves);
  detail::FxView view = detail::fx_view(recording, live, leaves, updates, options);
  for (const auto& [recorded, node] : program.copies) {
    if (recorded->op() == OpCode::kPlaceholder) continue;
    // A parameter is shown as the leaf call that first reads it, if one does.
    const std::vector<Node*> users =
        recorded->op() == OpCode::kGetAttr ? live.users(recorded) : std::vector<Node*>();
    const Node* owner = users.empty() ? recorded : users.front();
    if (owner != recorded && !leaves.find(owner)) continue;
    auto shown = view.origin.find(owner);
    if (shown == view.origin.end()) continue;
    const Node& printed = *shown->second;
    if (printed.op() == OpCode::kCallModule || printed.op() == OpCode::kCallMethod ||
        printed.name() != node->name()) {
      node->meta().shown_as = describe(printed);
    }
  }
  std::optional<BatchSpecialisation> specialisation;
  std::vector<int64_t> recorded_batches;
  if (recording.batch) {
    specialisation = BatchSpecialisation{*recording.batch, "", ""};
    recorded_batches.push_back(*recording.batch);
  }
  return TDGraphModule(module, root, prefix, std::move(view.graph), std::move(program.graph),
                       std::move(program.input_keys), std::move(view.output_keys),
                       pipeline_modules(*module, prefix), std::move(specialisation),
                       std::move(recorded_batches));
}

}  // namespace

TDGraphModule symbolic_trace(const std::shared_ptr<TensorDictModuleBase>& module,
                             const TensorDict& example, TraceOptions options) {
  if (!module) throw TraceError("symbolic_trace: the module is null");
  if (!options.dynamic_batch) return dispatch_trace(module, example, options);
  const auto [root, prefix] = detail::graph_root(module, options);
  detail::ContractRecording recorded =
      detail::record_with_contract(*module, example, prefix, options);
  detail::BuiltGraph built = detail::build_graph(recorded.recording, options);
  if (recorded.divergence) detail::refuse_divergence(recorded, built, module->describe());
  std::optional<BatchSpecialisation> specialisation = detail::specialisation_of(recorded);
  std::vector<ModuleBox> modules = pipeline_modules(*module, prefix);
  std::vector<NestedKey> input_keys = built.input_keys;
  Graph program = program_from_printed(built.graph, root, input_keys);
  return TDGraphModule(module, root, prefix, std::move(built.graph), std::move(program),
                       std::move(input_keys), std::move(built.output_keys), std::move(modules),
                       std::move(specialisation), std::move(recorded.recorded));
}

}  // namespace tdfx
