#include "tdfx/tracer/recorder.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/tensordict/access_hook.h"
#include "tdfx/tracer/builtin_layers.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx::detail {
namespace {

namespace jit = torch::jit;
namespace tracer = torch::jit::tracer;

// Suspends tracing for the scope: makes the runtime alias of a key without recording it.
class PauseTracing {
 public:
  PauseTracing() : state_(tracer::getTracingState()) { tracer::setTracingState(nullptr); }
  ~PauseTracing() { tracer::setTracingState(state_); }

 private:
  std::shared_ptr<tracer::TracingState> state_;
};

/// True when `a` and `b` hold the same bytes in the same shape, dtype and device. Dense
/// contiguous CPU tensors (every parameter of a CPU module) compare with one memcmp: a trace
/// checks each of its module's tensors once, and the dispatcher's `equal` costs as much as
/// recording a Linear.
bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type() || a.device() != b.device()) {
    return false;
  }
  const bool flat = a.is_cpu() && a.layout() == at::kStrided && b.layout() == at::kStrided &&
                    a.is_contiguous() && b.is_contiguous() && !a.is_neg() && !a.is_conj() &&
                    !b.is_neg() && !b.is_conj();
  if (flat) {
    const size_t bytes = static_cast<size_t>(a.numel()) * a.element_size();
    return bytes == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), bytes) == 0;
  }
  return at::equal(a.contiguous().reshape({-1}).view(at::kByte),
                   b.contiguous().reshape({-1}).view(at::kByte));
}

}  // namespace

// The parameters and buffers of a module and the state of the default CPU generator, put
// back as they were when the scope ends, even by an exception: running a module to trace it
// may update them (BatchNorm's running statistics in training mode, Dropout's draws), and a
// recording leaves them as it found them, so that every recording of a trace starts from
// the same state and the trace leaves the module and the generator as they were. Only tensors
// that changed are written back, so that a caller's autograd graph that saved the others
// stays valid. Their version counter does not tell: batch_norm updates the running
// statistics without bumping it.
class StateSnapshot {
 public:
  explicit StateSnapshot(torch::nn::Module& module)
      : generator_(at::detail::getDefaultCPUGenerator()) {
    {
      std::lock_guard<std::mutex> lock(generator_.mutex());
      generator_state_ = generator_.get_state();
    }
    at::NoGradGuard no_grad;
    for (const auto& item : module.named_parameters(true)) save(item.value());
    for (const auto& item : module.named_buffers(true)) save(item.value());
  }
  ~StateSnapshot() {
    try {
      std::lock_guard<std::mutex> lock(generator_.mutex());
      generator_.set_state(generator_state_);
    } catch (const std::exception&) {
      // A destructor must not throw; the state was read from this generator, so it fits.
    }
    at::NoGradGuard no_grad;
    for (Saved& saved : saved_) {
      at::Tensor& tensor = saved.tensor;
      try {
        if (bit_equal(tensor, saved.copy)) continue;
        const bool same_layout = tensor.sizes() == saved.copy.sizes() &&
                                 tensor.scalar_type() == saved.copy.scalar_type() &&
                                 tensor.device() == saved.copy.device();
        if (same_layout) {
          tensor.copy_(saved.copy);
        } else {
          tensor.set_data(saved.copy);  // resized or retyped in place
        }
      } catch (const std::exception&) {
        // A destructor must not throw; a tensor that cannot be restored stays as the trace
        // left it (copying a same-shaped tensor does not fail in practice).
      }
    }
  }
  StateSnapshot(const StateSnapshot&) = delete;
  StateSnapshot& operator=(const StateSnapshot&) = delete;

 private:
  struct Saved {
    at::Tensor tensor;
    at::Tensor copy;
  };

  void save(const at::Tensor& tensor) {
    if (tensor.defined()) saved_.push_back({tensor, tensor.clone()});
  }

  std::vector<Saved> saved_;
  at::Generator generator_;
  at::Tensor generator_state_;
};

