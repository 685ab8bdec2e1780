#include "tdfx/tracer/dispatch_recorder.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/grad_mode.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/all.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/logical_not.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/intrusive_ptr.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <deque>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/effects.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/schema_arguments.h"

namespace tdfx::detail {
namespace {

// ---- The dispatch key ------------------------------------------------------------------------
//
// The recorder needs a functionality key above autograd that a thread can switch on for
// itself (thread-local "included" keys), so that it sees each op the code calls before
// autograd and the backends run it, once, with its arguments boxed. LibTorch 1.13 has no key
// made for a C++ recorder (c10/core/DispatchKey.h): the mode keys above autograd belong to
// torch_python (Python, PythonTLSSnapshot, PythonDispatcher), to functorch
// (FuncTorchDynamicLayerFrontMode) or are for tests (TESTING_ONLY_GenericWrapper, a tensor
// type, and TESTING_ONLY_GenericMode, a mode). TESTING_ONLY_GenericMode is the one a C++
// program may use without those libraries: it is a mode, switched on per thread, and nothing
// in LibTorch registers a kernel on it. Its comment reserves it for tests; tdfx uses it
// because there is no other, registers its fallback only when a recording starts, and refuses
// to record (TraceError) when another library in the process holds it.
constexpr c10::DispatchKey kRecorderKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

thread_local DispatchRecorder* active_recorder = nullptr;

// The ops recorded as the ops they call rather than as themselves: the convolutions and the
// recurrent cells, as LibTorch's JIT tracer records them (its generated tracing kernels leave
// these out and record what they call: `_convolution`, `linear` + `tanh`), so that a
// recording holds the operators the rest of tdfx — the load allowlist, TorchScript, ONNX —
// knows, and programs exported before this recorder replaced the JIT tracer stay as they were.
bool records_inside(const c10::OperatorHandle& op) {
  static const std::unordered_set<std::string> kInside = {
      "aten::convolution",      "aten::conv1d",           "aten::conv2d",
      "aten::conv3d",           "aten::conv_tbc",         "aten::conv_transpose1d",
      "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::lstm_cell",
      "aten::gru_cell",         "aten::rnn_tanh_cell",    "aten::rnn_relu_cell"};
  return kInside.count(op.operator_name().name) > 0;
}

void recorder_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                       std::vector<c10::IValue>* stack) {
  auto run = [&] {
    c10::impl::ExcludeDispatchKeyGuard below(kRecorderKey);
    op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kRecorderKey),
                       stack);
  };
  DispatchRecorder* recorder = active_recorder;
  if (recorder == nullptr) {
    run();
    return;
  }
  if (records_inside(op)) {
    // The ops it calls come back here, recorded.
    recorder->record_composite(op, *stack, [&] {
      op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kRecorderKey),
                         stack);
    });
    return;
  }
  recorder->record_op(op, *stack, run);
}

// Registers the fallback once per process; "" when it is ours, else why not.
const std::string& register_fallback() {
  static const std::string problem = []() -> std::string {
    auto& dispatcher = c10::Dispatcher::singleton();
    if (dispatcher.hasBackendFallbackForDispatchKey(kRecorderKey)) {
      return "another library in this process registered a fallback on the dispatch key "
             "TESTING_ONLY_GenericMode, which tdfx's recorder needs (dispatch_recorder.cpp says "
             "why); tdfx cannot record in this process";
    }
    // Kept until the process exits, after every recording; the dispatcher, made before it,
    // outlives it.
    static const c10::RegistrationHandleRAII handle = dispatcher.registerFallback(
        kRecorderKey, c10::KernelFunction::makeFromBoxedFunction<&recorder_fallback>(),
        "tdfx's recorder (tracer/dispatch_recorder.cpp)");
    return "";
  }();
  return problem;
}

// Ops whose answer is a C++ value read from a tensor: a branch on it, or a number, would be
// one fixed path or constant of the graph.
bool reads_value(const c10::FunctionSchema& schema) {
  for (const c10::Argument& ret : schema.returns()) {
    const c10::TypeKind kind = ret.type()->kind();
    if (kind == c10::TypeKind::TensorType || kind == c10::TypeKind::ListType ||
        kind == c10::TypeKind::OptionalType) {
      return false;
    }
  }
  return !schema.returns().empty();
}

// True for a batch or instance norm, whose kernels update the running statistics (arguments 3
// and 4) although the schema does not say so.
bool updates_running_stats(const c10::FunctionSchema& schema) {
  constexpr std::string_view kAten = "aten::";
  const std::string_view name = schema.name();
  return name.substr(0, kAten.size()) == kAten &&
         tdfx::updates_running_stats(name.substr(kAten.size()));
}

