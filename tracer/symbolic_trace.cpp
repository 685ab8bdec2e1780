#include "tdfx/tracer/symbolic_trace.h"

#include <algorithm>
#include <optional>
#include <ostream>

#include "tdfx/codegen/python_code.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/effects.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/graph/interpreter.h"
#include "tdfx/graph/namespace.h"
#include "tdfx/graph/passes.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/tracer/dynamic_batch.h"
#include "tdfx/tracer/lower_view.h"
#include "tdfx/tracer/program_pass.h"
#include "tdfx/tracer/state_restore.h"
#include "tdfx/tracer/traced_view.h"

namespace tdfx {

TDGraphModule::TDGraphModule(std::shared_ptr<TensorDictModuleBase> pipeline,
                             std::shared_ptr<torch::nn::Module> root, std::string root_prefix,
                             Graph graph, Graph program, std::vector<NestedKey> input_keys,
                             std::vector<NestedKey> out_keys,
                             std::optional<BatchSpecialisation> specialisation,
                             std::vector<int64_t> recorded_batches)
    : pipeline_(std::move(pipeline)),
      root_(std::move(root)),
      root_prefix_(std::move(root_prefix)),
      view_(std::make_shared<detail::TracedView>(std::move(graph))),
      out_keys_(std::move(out_keys)),
      input_keys_(std::move(input_keys)),
      specialisation_(std::move(specialisation)),
      recorded_batches_(std::move(recorded_batches)),
      runner_(std::make_unique<GraphModule>(root_, std::move(program))) {
  note_input_meta();
  note_modes();
}

TDGraphModule::TDGraphModule(std::shared_ptr<TensorDictModuleBase> pipeline,
                             std::shared_ptr<torch::nn::Module> root, std::string root_prefix,
                             std::shared_ptr<detail::TracedView> view, Graph program,
                             GraphModule::Attributes attributes, GraphModule::Attributes constants,
                             std::vector<NestedKey> input_keys, std::vector<bool> input_contiguous,
                             std::vector<NestedKey> out_keys,
                             std::optional<BatchSpecialisation> specialisation,
                             std::vector<int64_t> recorded_batches)
    : pipeline_(std::move(pipeline)),
      root_(std::move(root)),
      root_prefix_(std::move(root_prefix)),
      view_(std::move(view)),
      out_keys_(std::move(out_keys)),
      input_keys_(std::move(input_keys)),
      input_contiguous_(std::move(input_contiguous)),
      specialisation_(std::move(specialisation)),
      recorded_batches_(std::move(recorded_batches)),
      runner_(std::make_unique<GraphModule>(
          root_, std::move(program),
          // The view is kept alive by the runner for as long as errors may name its nodes.
          [view = view_](const Node& node) { return view->shown_as(node); }, std::move(attributes),
          std::move(constants))) {
  view_->made_into(*runner_);
  note_input_meta();
  note_modes();
}

TDGraphModule::TDGraphModule(TDGraphModule&&) noexcept = default;
TDGraphModule& TDGraphModule::operator=(TDGraphModule&&) noexcept = default;
TDGraphModule::~TDGraphModule() = default;

const Graph& TDGraphModule::graph() const { return view_->graph(); }

const Graph& TDGraphModule::program_graph() const {
  check_not_edited();
  view_->name_program();
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
  // Paths are found only for an error (check_modes): a trace does not build one per module.
  root_->apply([this](const std::shared_ptr<torch::nn::Module>& module) {
    modes_.push_back({module, module->is_training()});
  });
}

namespace {

// LibTorch's layers whose forward depends on the mode: what an error about a changed mode
// names first.
bool acts_by_mode(const torch::nn::Module& module) {
  const std::string& name = module.name();
  for (const char* kind : {"Dropout", "BatchNorm", "InstanceNorm", "RReLU"}) {
    if (name.find(kind) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

void TDGraphModule::check_modes() const {
  // train() or eval() on a model changes each of its modules: the error names a changed layer
  // that acts by its mode (a Dropout, a BatchNorm), else the outermost changed module.
  const TracedMode* changed = nullptr;
  for (const TracedMode& mode : modes_) {
    if (mode.module->is_training() == mode.training) continue;
    if (!changed || acts_by_mode(*mode.module)) changed = &mode;
    if (acts_by_mode(*mode.module)) break;
  }
  if (changed) {
    const TracedMode* mode = changed;
    std::string path;
    for (const auto& item : root_->named_modules("", true)) {
      if (item.value() == mode->module) {
        path = item.key();
        break;
      }
    }
    auto name = [](bool training) { return training ? "training" : "eval"; };
    fail<RunError>(
        "{} was in {} mode when traced and is in {} mode now; the graph holds the ops of the "
        "traced mode (dropout, batch statistics): trace it again after train() or eval()",
        path.empty() ? "the traced module" : "module '" + path + "'", name(mode->training),
        name(!mode->training));
  }
}

std::string TDGraphModule::code() const { return python_code(graph()); }

std::string to_string(const TDGraphModule& value) { return value.code(); }

std::ostream& operator<<(std::ostream& os, const TDGraphModule& value) {
  return os << to_string(value);
}

Graph& TDGraphModule::mutable_graph() {
  std::atomic_store(&printed_, std::shared_ptr<const GraphModule>());
  return view_->mutable_graph();
}

void TDGraphModule::check_not_edited() const {
  if (view_->edited()) {
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
  Graph& view = view_->mutable_graph();
  view.lint();
  const Node* output = view.output_node();
  const size_t returned = !output ? 0
                          : output->args().at(0).is<ArgumentList>()
                              ? output->args()[0].as<ArgumentList>().items.size()
                              : 1;
  if (returned != out_keys_.size()) {
    fail<GraphError>("the edited graph returns {} value(s); the module writes {} out key(s)",
                     returned, out_keys_.size());
  }
  bool needs_shapes = false;
  for (const Node* node : view.nodes()) needs_shapes |= lacks_meta(*node);
  if (needs_shapes) {
    // Shapes come from a copy (ShapeProp writes the meta of the graph it runs), then are
    // given to the nodes of the view that lack them; names are unique, so they match.
    GraphModule copy = GraphModule::with_constants(root_, view.copy(), runner_->constants());
    {
      // The graph runs the module's own ops: whatever they write (a counter buffer, running
      // statistics, the generator) is put back, as after a recording.
      std::optional<detail::ModuleStateRestore> restore;
      if (root_) restore.emplace(*root_);
      ShapeProp(copy).propagate({example_inputs(input_keys_, input_meta_)});
    }
    std::unordered_map<std::string, const Node*> by_name;
    for (const Node* node : copy.graph().nodes()) by_name[node->name()] = node;
    for (Node* node : view.nodes()) {
      if (lacks_meta(*node)) node->meta().tensor = by_name.at(node->name())->meta().tensor;
    }
  }
  std::vector<NestedKey> input_keys = input_keys_;
  runner_ = std::make_unique<GraphModule>(GraphModule::with_constants(
      root_, detail::lower_view(view, root_, input_keys), runner_->constants()));
  // The edit may read other keys: each keeps what was recorded of it.
  std::vector<bool> contiguous;
  for (const NestedKey& key : input_keys) {
    auto it = std::find(input_keys_.begin(), input_keys_.end(), key);
    const auto at = static_cast<size_t>(it - input_keys_.begin());
    contiguous.push_back(at < input_contiguous_.size() && input_contiguous_[at]);
  }
  input_contiguous_ = std::move(contiguous);
  std::atomic_store(&inputs_written_, std::shared_ptr<const std::vector<bool>>());
  input_keys_ = std::move(input_keys);
  note_input_meta();
  std::atomic_store(&printed_, std::shared_ptr<const GraphModule>());
  view_->mark_compiled();
}

namespace {

// The value in `slot`, made by `make()` on first use. Concurrent first uses may each make
// one; the first stored is kept and returned to all, so the reference stays valid while the
// slot holds it.
template <class T, class Make>
const T& made_once(std::shared_ptr<const T>& slot, Make make) {
  std::shared_ptr<const T> current = std::atomic_load(&slot);
  if (current) return *current;
  std::shared_ptr<const T> made = make();
  if (std::atomic_compare_exchange_strong(&slot, &current, made)) return *made;
  return *current;  // another thread's, stored first
}

}  // namespace

const std::vector<ModuleBox>& TDGraphModule::modules() const {
  return made_once(modules_, [this] {
    return std::make_shared<const std::vector<ModuleBox>>(
        pipeline_modules(*pipeline_, root_prefix_));
  });
}

const GraphModule& TDGraphModule::graph_module() const {
  check_not_edited();
  return made_once(printed_, [this] {
    return std::make_shared<const GraphModule>(
        GraphModule::with_constants(root_, graph().copy(), runner_->constants()));
  });
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
  // Empty for a module symbolic_trace did not make: its inputs are taken as they come.
  if (!input_contiguous_.empty()) {
    detail::contiguous_as_traced(
        tensors_in, input_contiguous_,
        [this](size_t i) {
          const std::vector<bool>& written = made_once(inputs_written_, [this] {
            return std::make_shared<const std::vector<bool>>(inputs_written(runner_->graph()));
          });
          return i < written.size() && written[i];
        },
        [this](size_t i) { return input_keys_[i].repr(); });
  }
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

TDGraphModule symbolic_trace(const std::shared_ptr<TensorDictModuleBase>& module,
                             const TensorDict& example, TraceOptions options) {
  if (!module) throw TraceError("symbolic_trace: the module is null");
  const auto [root, prefix] = detail::graph_root(module, options);
  detail::ContractRecording recorded =
      detail::record_with_contract(*module, example, prefix, options);
  detail::PipelineRecording& recording = recorded.recording;
  detail::LiveNodes live(recording, options);
  detail::StateUpdates updates(recording);
  if (recorded.divergence) {
    detail::refuse_divergence(recorded, live, updates, options, module->describe());
  }
  // The program is the recording's live nodes, pruned in place, which runs as it is; its
  // modules and names and the view are worked out from the same nodes when first asked for
  // (detail::TracedView).
  detail::FlatProgram program = detail::prune_program(recording, live);
  std::optional<BatchSpecialisation> specialisation = detail::specialisation_of(recorded);
  std::vector<int64_t> batches = std::move(recorded.recorded);
  // Each parameter and buffer by each of its paths, and each constant.
  GraphModule::Attributes attributes, constants;
  const std::vector<detail::StateTensor>& state = recording.table->state();
  attributes.reserve(state.size() + recording.constants.size());
  for (const detail::StateTensor& entry : state) attributes.emplace(entry.path, entry.tensor);
  for (const auto& [path, tensor] : recording.constants) {
    attributes.emplace(path, tensor);
    constants.emplace(path, tensor);
  }
  auto view = std::make_shared<detail::TracedView>(detail::TracedView::Source{
      std::move(recording), std::move(live), std::move(updates), options});
  return TDGraphModule(module, root, prefix, std::move(view), std::move(program.graph),
                       std::move(attributes), std::move(constants), std::move(program.input_keys),
                       std::move(program.input_contiguous), std::move(program.out_keys),
                       std::move(specialisation), std::move(batches));
}

}  // namespace tdfx