namespace {

// A traced tensor turned into a C++ value (`aten::item`, `aten::equal`) by the module's own
// code while it was traced.
struct ValueRead {
  std::string op;
  /// The built-in layer whose forward made the call, "" for user code.
  std::string layer;
  /// The op's tensor arguments.
  std::vector<at::Tensor> tensors;
  /// The last node recorded before the call.
  jit::Node* after = nullptr;
};

// Catches a module turning a traced tensor into a C++ value while it is traced. The JIT
// tracer records none of these ops (their results are not tensors), so a branch on the value,
// or the value used as a number, would become one fixed path or constant of the graph with
// nothing to show for it. They are seen through LibTorch's op observers instead. Only calls
// made by the module itself count: an op that reads values inside another op
// (repeat_interleave sizing its result) is recorded as that op and runs again with the graph.
class ValueReadWatch {
 public:
  explicit ValueReadWatch(const jit::Graph& graph) : graph_(graph), previous_(active_) {
    active_ = this;
    handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                             .needsInputs(true)
                                             .scopes({at::RecordScope::FUNCTION}));
  }
  ~ValueReadWatch() {
    at::removeCallback(handle_);
    active_ = previous_;
  }
  ValueReadWatch(const ValueReadWatch&) = delete;
  ValueReadWatch& operator=(const ValueReadWatch&) = delete;

  /// The reads, in order, taken out of the watch.
  std::vector<ValueRead> take_reads() { return std::move(reads_); }
  /// The first read by user code ("aten::item"), or "" when none did.
  std::string user_read() const {
    for (const ValueRead& read : reads_) {
      if (read.layer.empty()) return read.op;
    }
    return "";
  }

 private:
  static bool reads_value(std::string_view op) {
    // is_nonzero is what `if (tensor)` and bool conversions call; allclose and equal answer
    // with a bool; item and _local_scalar_dense give the number itself.
    return op == "aten::item" || op == "aten::_local_scalar_dense" || op == "aten::is_nonzero" ||
           op == "aten::equal" || op == "aten::allclose";
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    ValueReadWatch* watch = active_;
    if (watch && watch->depth_++ == 0 && reads_value(fn.name())) {
      ValueRead read;
      read.op = fn.name();
      read.layer = builtin_layer_on_stack();
      for (const c10::IValue& input : fn.inputs()) {
        if (input.isTensor()) read.tensors.push_back(input.toTensor());
      }
      read.after = watch->graph_.block()->return_node()->prev();
      watch->reads_.push_back(std::move(read));
    }
    return nullptr;
  }
  static void on_end(const at::RecordFunction&, at::ObserverContext*) {
    if (active_) --active_->depth_;
  }

  static thread_local ValueReadWatch* active_;
  const jit::Graph& graph_;
  ValueReadWatch* previous_;
  // Observers only run where RecordFunction is enabled; a caller may have disabled it.
  at::RecordFunctionGuard enabled_{true};
  at::CallbackHandle handle_ = 0;
  int depth_ = 0;
  std::vector<ValueRead> reads_;
};

thread_local ValueReadWatch* ValueReadWatch::active_ = nullptr;

// True for a recorded op that must stay even when nothing uses its results: it mutates a
// tensor, draws random numbers (dropping it would shift the random stream of the ops after
// it), or is a training-mode batch or instance norm, which updates its running statistics
// although its schema does not say so.
bool has_effect(const jit::Node* node) {
  if (node->hasSideEffects() || node->isNondeterministic()) return true;
  const c10::FunctionSchema* schema = node->maybeSchema();
  // An op with no results (`_assert_async`, a guard) is called for its effect.
  if (schema && (schema->is_mutable() || schema->returns().empty())) return true;
  const c10::Symbol kind = node->kind();
  const bool norm = kind == c10::aten::batch_norm || kind == c10::aten::instance_norm ||
                    kind == c10::aten::native_batch_norm ||
                    kind == c10::aten::_batch_norm_impl_index;
  if (!norm || node->inputs().size() < 6) return false;
  const bool has_running_stats = !node->input(3)->type()->cast<c10::NoneType>();
  const auto training = jit::constant_as<bool>(node->input(5));
  return has_running_stats && (!training || *training);
}

[[noreturn]] void fail_value_read(const TensorDictModule& module, const std::string& path,
                                  const std::string& op) {
  fail<TraceError>(
      "{}{}: {} turns a traced tensor into a C++ value; symbolically traced variables cannot be "
      "used as inputs to control flow, and the graph would keep only what this trace saw. "
      "Compute it with tensor ops instead (at::where for a branch)",
      module.describe(), path.empty() ? "" : fmt::format(" at '{}'", path), op);
}