// True when the op writes its argument `i`: an in-place or out= argument (`Tensor(a!)`), or
// a norm's running statistics. `norm` is updates_running_stats(schema), asked once per op.
bool writes(const c10::FunctionSchema& schema, size_t i, bool norm) {
  const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
  if (alias && alias->isWrite()) return true;
  return norm && (i == 3 || i == 4);
}

std::string shape_of(const at::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

}  // namespace

// What the recorder asks of an operator, worked out at its first call: its target, and
// whether its kernel may write its running statistics (updates_running_stats).
struct DispatchRecorder::OpInfo {
  Target target;
  bool norm = false;
};

// A tensor the recording follows: the node whose value it is, and a weak reference that keeps
// its address from being reused by another tensor while the recording lasts (a freed
// TensorImpl's memory stays until its weak references go).
struct DispatchRecorder::Followed {
  explicit Followed(const at::Tensor& tensor)
      : weak(c10::weak_intrusive_ptr<c10::TensorImpl>(tensor.getIntrusivePtr())) {}
  c10::weak_intrusive_ptr<c10::TensorImpl> weak;
  Node* node = nullptr;
  /// For a parameter or buffer: its path, read by a get_attr node made at its first use.
  std::string path;
  /// For a parameter or buffer: its index in the state list (bind_state).
  size_t index = kNoState;
  /// For a parameter or buffer: saved before its first write.
  bool state = false;
  bool saved = false;
  /// For a captured tensor lifted as a constant (on_captured): read at `path`, never written.
  bool constant = false;
};

// The tensors a recording follows, by their TensorImpl's address: an open-addressing table of
// (address, entry index) over a deque of entries. A lookup probes one flat array instead of
// chasing a hash node per tensor (a recording looks up every tensor argument of every op), and
// the entries keep their addresses (nothing is removed while a recording lasts).
class DispatchRecorder::FollowedTable {
 public:
  Followed* find(const c10::TensorImpl* key) {
    if (slots_.empty()) return nullptr;
    const Slot& slot = slots_[slot_of(key)];
    return slot.key ? &entries_[slot.index] : nullptr;
  }
  // The entry of `tensor`, made (following it) when there is none.
  Followed& get_or_add(const at::Tensor& tensor) {
    const c10::TensorImpl* key = tensor.unsafeGetTensorImpl();
    if ((entries_.size() + 1) * 2 > slots_.size()) grow();
    Slot& slot = slots_[slot_of(key)];
    if (slot.key) return entries_[slot.index];
    entries_.emplace_back(tensor);
    slot = {key, entries_.size() - 1};
    return entries_.back();
  }
  // A followed tensor (a parameter, a buffer or a recorded value) whose storage `tensor`
  // shares, or nullptr: a tensor made from it without dispatching (`weight.data()`,
  // `x.data()`). Parameters and buffers are looked for first. Walks every entry: only for a
  // tensor the recording meets for the first time without following it.
  const Followed* sharing_storage(const at::Tensor& tensor) const {
    if (!tensor.has_storage()) return nullptr;
    const Followed* value = nullptr;
    for (const Followed& entry : entries_) {
      if (!entry.state && (value || !entry.node)) continue;
      const c10::intrusive_ptr<c10::TensorImpl> followed = entry.weak.lock();
      if (!followed || !followed->has_storage() ||
          !followed->storage().is_alias_of(tensor.storage())) {
        continue;
      }
      if (entry.state) return &entry;
      value = &entry;
    }
    return value;
  }

