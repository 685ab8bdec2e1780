#pragma once

/// \file
/// DispatchRecorder: tdfx's own recorder on the c10 dispatcher. While it records on a thread,
/// every aten operator the code running there calls reaches a boxed fallback of tdfx's, which
/// adds a node to a flat tdfx Graph as the op runs — its arguments taken from the boxed stack,
/// tensors as the nodes whose values they are — and then runs the op below the recorder.
/// Ops an op calls inside itself run below it and are not recorded: what is recorded is what
/// the code called.
///
///     Graph graph;
///     DispatchRecorder recorder(graph);
///     recorder.bind(x, graph.placeholder("x"));
///     at::Tensor y;
///     recorder.record([&] { y = at::relu(x * 2); });
///     graph.output(recorder.node_of(y));   // %mul = aten::mul.Scalar(%x, 2); %relu = …
///
/// A tensor is followed by identity: an in-place op (`add_`) makes its result the tensor's new
/// value, and the recorder holds a weak reference to every tensor it follows, so that a freed
/// tensor's address cannot be taken by a new one while the recording lasts. A tensor changed
/// through a view of it (`y.select(0, 0).zero_()`) keeps its node: the graph runs its ops in
/// the order recorded, the view's in-place op among them, so a run changes it alike; passes
/// that reorder or remove nodes must keep such ops where they are (functionalization, which
/// makes the change explicit, is issue 37's).
///
/// Which dispatch key the fallback sits on, and why, is said in dispatch_recorder.cpp, the one
/// file that knows it.
///
/// record_pipeline (dispatch_trace.h) records a TensorDict pipeline with it; symbolic_trace
/// and export_program are passes over that recording.

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tdfx/graph/graph.h"

namespace tdfx::detail {

/// A recorded op that turned a followed tensor into a C++ value (`aten::item`,
/// `aten::is_nonzero`, `aten::equal`, `aten::allclose`): a branch or a number the graph
/// cannot hold.
struct ValueReadCall {
  /// The op (`aten::item`).
  std::string op;
  /// The nodes of its tensor arguments.
  std::vector<Node*> inputs;
  /// The last node recorded before it (nullptr when none was).
  Node* after = nullptr;
  /// Set by DispatchRecorder::on_value_read when it recorded a guard for the read (a node
  /// that fails the run where the value comes out otherwise): the graph then holds it.
  bool guarded = false;
  /// Set by on_value_read: the built-in layer whose forward made the read, "" for user code.
  std::string layer;
};

/// A call of an op the recorder records as the ops it calls (records_inside in
/// dispatch_recorder.cpp): a GRUCell's `aten::gru_cell` is recorded as two linears and its
/// gates' arithmetic. The nodes recorded inside it are DispatchRecorder::composite_running()'s
/// while they are created.
struct CompositeCall {
  /// The op (`aten::gru_cell`).
  std::string op;
  /// The nodes of its tensor arguments (a list's items in place), in order; nullptr for one
  /// the recording does not follow.
  std::vector<Node*> inputs;
  /// The nodes of its tensor results, in order.
  std::vector<Node*> results;
};

/// Records aten ops into a Graph it does not own. One recorder records on one thread at a
/// time, and one at a time on a thread: a recording does not start inside another (code being
/// traced that traces). Not copyable.
class DispatchRecorder {
 public:
  /// Records into `graph` (new nodes go at its insert point, before its output node).
  explicit DispatchRecorder(Graph& graph);
  ~DispatchRecorder();
  DispatchRecorder(const DispatchRecorder&) = delete;
  DispatchRecorder& operator=(const DispatchRecorder&) = delete;

  /// Runs `fn` with this recorder recording on the current thread: each aten op it calls
  /// becomes a node. TraceError when an op reads a tensor the recording does not follow (a
  /// tensor captured from outside, not bound), naming the op and the argument; TraceError when
  /// the dispatch key the recorder needs is held by another library in this process.
  /// TraceError when another recording is under way on this thread (a forward being traced
  /// calls symbolic_trace): the outer one would not see the ops the inner one records.
  /// Exceptions of `fn` pass through.
  void record(const std::function<void()>& fn);

  /// Runs `fn` without recording it (the recorder's caller copying a tensor, say).
  static void unrecorded(const std::function<void()>& fn);