// A traced tensor turned into a C++ value by a built-in layer's forward. LibTorch's attention
// compares query, key and value with `equal` to choose its fused self-attention path: the
// recording holds the path taken, and a guard node follows that checks on every run that the
// comparison comes out as it did here (`eq`, `all`, `logical_not` when it was false,
// `_assert_async`), so that another path is never silently replaced by this one. Tensors that
// are one traced value, or differ in shape, need no guard. Other reads are refused.
void guard_layer_read(const ValueRead& read, const TensorDictModule& module,
                      const std::string& inner_path, jit::Graph& graph) {
  const std::string where = layer_path(module, inner_path, read.layer);
  auto* state = tracer::getTracingState().get();
  if (read.op != "aten::equal" || read.tensors.size() != 2) {
    const std::string advice =
        read.layer == "AdaptiveLogSoftmaxWithLoss"
            ? "Trace a module that calls its log_prob(input) instead (and computes the loss "
              "from it with at::nll_loss)"
            : "Call its ops in a module of your own instead";
    fail<TraceError>(
        "{}: LibTorch's {} turns a traced tensor into a C++ value ({}) in its forward; tdfx "
        "guards only the query/key/value comparisons of attention. {}",
        module.describe(), where, read.op, advice);
  }
  const at::Tensor& a = read.tensors[0];
  const at::Tensor& b = read.tensors[1];
  if (!state->hasValue(a) || !state->hasValue(b)) {
    fail<TraceError>("{}: {} compares a tensor that the trace does not follow (aten::equal)",
                     module.describe(), where);
  }
  jit::Value* va = tracer::getValueTrace(a);
  jit::Value* vb = tracer::getValueTrace(b);
  if (va == vb || a.sizes() != b.sizes()) return;
  at::Tensor same, all, differ;
  {
    PauseTracing pause;
    same = at::eq(a, b);
    all = same.all();
    differ = all.logical_not();
  }
  const bool equal_now = all.item<bool>();
  jit::WithInsertPoint point(read.after->next());
  jit::Value* eq = graph.insert(c10::aten::eq, {va, vb});
  eq->inferTypeFrom(same);
  jit::Value* cond = graph.insert(c10::aten::all, {eq});
  cond->inferTypeFrom(all);
  if (!equal_now) {
    cond = graph.insert(c10::aten::logical_not, {cond});
    cond->inferTypeFrom(differ);
  }
  graph.insert(c10::Symbol::fromQualString("aten::_assert_async"), {cond});
}

// Called inside a catch block: rethrows the wrapped module's failure as a tdfx::Error, naming
// the built-in layer it failed in when LibTorch's backtrace shows one.
[[noreturn]] void rethrow_module_failure(const TensorDictModule& module,
                                         const std::string& inner_path) {
  try {
    throw;
  } catch (const InternalError&) {
    throw;  // a bug in tdfx: never dressed as the user's error
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    const std::string layer = failed_layer(e);
    if (!layer.empty()) {
      fail<TraceError>("{}: the wrapped module failed while tracing, in {}: {}", module.describe(),
                       layer_path(module, inner_path, layer), library_message(e));
    }
    fail<TraceError>("{}: the wrapped module failed while tracing: {}", module.describe(),
                     library_message(e));
  } catch (const std::exception& e) {
    // LibTorch's message without its backtrace or the values of a tensor it names.
    fail<TraceError>("{}: the wrapped module failed while tracing: {}", module.describe(),
                     library_message(e));
  }
}

// Runs a module's own forward on a copy of the example under LibTorch's tracer, as the hook
// of every TensorDict read and TensorDictModule call: the first read of an example key
// becomes a `tdfx::read` node, and the ops between a call's start and end are its nodes. What
// a read returns, what a module writes and which keys a sequential passes on are the
// TensorDict's and the modules' own doing, as in eager mode.
class Recorder : public KeyAccessHook {
 public:
  Recorder(const TensorDict& example, std::string strip_prefix, const TraceOptions& options)
      : td_(example), strip_(std::move(strip_prefix)), options_(options) {}

  Recording run(TensorDictModuleBase& module) {
    plan(module);
    auto state = std::make_shared<tracer::TracingState>();
    recording_.graph = state->graph;
    tracer::setTracingState(state);
    try {
      register_parameters(module);
      TensorDict work(td_);  // the module writes here, not into the example
      {
        ScopedKeyAccessHook hook(this);
        module.forward(work);
      }
      for (const NestedKey& key : module.selected_out_keys()) {
        const at::Tensor value = work.contains(key) ? work.get(key) : at::Tensor();
        if (!value.defined() || !state->hasValue(value)) {
          fail<TraceError>("{}: out key {} was never written", module.describe(), key.repr());
        }
        recording_.outputs.emplace_back(key, tracer::getValueTrace(value));
      }
    } catch (...) {
      tracer::abandon();
      tracer::setTracingState(nullptr);
      throw;
    }
    tracer::setTracingState(nullptr);
    prune_dead_nodes();
    return std::move(recording_);
  }