 private:
  struct Slot {
    const c10::TensorImpl* key = nullptr;
    size_t index = 0;
  };
  // The slot holding `key`, or the empty slot where it would go.
  size_t slot_of(const c10::TensorImpl* key) const {
    const size_t mask = slots_.size() - 1;
    // Addresses are 16-byte aligned: mix the bits above before masking.
    size_t i = (reinterpret_cast<uintptr_t>(key) >> 4) * 0x9E3779B97F4A7C15ull >> 20 & mask;
    while (slots_[i].key && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    for (const Slot& slot : old) {
      if (slot.key) slots_[slot_of(slot.key)] = slot;
    }
  }

  std::vector<Slot> slots_;
  std::deque<Followed> entries_;
};

DispatchRecorder::DispatchRecorder(Graph& graph)
    : graph_(graph),
      followed_(std::make_unique<FollowedTable>()),
      ops_(std::make_unique<std::unordered_map<const void*, OpInfo>>()) {}

DispatchRecorder::~DispatchRecorder() = default;

void DispatchRecorder::record(const std::function<void()>& fn) {
  const std::string& problem = register_fallback();
  if (!problem.empty()) fail<TraceError>("{}", problem);
  if (active_recorder != nullptr) {
    fail<TraceError>(
        "a trace was started while another trace records on this thread (code being traced "
        "called symbolic_trace or export_program): the outer trace would not see the ops the "
        "inner one records. Trace each pipeline on its own, outside the other's forward");
  }
  active_recorder = this;
  struct Restore {
    ~Restore() { active_recorder = nullptr; }
  } restore;
  c10::impl::IncludeDispatchKeyGuard mode(kRecorderKey);
  grad_mode_ = c10::GradMode::is_enabled();
  fn();
}

void DispatchRecorder::unrecorded(const std::function<void()>& fn) {
  c10::impl::ExcludeDispatchKeyGuard not_recorded(kRecorderKey);
  fn();
}

void DispatchRecorder::bind(const at::Tensor& tensor, Node* node) {
  if (!tensor.defined()) throw InternalError("DispatchRecorder::bind: an undefined tensor");
  bind_result(tensor, node);
}

void DispatchRecorder::bind_result(const at::Tensor& tensor, Node* node) {
  followed_->get_or_add(tensor).node = node;
}

size_t DispatchRecorder::bind_state(const at::Tensor& tensor, std::string path, size_t index) {
  if (!tensor.defined()) throw InternalError("DispatchRecorder::bind_state: an undefined tensor");
  Followed& entry = followed_->get_or_add(tensor);
  if (entry.state) return entry.index;  // shared by two modules: read at its first path
  entry.state = true;
  entry.path = std::move(path);
  entry.index = index;
  return index;
}

void DispatchRecorder::save_before_write(const at::Tensor& tensor) {
  Followed* entry = followed_->find(tensor.unsafeGetTensorImpl());
  if (entry && entry->constant) {
    // A constant is part of the program: a run would update it as a buffer is, which the
    // module's own state would not show.
    fail<TraceError>(
        "{}: the module writes in place to a tensor it captured ({} {}, lifted as the constant "
        "'{}'); register it as a buffer so the graph can update it as module state",
        subject ? subject() : "the recording", dtype_name(tensor.scalar_type()), shape_of(tensor),
        entry->path);
  }
  if (!entry || !entry->state || entry->saved) return;
  entry->saved = true;
  saved_.emplace_back(tensor, tensor.detach().clone());
}

void DispatchRecorder::restore_state() {
  c10::impl::ExcludeDispatchKeyGuard not_recorded(kRecorderKey);
  at::NoGradGuard no_grad;
  for (auto& [tensor, copy] : saved_) tensor.detach().copy_(copy);
  saved_.clear();
}

void DispatchRecorder::record_guard(const at::Tensor& a, const at::Tensor& b, bool equal_now) {
  c10::impl::ExcludeDispatchKeyGuard not_recorded(kRecorderKey);
  Node* na = node_of(a);
  Node* nb = node_of(b);
  if (!na || !nb) throw InternalError("record_guard: a tensor the recording does not follow");
  auto add = [&](const char* op, Args args, const at::Tensor& value) {
    const Target target = Target::aten(op);
    const std::string name = fx_name(target, args, {});
    Node* node = graph_.create_node(OpCode::kCallFunction, target, std::move(args), {}, name);
    if (value.defined()) {
      node->meta().tensor.dtype = value.scalar_type();
      node->meta().tensor.shape = value.sizes().vec();
      node->meta().tensor.device = value.device();
    }
    return created(node);
  };
  const at::Tensor same = at::eq(a, b);
  const at::Tensor all = same.all();
  Node* cond = add("aten::all", {add("aten::eq.Tensor", {na, nb}, same)}, all);
  if (!equal_now) cond = add("aten::logical_not", {cond}, all.logical_not());
  add("aten::_assert_async", {cond}, at::Tensor());
}

std::string DispatchRecorder::numbered(const std::string& base) {
  // The name the graph's namespace would give the n-th node named from `base` (`addmm`,
  // `addmm_1`, …), so that it takes it as it is: a long chain of one op would otherwise make
  // it count up from the bare base for every node. Where another node holds that name, the
  // namespace counts on from it, as it would have.
  int64_t& uses = name_uses_[base];
  return uses++ == 0 ? base : base + "_" + std::to_string(uses - 1);
}

Node* DispatchRecorder::created(Node* node) {
  if (!first_) first_ = node;
  last_ = node;
  if (on_node) on_node(node);
  return node;
}

Node* DispatchRecorder::node_of(const at::Tensor& tensor) const {
  if (!tensor.defined()) return nullptr;
  Followed* entry = followed_->find(tensor.unsafeGetTensorImpl());
  return entry ? entry->node : nullptr;
}

const DispatchRecorder::OpInfo& DispatchRecorder::op_info(const c10::OperatorHandle& op) {
  // The schema lives in the dispatcher's entry for the op: one address per operator.
  const void* key = &op.schema();
  auto it = ops_->find(key);
  if (it != ops_->end()) return it->second;
  const c10::OperatorName& name = op.operator_name();
  const std::string qualified =
      name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  return ops_->emplace(key, OpInfo{Target::aten(qualified), updates_running_stats(op.schema())})
      .first->second;
}

Argument DispatchRecorder::argument(const c10::IValue& value, const c10::Argument& formal,
                                    const c10::OperatorHandle& op) {
  auto tensor_argument = [&](const at::Tensor& t) -> Argument {
    if (!t.defined()) return None{};
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A C++ number the caller wrapped as a 0-dim tensor (`x * 2` inside LibTorch's code).
      if (t.is_floating_point()) return t.item<double>();
      if (t.scalar_type() == at::kBool) return t.item<bool>();
      return t.item<int64_t>();
    }
    Followed* entry = followed_->find(t.unsafeGetTensorImpl());
    if (!entry || (!entry->node && !entry->state)) {
      if (const Followed* shared = followed_->sharing_storage(t)) {
        const std::string who = subject ? subject() : op.operator_name().name;
        if (shared->state) {
          fail<TraceError>(
              "{}: the module uses a tensor the trace does not follow ({} {}) that shares the "
              "storage of '{}': its .data(), or a tensor made from it without an op the "
              "dispatcher sees, which the graph cannot tell from a copy. Use '{}' itself (or "
              "its detach()), and update parameters in place (weight clipping) outside the "
              "traced forward",
              who, dtype_name(t.scalar_type()), shape_of(t), shared->path, shared->path);
        }
        fail<TraceError>(
            "{}: the module uses a tensor the trace does not follow ({} {}) that shares the "
            "storage of a value it computed or read (%{}): its .data(), or a tensor made from "
            "it without an op the dispatcher sees, which the graph cannot tell from a constant. "
            "Use the value itself (or its detach())",
            who, dtype_name(t.scalar_type()), shape_of(t), shared->node->name());
      }
      if (on_captured) {
        // Lifted as a constant: one get_attr, made at its first use, for every read of it.
        std::string path = on_captured(t);
        entry = &followed_->get_or_add(t);
        entry->state = true;
        entry->constant = true;
        entry->path = std::move(path);
      } else {
        fail<TraceError>(
            "{}: argument '{}' is a tensor the trace does not follow ({} {}, not an input, a "
            "parameter or a buffer, nor computed from them: a tensor a lambda captured, say)",
            subject ? subject() : op.operator_name().name, formal.name(),
            dtype_name(t.scalar_type()), shape_of(t));
      }
    }
    if (!entry->node) {
      // Named from its path as it is (`_0_module_fc_weight`): the program pass names it again.
      Node* read = graph_.create_node(OpCode::kGetAttr, Target(entry->path), {}, {}, entry->path);
      TensorMeta& meta = read->meta().tensor;
      meta.dtype = t.scalar_type();
      meta.shape = t.sizes().vec();
      meta.device = t.device();
      if (entry->index != kNoState) state_reads_.set(read, entry->index);
      entry->node = created(read);
    }
    return entry->node;
  };
  if (value.isTensor()) return tensor_argument(value.toTensor());
  if (auto constant = constant_argument(value, formal.real_type())) return *constant;
  if (value.isTensorList()) {
    std::vector<Argument> items;
    for (const at::Tensor& t : value.toTensorVector()) items.push_back(tensor_argument(t));
    return list(std::move(items));
  }
  if (value.isList()) {  // Tensor?[] (index, index_put)
    std::vector<Argument> items;
    for (const c10::IValue& item : value.toListRef()) {
      if (item.isNone()) {
        items.emplace_back(None{});
      } else if (item.isTensor()) {
        items.push_back(tensor_argument(item.toTensor()));
      } else {
        break;
      }
    }
    if (items.size() == value.toListRef().size()) return list(std::move(items));
  }
  fail<TraceError>("{}{}: cannot record argument '{}' of kind {}", subject ? subject() + ": " : "",
                   op.operator_name().name, formal.name(), value.tagKind());
}

void DispatchRecorder::record_op(const c10::OperatorHandle& op, std::vector<c10::IValue>& stack,
                                 const std::function<void()>& run) {
  // What the recorder itself calls (a wrapped number's item()) is not the code's.
  c10::impl::ExcludeDispatchKeyGuard not_recorded(kRecorderKey);
  const c10::FunctionSchema& schema = op.schema();
  const size_t arity = schema.arguments().size();
  if (stack.size() < arity) throw InternalError("the recorder's fallback got a short stack");
  const size_t first = stack.size() - arity;
  if (c10::GradMode::is_enabled() != grad_mode_ && grad_mode_changed_at_.empty()) {
    grad_mode_changed_at_ = op.operator_name().name;
  }

  if (reads_value(schema)) {
    // Its result is a C++ value: not a node. Noted when it reads a followed tensor.
    ValueReadCall read;
    read.op = op.operator_name().name;
    read.after = last_;
    std::vector<at::Tensor> tensors;
    for (size_t i = first; i < stack.size(); ++i) {
      if (!stack[i].isTensor()) continue;
      tensors.push_back(stack[i].toTensor());
      if (Node* node = node_of(stack[i].toTensor())) read.inputs.push_back(node);
    }
    run();
    if (read.inputs.empty()) return;
    if (on_value_read) on_value_read(read, tensors);
    value_reads_.push_back(std::move(read));
    return;
  }

  const OpInfo& info = op_info(op);
  const bool norm = info.norm;
  Args args;
  args.reserve(arity);
  for (size_t i = 0; i < arity; ++i) {
    const c10::IValue& value = stack[first + i];
    args.push_back(argument(value, schema.arguments()[i], op));
    if (value.isTensor() && writes(schema, i, norm)) save_before_write(value.toTensor());
  }
  run();
  ++op_count_;
  const Target& target = info.target;
  const std::string name = numbered(fx_name(target, args, {}));
  Node* node = graph_.create_node(OpCode::kCallFunction, target, std::move(args), {}, name);
  const size_t returns = schema.returns().size();
  if (stack.size() < returns) throw InternalError("the recorder's fallback lost its results");
  const size_t results = stack.size() - returns;
  auto set_meta = [](Node* n, const at::Tensor& t) {
    TensorMeta& meta = n->meta().tensor;
    meta.dtype = t.scalar_type();
    meta.shape = t.sizes().vec();
    meta.device = t.device();
  };
  auto item = [&](Node* source, int64_t index, const at::Tensor& t) {
    Node* got = graph_.create_node(OpCode::kCallFunction, Target::getitem(), {source, index});
    if (t.defined()) {
      set_meta(got, t);
      bind_result(t, got);
    }
    created(got);
  };
  if (returns == 1 && stack[results].isTensor()) {
    const at::Tensor& t = stack[results].toTensor();
    if (t.defined()) {
      set_meta(node, t);
      bind_result(t, node);
    }
    created(node);
    return;
  }
  created(node);
  if (returns == 1 && stack[results].isTensorList()) {
    const std::vector<at::Tensor> items = stack[results].toTensorVector();
    for (size_t j = 0; j < items.size(); ++j) item(node, static_cast<int64_t>(j), items[j]);
    return;
  }
  for (size_t i = 0; i < returns; ++i) {
    const c10::IValue& value = stack[results + i];
    if (value.isTensor()) item(node, static_cast<int64_t>(i), value.toTensor());
  }
}

void DispatchRecorder::record_composite(const c10::OperatorHandle& op,
                                        std::vector<c10::IValue>& stack,
                                        const std::function<void()>& run) {
  if (composite_running_ != kNoComposite) {  // inside another: the outer one is the call
    run();
    return;
  }
  const c10::FunctionSchema& schema = op.schema();
  const size_t arity = schema.arguments().size();
  if (stack.size() < arity) throw InternalError("the recorder's fallback got a short stack");
  CompositeCall call;
  call.op = op.operator_name().name;
  for (size_t i = stack.size() - arity; i < stack.size(); ++i) {
    if (stack[i].isTensor()) {
      call.inputs.push_back(node_of(stack[i].toTensor()));
    } else if (stack[i].isTensorList()) {
      for (const at::Tensor& t : stack[i].toTensorVector()) call.inputs.push_back(node_of(t));
    }
  }
  const size_t index = composites_.size();
  composites_.push_back(std::move(call));
  struct Running {
    size_t& running;
    ~Running() { running = kNoComposite; }
  } running{composite_running_};
  composite_running_ = index;
  run();
  const size_t returns = schema.returns().size();
  if (stack.size() < returns) throw InternalError("the recorder's fallback lost its results");
  for (size_t i = stack.size() - returns; i < stack.size(); ++i) {
    if (stack[i].isTensor()) composites_[index].results.push_back(node_of(stack[i].toTensor()));
  }
}

}  // namespace tdfx::detail