  /// Makes `tensor` the value of `node` (an input or a parameter): ops that read it read
  /// `node`. `tensor` must be defined.
  void bind(const at::Tensor& tensor, Node* node);
  /// Makes `tensor` the parameter or buffer at `index` in the caller's state list, read by a
  /// get_attr node of `path` that is created where an op first reads it (take_state_reads() says
  /// which index it reads). An op that writes it (in place, or as batch_norm writes its
  /// running statistics) saves a copy of it first, so that restore_state() can put it back:
  /// nothing is copied up front. Returns the index it is read by: `index`, or the one it was
  /// first bound at (a layer shared by two modules), whose path its get_attr reads.
  size_t bind_state(const at::Tensor& tensor, std::string path, size_t index);
  /// Takes the state index (bind_state) each get_attr of a parameter or buffer reads, kNoState
  /// for every other node: the recording keeps it.
  NodeTable<size_t> take_state_reads() { return std::move(state_reads_); }
  static constexpr size_t kNoState = static_cast<size_t>(-1);
  /// Writes back every state tensor the recording changed, as it was before its first write.
  void restore_state();
  /// The node whose value `tensor` now is, or nullptr when the recording does not follow it.
  Node* node_of(const at::Tensor& tensor) const;
  /// The first node the recorder created, or nullptr: what comes before it came before the
  /// recording.
  Node* first_node() const { return first_; }
  /// The last node the recorder created, or nullptr.
  Node* last_node() const { return last_; }

  /// What errors name as the code being recorded (a TensorDictModule's description), made
  /// only when an error needs it; when empty they name the op and its argument instead.
  std::function<std::string()> subject;
  /// Called with each node the recorder creates (ops, their items, get_attr reads), to give it
  /// its metadata.
  std::function<void(Node*)> on_node;
  /// Called with each tensor an op reads that the recording does not follow and that is no
  /// parameter's or buffer's storage (a tensor a lambda captured): returns the path (from the
  /// graph root) of the constant that stands for it, which a get_attr node then reads, as
  /// torch.fx lifts `_tensor_constant0`. When unset, such a tensor is a TraceError.
  std::function<std::string(const at::Tensor&)> on_captured;
  /// Called with each value read of a followed tensor right after it ran, with its tensor
  /// arguments: it may record a guard for it (with record_guard) and set `guarded`.
  std::function<void(ValueReadCall&, const std::vector<at::Tensor>&)> on_value_read;

  /// Records, at the end of the graph, that `a` and `b` compare equal (`equal_now`) or not as
  /// they did in this recording: `eq`, `all`, `logical_not` when they differed, and
  /// `_assert_async`, which fails a run where the comparison comes out otherwise.
  void record_guard(const at::Tensor& a, const at::Tensor& b, bool equal_now);

  /// The ops that turned a followed tensor into a C++ value, in order.
  const std::vector<ValueReadCall>& value_reads() const { return value_reads_; }
  /// The first op recorded while autograd's grad mode was not what it was when record()
  /// began (a NoGradGuard, AutoGradMode or InferenceMode inside the code), "" when none was:
  /// the graph does not hold grad mode, so its runs would not switch it.
  const std::string& grad_mode_changed_at() const { return grad_mode_changed_at_; }
  /// The number of ops recorded.
  size_t op_count() const { return op_count_; }
  /// The calls of ops recorded as the ops they call, outermost ones only, in order; the
  /// recorder keeps none after.
  std::vector<CompositeCall> take_composites() { return std::move(composites_); }
  /// What composite_running() returns while no composite op runs.
  static constexpr size_t kNoComposite = static_cast<size_t>(-1);
  /// The composite call (an index into composites()) whose ops are being recorded, else
  /// kNoComposite: on_node asks it.
  size_t composite_running() const { return composite_running_; }

  /// Called by the fallback (dispatch_recorder.cpp): records one op whose arguments are on
  /// top of `stack`, runs it by `run`, and records its results.
  void record_op(const c10::OperatorHandle& op, std::vector<c10::IValue>& stack,
                 const std::function<void()>& run);
  /// Called by the fallback for an op recorded as the ops it calls: runs it by `run` (the ops
  /// it calls come back to the fallback, recorded) and notes the call (composites()).
  void record_composite(const c10::OperatorHandle& op, std::vector<c10::IValue>& stack,
                        const std::function<void()>& run);

 private:
  struct Followed;
  class FollowedTable;
  Argument argument(const c10::IValue& value, const c10::Argument& formal,
                    const c10::OperatorHandle& op);
  Node* created(Node* node);
  void save_before_write(const at::Tensor& tensor);
  struct OpInfo;
  const OpInfo& op_info(const c10::OperatorHandle& op);
  void bind_result(const at::Tensor& tensor, Node* node);
  std::string numbered(const std::string& base);

  Graph& graph_;
  std::unique_ptr<FollowedTable> followed_;
  std::unique_ptr<std::unordered_map<const void*, OpInfo>> ops_;
  std::vector<ValueReadCall> value_reads_;
  /// How many ops were named from each base name.
  std::unordered_map<std::string, int64_t> name_uses_;
  /// State tensors written during the recording, with their values before the first write.
  std::vector<std::pair<at::Tensor, at::Tensor>> saved_;
  NodeTable<size_t> state_reads_{kNoState};
  /// Autograd's grad mode when record() began, and grad_mode_changed_at().
  bool grad_mode_ = true;
  std::string grad_mode_changed_at_;
  Node* first_ = nullptr;
  Node* last_ = nullptr;
  size_t op_count_ = 0;
  std::vector<CompositeCall> composites_;
  size_t composite_running_ = kNoComposite;
};

}  // namespace tdfx::detail