  // The traced value of an example key: a `tdfx::read` node at the point of its first read. A
  // key written during the trace holds a traced value already.
  at::Tensor on_read(const TensorDict& /*td*/, const NestedKey& key,
                     const at::Tensor& stored) override {
    if (tracer::getTracingState()->hasValue(stored)) return stored;
    auto it = reads_.find(key);
    if (it != reads_.end()) return it->second;
    at::Tensor copy;
    {
      PauseTracing pause;
      // A copy: the module may write into its input (an in-place op), and the example
      // TensorDict must come out of the trace as it went in.
      copy = stored.clone();
    }
    auto& graph = *recording_.graph;
    jit::Node* node = graph.create(c10::Symbol::fromQualString("tdfx::read"), {}, 1);
    graph.insertNode(node);
    node->output()->inferTypeFrom(copy);
    tracer::setValueTrace(copy, node->output());
    // Keys are read just before the call that reads them.
    recording_.reads[node] = KeyRead{key, recording_.calls.size()};
    reads_.emplace(key, copy);
    return copy;
  }

  // The recording is one jit node list, so a child's start is the last node before it; a
  // later start at the same node (a child that recorded nothing) wins.
  void on_sequential_child(size_t index, const torch::nn::Module& child) override {
    recording_.children.push_back(
        {join_path(calling_path_, std::to_string(index)), describe_module(child)});
    child_starts_.emplace_back(last_node(), recording_.children.size() - 1);
  }

  void on_write(const TensorDict& /*td*/, const NestedKey& /*key*/,
                const at::Tensor& /*value*/) override {}

  std::vector<at::Tensor> on_call(const TensorDictModule& module,
                                  const std::vector<at::Tensor>& inputs,
                                  const std::function<std::vector<at::Tensor>()>& run) override {
    auto planned = planned_.find(&module);
    if (planned == planned_.end() || planned->second.empty()) {
      fail<TraceError>("{}: called outside the traced pipeline's structure", module.describe());
    }
    ModuleCall record = std::move(planned->second.front());
    planned->second.pop_front();
    calling_path_ = record.inner_path;
    for (const auto& t : inputs) record.inputs.push_back(tracer::getValueTrace(t));
    const size_t index = recording_.calls.size();
    jit::Node* before = last_node();
    std::vector<at::Tensor> outputs;
    std::vector<ValueRead> reads;
    {
      ValueReadWatch watch(*recording_.graph);
      try {
        outputs = run();
      } catch (...) {
        // A module that failed after reading a value most likely failed because of it (a
        // branch taken for other tensors), so that is what it is told.
        const std::string read = watch.user_read();
        if (!read.empty()) fail_value_read(module, record.td_path, read);
        rethrow_module_failure(module, record.inner_path);
      }
      const std::string read = watch.user_read();
      if (!read.empty()) fail_value_read(module, record.td_path, read);
      reads = watch.take_reads();
    }
    // After the watch: making a guard reads values itself.
    for (const ValueRead& layer_read : reads) {
      guard_layer_read(layer_read, module, record.inner_path, *recording_.graph);
    }
    // Each child of a wrapped Sequential owns the nodes recorded after its start.
    std::unordered_map<const jit::Node*, size_t> child_after;
    for (const auto& [after, child] : child_starts_) child_after[after] = child;
    child_starts_.clear();
    std::optional<size_t> child;
    auto starts_after = [&](const jit::Node* node) {
      auto start = child_after.find(node);
      if (start != child_after.end()) child = start->second;
    };
    starts_after(before);
    for (jit::Node* node = before->next(); node != end_node(); node = node->next()) {
      record.nodes.push_back(node);
      recording_.node_call[node] = index;
      if (child) recording_.node_child[node] = *child;
      starts_after(node);
    }
    for (const at::Tensor& output : outputs) {
      record.outputs.push_back(tracer::getValueTrace(output));
    }
    recording_.calls.push_back(std::move(record));
    return outputs;
  }

 private:
  void register_parameters(TensorDictModuleBase& module) {
    auto& graph = *recording_.graph;
    std::unordered_map<const c10::TensorImpl*, jit::Value*> seen;
    auto add = [&](const std::string& name, const at::Tensor& tensor) {
      const std::string path = strip_path_prefix(name, strip_);
      jit::Value*& value = seen[tensor.unsafeGetTensorImpl()];
      if (!value) {
        value = graph.addInput(path);
        value->inferTypeFrom(tensor);
        tracer::setValueTrace(tensor, value);
        recording_.parameters[value] = path;
      }
      recording_.parameter_paths[value].push_back(path);
    };
    for (const auto& item : module.named_parameters(true)) add(item.key(), item.value());
    for (const auto& item : module.named_buffers(true)) add(item.key(), item.value());
  }

  // Where each TensorDictModule call of `module`'s forward sits, in call order: its path from
  // the traced module ("" for it) and its enclosing sequentials. A TensorDictSequential calls
  // its children in order, so the k-th call of a module is its k-th place here.
  void plan(const TensorDictModuleBase& module) {
    walk_pipeline(module, strip_, [&](const TensorDictModuleBase& m, const PipelinePlace& place) {
      if (place.level >= 0) {  // a sequential: one more level of names
        recording_.level_count = std::max(recording_.level_count, place.level + 1);
        return;
      }
      const TensorDictModule* td_module = &traced_td_module(m);
      refuse_untraceable_layers(*td_module->inner_ptr(), td_module->describe(), place.inner_path);
      ModuleCall call;
      call.module = td_module;
      call.td_path = place.path;
      call.inner_path = place.inner_path;
      call.module_type = describe_module(*td_module->inner_ptr());
      call.levels = place.levels;
      planned_[td_module].push_back(std::move(call));
    });
  }

  // True when the graph builder shows the whole call as one call_module node, which then has
  // all of the call's outputs.
  bool outlined_whole(const ModuleCall& call) const {
    if (!options_.outline_leaves) return false;
    return is_leaf(options_, *call.module->inner_ptr(), call.inner_path);
  }

  // Removes the recorded nodes no output needs, so that no node without users reaches a
  // graph: `x.sum()` computed and dropped, or a key written and overwritten before any read.
  // Key reads stay: they are the graph's inputs. Ops with an effect stay (has_effect).
  void prune_dead_nodes() {
    std::unordered_set<const jit::Value*> needed;
    for (const auto& [key, value] : recording_.outputs) needed.insert(value);
    std::vector<jit::Node*> dead;  // in reverse graph order: users before what they use
    for (auto call = recording_.calls.rbegin(); call != recording_.calls.rend(); ++call) {
      bool outputs_needed = false;
      for (const jit::Value* value : call->outputs) outputs_needed |= needed.count(value) > 0;
      if (outputs_needed && outlined_whole(*call)) {
        needed.insert(call->outputs.begin(), call->outputs.end());
      }
      std::vector<jit::Node*> kept;
      for (auto it = call->nodes.rbegin(); it != call->nodes.rend(); ++it) {
        jit::Node* node = *it;
        bool live = false;
        for (const jit::Value* value : node->outputs()) live |= needed.count(value) > 0;
        live = live || has_effect(node);  // the schema lookups last: most nodes are needed
        if (live) {
          needed.insert(node->inputs().begin(), node->inputs().end());
          kept.push_back(node);
        } else {
          dead.push_back(node);
        }
      }
      call->nodes.assign(kept.rbegin(), kept.rend());
    }
    std::unordered_set<const jit::Value*> destroyed;
    for (jit::Node* node : dead) {
      destroyed.insert(node->outputs().begin(), node->outputs().end());
      recording_.node_call.erase(node);
      node->destroy();
    }
    // A whole call may be gone: its values must not dangle for the graph builder.
    auto gone = [&](const jit::Value* value) { return destroyed.count(value) > 0; };
    for (ModuleCall& call : recording_.calls) {
      call.inputs.erase(std::remove_if(call.inputs.begin(), call.inputs.end(), gone),
                        call.inputs.end());
      call.outputs.erase(std::remove_if(call.outputs.begin(), call.outputs.end(), gone),
                         call.outputs.end());
    }
  }

  jit::Node* last_node() const { return recording_.graph->block()->return_node()->prev(); }
  jit::Node* end_node() const { return recording_.graph->block()->return_node(); }

  const TensorDict& td_;
  std::string strip_;
  const TraceOptions& options_;
  Recording recording_;
  /// The traced copy of each example key read.
  std::map<NestedKey, at::Tensor> reads_;
  /// The wrapped module's path of the call running, and where the children of its Sequential
  /// started, in order (an index into Recording::children).
  std::string calling_path_;
  std::vector<std::pair<const jit::Node*, size_t>> child_starts_;
  std::unordered_map<const TensorDictModule*, std::deque<ModuleCall>> planned_;
};

}  // namespace

Recording record(TensorDictModuleBase& module, const TensorDict& example,
                 const std::string& strip_prefix, const TraceOptions& options) {
  if (tracer::isTracing()) {
    fail<TraceError>("{}: a trace is already active on this thread", module.describe());
  }
  StateSnapshot snapshot(module);
  return Recorder(example, strip_prefix, options).run(module);
}

}  // namespace tdfx::detail
