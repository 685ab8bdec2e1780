#include "tdfx/tracer/fx_view.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/tracer/builtin_layers.h"
#include "tdfx/tracer/method_calls.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/name_scopes.h"

namespace tdfx::detail {
namespace {

// True when `node` has one result (a tensor, or an int as `size` gives), as opposed to none or
// several, or a list (items follow).
bool single_result(const Node& node) {
  if (!node.target().is_aten()) return true;
  const auto& returns = node.target().schema().returns();
  return returns.size() == 1 && returns[0].type()->kind() != c10::TypeKind::ListType;
}

// C++'s `c - y` (LibTorch's operator-(Scalar, Tensor)) as the recorder sees it:
// `e = empty_like(y)`, `f = fill_(e, c)`, `s = sub_(f, y)`, each read only by the next.
struct ScalarMinus {
  const Node* empty = nullptr;
  const Node* fill = nullptr;
  Node* y = nullptr;
  Argument c;
};

bool is_aten(const Node* node, const char* qualified) {
  return node && node->op() == OpCode::kCallFunction && node->target().is_aten() &&
         node->target().str() == qualified;
}

// `sub` as the end of a ScalarMinus whose `rsub(y, c)` computes it bit for bit: y of float32
// or float64, or of an integer dtype with an integral c (where rsub would promote, or compute
// c in another precision, it would not be the same). nullopt otherwise.
std::optional<ScalarMinus> scalar_minus(const Node& sub) {
  if (!is_aten(&sub, "aten::sub_.Tensor") || sub.args().size() != 3 || !sub.kwargs().empty()) {
    return std::nullopt;
  }
  const Argument& alpha = sub.args()[2];
  const bool unit = (alpha.is<int64_t>() && alpha.as<int64_t>() == 1) ||
                    (alpha.is<double>() && alpha.as<double>() == 1.0);
  const Node* fill = sub.args()[0].node();
  Node* y = sub.args()[1].node();
  if (!unit || !y || !is_aten(fill, "aten::fill_.Scalar") || fill->users().size() != 1 ||
      fill->args().size() != 2) {
    return std::nullopt;
  }
  const Node* empty = fill->args()[0].node();
  // empty_like(y) with every option left as y's (the recorder writes them all: None, and
  // LibTorch's memory format Preserve).
  if (!is_aten(empty, "aten::empty_like") || empty->users().size() != 1 || empty->args().empty() ||
      empty->args()[0].node() != y) {
    return std::nullopt;
  }
  for (size_t i = 1; i < empty->args().size(); ++i) {
    const Argument& option = empty->args()[i];
    const bool preserve = option.is<c10::MemoryFormat>() &&
                          option.as<c10::MemoryFormat>() == c10::MemoryFormat::Preserve;
    if (!option.is<None>() && !preserve) return std::nullopt;
  }
  const Argument& c = fill->args()[1];
  const auto dtype = y->meta().tensor.dtype;
  const bool exact = dtype && (*dtype == c10::kFloat || *dtype == c10::kDouble ||
                               (c10::isIntegralType(*dtype, false) && c.is<int64_t>()));
  if (!exact || !(c.is<double>() || c.is<int64_t>())) return std::nullopt;
  return ScalarMinus{empty, fill, y, c};
}

// True when `node` is the empty_like or the fill_ of a ScalarMinus.
bool folded_into_scalar_minus(const Node& node) {
  const bool empty = is_aten(&node, "aten::empty_like");
  if (!empty && !is_aten(&node, "aten::fill_.Scalar")) return false;
  const Node* next = node.users().size() == 1 ? *node.users().begin() : nullptr;
  if (empty && next) next = next->users().size() == 1 ? *next->users().begin() : nullptr;
  if (!next) return false;
  const std::optional<ScalarMinus> minus = scalar_minus(*next);
  return minus && (empty ? minus->empty : minus->fill) == &node;
}

// The state shared by a view's builder and those of its leaf calls' bodies.
struct Shared {
  const PipelineRecording& recording;
  const LiveNodes& live;
  const LeafCalls& leaves;
  const StateUpdates& updates;
  const TraceOptions& options;
  /// The recording's nodes: its graph, or the program flat_program made of it.
  const Graph& graph;
};

// Emits a recording's view node by node in program order: the ops of a leaf call become one
// call_module node whose body a builder of its own emits, the others are emitted as the ops
// they are. `env_` holds what each recorded node became.
class Builder {
 public:
  explicit Builder(Shared& shared)
      : s_(shared),
        names_(shared.recording),
        method_calls_(shared.options.method_calls && shared.options.outline_leaves) {}

  FxView build() {
    const PipelineRecording& rec = s_.recording;
    const Node* output = s_.graph.output_node();
    for (const Node* node : output->input_nodes()) needed_.insert(node);
    if (s_.options.key_style == KeyStyle::kGetItem) {
      tensordict_ = out_.graph.placeholder("tensordict");
    }
    std::unordered_map<const Node*, std::vector<const RecordedRead*>> reads_after;
    for (const RecordedRead& read : rec.reads) reads_after[read.after].push_back(&read);
    auto emit_reads_after = [&](const Node* node) {
      auto it = reads_after.find(node);
      if (it == reads_after.end()) return;
      for (const RecordedRead* read : it->second) emit_read(*read);
    };
    emit_reads_after(nullptr);
    for (Node* node : s_.graph.nodes()) {
      if (node->op() != OpCode::kOutput && s_.live.contains(node)) {
        if (s_.leaves.find(node)) {
          if (const LeafCall* leaf = s_.leaves.starting_at(node)) emit_leaf_call(*leaf);
        } else {
          emit(node);
        }
      }
      emit_reads_after(node);
    }
    std::vector<Argument> results;
    for (const Argument& result : output->args().at(0).as<ArgumentList>().items) {
      results.emplace_back(lookup(result.node()));
    }
    out_.output_keys = rec.out_keys;
    out_.graph.output(tuple(std::move(results)));
    return std::move(out_);
  }

 private:
  const PipelineRecording& rec() const { return s_.recording; }

  Node* lookup(Node* value) {
    auto it = env_.find(value);
    if (it != env_.end()) return it->second;
    Node* state = s_.updates.state_of(value);
    if (state != value) return lookup(state);
    if (value->op() != OpCode::kGetAttr) {
      throw InternalError(
          fmt::format("fx_view: %{} is read before the view has a node for it", value->name()));
    }
    // A parameter read outside a leaf call, or inside one's body: a get_attr at its first use.
    const size_t call = current_call_;
    std::string path = path_within(*value, call);
    if (!param_prefix_.empty() && path.rfind(param_prefix_, 0) == 0) {
      path = path.substr(param_prefix_.size());  // inside a leaf's body
    }
    Node* node = create(OpCode::kGetAttr, Target(path), {}, call, relative_to_call(path, call));
    // A parameter is its call's module's, whichever child of a Sequential first read it.
    set_meta(node, value, call, nullptr, /*by_child=*/false);
    env_[value] = node;
    return node;
  }

  Argument map(const Argument& arg) {
    return map_nodes(arg, [&](Node* node) { return lookup(node); });
  }

  // The path of a shared parameter (a layer in two TensorDictModules) that lies in the leaf
  // body or the call being built, so that it is named relative to them; else its first.
  std::string path_within(const Node& get_attr, size_t call) const {
    const std::string& first = get_attr.target().str();
    auto paths = rec().state_paths.find(first);
    if (paths == rec().state_paths.end()) return first;
    std::string scope = param_prefix_;
    if (scope.empty() && call < rec().calls.size()) {
      scope = rec().calls[call].inner_path;
      if (!scope.empty()) scope += ".";
    }
    for (const std::string& path : paths->second) {
      if (path.rfind(scope, 0) == 0) return path;
    }
    return first;
  }

  std::string relative_to_call(const std::string& path, size_t call) const {
    return rec().relative_to_call(path, call);
  }

  Node* create(OpCode op, Target target, Args args, size_t call, const std::string& base,
               Kwargs kwargs = {}) {
    // A body has its own names (`weight`, `t`, `addmm`), not those of the graph around it.
    const std::string name =
        !body_ && call < rec().calls.size() ? names_.node_name(call, base, op) : base;
    Node* node =
        out_.graph.create_node(op, std::move(target), std::move(args), std::move(kwargs), name);
    if (!first_op_) first_op_ = node;
    return node;
  }

  // `value` may be null: a node without a result. `recorded` (else `value`) says which child of
  // a Sequential ran it, unless `by_child` is false.
  void set_meta(Node* node, const Node* value, size_t call, const Node* recorded = nullptr,
                bool by_child = true) {
    if (value) {
      const TensorMeta& meta = value->meta().tensor;
      node->meta().tensor.dtype = meta.dtype;
      node->meta().tensor.shape = meta.shape;
      node->meta().tensor.device = meta.device;
      node->meta().tensor.batch_dims = meta.batch_dims;
      node->meta().tensor.derived_dims = meta.derived_dims;
    }
    if (call < rec().calls.size()) {
      // The module of `call`, or of the child of its Sequential that recorded the node.
      if (!recorded) recorded = value;
      if (recorded && rec().call_of(recorded) == call) {
        rec().give_module(recorded, node->meta(), by_child);
      } else {
        const RecordedCall& c = rec().calls[call];
        node->meta().td_module = c.td_path;
        node->meta().module_path = c.inner_path;
        node->meta().module_type = c.module_type;
      }
    }
  }

  // The items of the multi-result op `op` by index, also those nothing reads (the recorder
  // makes one for every tensor result).
  const std::vector<Node*>& items_of(const Node* op) const {
    static const std::vector<Node*> none;
    auto it = rec().items.find(op);
    return it == rec().items.end() ? none : it->second;
  }

  void emit(Node* node) {
    if (node->op() == OpCode::kPlaceholder || node->op() == OpCode::kGetAttr) return;
    if (item_source(*node)) return;               // emitted with its op
    if (folded_into_scalar_minus(*node)) return;  // emitted as the `c - y` of its sub_
    current_call_ = rec().call_of(node);
    if (const std::optional<ScalarMinus> minus = scalar_minus(*node)) {
      emit_scalar_minus(node, *minus);
      return;
    }
    if (node->op() != OpCode::kCallFunction ||
        !(node->target().is_aten() || node->target().is_size_arith())) {
      throw InternalError(fmt::format("fx_view: unexpected node %{}", node->name()));
    }
    Args args;
    args.reserve(node->args().size());
    for (const Argument& arg : node->args()) args.push_back(map(arg));
    const Target& target = node->target();
    const std::string base = fx_name(target, args, {});
    Node* created = method_calls_ && target.is_aten() && prints_as_method(target.op_name())
                        ? create_method(target, args)
                        : create(OpCode::kCallFunction, target, args, current_call_, base);
    out_.origin[node] = created;
    if (single_result(*node)) {
      set_meta(created, node, current_call_);
      env_[node] = created;
    } else if (node->target().schema().returns().empty()) {
      // Called for its effect (a guard's `_assert_async`): no value, no tensor metadata.
      set_meta(created, nullptr, current_call_, node);
    } else {
      set_meta(created, nullptr, current_call_, node);
      emit_items(created, node, current_call_);
    }
  }

  // `c - y` as the one op torch.fx would record, `rsub(y, c)`; the program keeps LibTorch's
  // three (the view lowers to rsub only when edited and recompiled).
  void emit_scalar_minus(Node* sub, const ScalarMinus& minus) {
    const Target target = Target::aten("aten::rsub.Scalar");
    Node* created =
        create(OpCode::kCallFunction, target, {lookup(minus.y), minus.c}, current_call_, "rsub");
    out_.origin[sub] = created;
    set_meta(created, sub, current_call_);
    env_[sub] = created;
  }

  // A call of `target` as torch.fx records `x.view(...)`: self first, then the positional
  // arguments up to the last that differs from its default, then keyword-only ones that
  // differ, by name (`x.add_(y, alpha = 2)`).
  Node* create_method(const Target& target, const Args& args) {
    const auto& formals = target.schema().arguments();
    auto is_default = [&](size_t i) {
      return formals[i].default_value() && equals_default(args[i], *formals[i].default_value());
    };
    size_t positional = 0;
    while (positional < args.size() && !formals[positional].kwarg_only()) ++positional;
    size_t kept = positional;
    while (kept > 1 && is_default(kept - 1)) --kept;
    Kwargs kwargs;
    for (size_t i = positional; i < args.size(); ++i) {
      if (!is_default(i)) kwargs.emplace_back(formals[i].name(), args[i]);
    }
    return create(OpCode::kCallMethod, Target::method(target),
                  Args(args.begin(), args.begin() + static_cast<long>(kept)), current_call_,
                  target.op_name(), std::move(kwargs));
  }

  // `getitem(source, i)` for each item of `op` that something reads, or that the body's
  // result needs (forced_items_): an unused item would be a node without users (`loc, scale =
  // x.chunk(2)` with only `loc` selected).
  void emit_items(Node* source, const Node* op, size_t call) {
    const std::vector<Node*>& items = items_of(op);
    std::vector<Node*>& made = made_items_[op];
    made.assign(items.size(), nullptr);
    const bool forced = forced_items_.count(op) > 0;
    for (size_t i = 0; i < items.size(); ++i) {
      Node* value = items[i];
      if (!value || (!forced && !needed_.count(value) && !read_outside(value))) continue;
      Node* item = create(OpCode::kCallFunction, Target::getitem(),
                          {source, static_cast<int64_t>(i)}, call, "getitem");
      set_meta(item, value, call, op);
      made[i] = item;
      if (!value) continue;
      env_[value] = item;
      if (!body_) out_.origin[value] = item;
    }
  }

  // True when a node this builder emits reads `value` (a leaf body sees its own nodes only).
  bool read_outside(const Node* value) const {
    for (const Node* user : s_.live.users(value)) {
      if (!scope_ || scope_->count(user)) return true;
    }
    return false;
  }

  void emit_read(const RecordedRead& read) {
    Node* created;
    if (s_.options.key_style == KeyStyle::kGetItem) {
      created =
          out_.graph.create_node(OpCode::kCallFunction, Target::getitem(), {tensordict_, read.key},
                                 {}, names_.read_name(read.call, read.key));
    } else {
      // Placeholders come first, before any computation.
      auto guard = first_op_ ? out_.graph.inserting_before(first_op_)
                             : Graph::InsertGuard(out_.graph, nullptr);
      created = out_.graph.placeholder(parameter_name(read.key.joined("_")));
    }
    set_meta(created, read.input, rec().calls.size());
    if (read.call < rec().calls.size()) created->meta().td_module = rec().calls[read.call].td_path;
    out_.origin[read.input] = created;
    out_.input_keys.push_back(read.key);
    env_[read.input] = created;
  }

  // How many arguments the call of `leaf` passes: a built-in layer whose forward takes several
  // tensors, all given one value, gets it in each place; otherwise one per input.
  static size_t repeated_inputs(const LeafCall& leaf) {
    if (leaf.inputs.size() != 1 || !leaf.module) return leaf.inputs.size();
    return std::max<size_t>(1, tensor_arguments(*leaf.module));
  }

  // True when `leaf` is a call of an LSTM or LSTMCell given its state: its inputs are x, h
  // and c, which Python passes as `lstm(x, (h, c))`, the state one tuple.
  static bool takes_state_pair(const LeafCall& leaf) {
    if (leaf.inputs.size() != 3 || !leaf.module || !is_torch_nn(*leaf.module)) return false;
    const std::string type = short_type(*leaf.module);
    return type == "LSTM" || type == "LSTMCell";
  }

  void emit_leaf_call(const LeafCall& leaf) {
    current_call_ = leaf.call;
    const bool state_pair = takes_state_pair(leaf);
    // The body: the leaf's ops on its own placeholders and parameters.
    auto body = std::make_shared<Graph>();
    {
      Builder sub(s_);
      sub.current_call_ = rec().calls.size();
      sub.body_ = true;
      sub.method_calls_ = false;
      if (state_pair) {
        // forward(input, hx): h and c are the items of hx.
        Graph& graph = sub.out_.graph;
        sub.env_[leaf.inputs[0]] = graph.placeholder("input");
        Node* hx = graph.placeholder("hx");
        for (int64_t i = 0; i < 2; ++i) {
          sub.env_[leaf.inputs[static_cast<size_t>(i) + 1]] =
              graph.call_function(Target::getitem(), {hx, i});
        }
      } else {
        for (Node* input : leaf.inputs) sub.env_[input] = sub.out_.graph.placeholder("input");
      }
      // One value given in each place (self-attention's attn(x, x, x)): the recording sees it
      // once; the call passes it as often as the layer's forward takes tensors.
      for (size_t i = leaf.inputs.size(); i < repeated_inputs(leaf); ++i) {
        sub.out_.graph.placeholder("input");
      }
      sub.param_prefix_ = leaf.target + ".";
      const std::unordered_set<const Node*> members(leaf.nodes.begin(), leaf.nodes.end());
      sub.scope_ = &members;
      sub.needed_.insert(leaf.returns().begin(), leaf.returns().end());
      if (leaf.recurrent) sub.forced_items_.insert(leaf.recurrent);
      for (Node* node : leaf.nodes) sub.emit(node);
      sub.out_.graph.output(leaf.recurrent ? sub.recurrent_result(leaf.recurrent)
                                           : sub.flat_result(leaf.returns()));
      *body = std::move(sub.out_.graph);
    }
    Args args;
    if (state_pair) {
      args = {lookup(leaf.inputs[0]), tuple({lookup(leaf.inputs[1]), lookup(leaf.inputs[2])})};
    } else {
      for (Node* input : leaf.inputs) args.emplace_back(lookup(input));
      for (size_t i = leaf.inputs.size(); i < repeated_inputs(leaf); ++i) {
        args.emplace_back(lookup(leaf.inputs.front()));
      }
    }
    Node* node = create(OpCode::kCallModule, Target(leaf.target), std::move(args), leaf.call,
                        leaf.base_name);
    node->set_body(body);
    for (const Node* member : leaf.nodes) out_.origin[member] = node;
    set_meta(node, leaf.outputs.front(), leaf.call);
    node->meta().module_path = leaf.target;
    node->meta().module_type = leaf.module_type;
    if (leaf.recurrent) {
      node->meta().tensor = {};
      emit_recurrent_items(node, leaf);
    } else if (leaf.returns().size() == 1) {
      env_[leaf.returns()[0]] = node;
    } else {
      node->meta().tensor = {};
      for (size_t i = 0; i < leaf.returns().size(); ++i) {
        Node* value = leaf.returns()[i];
        // Only what is read after the call gets its item (a cell's c, unread, gets none).
        if (std::find(leaf.outputs.begin(), leaf.outputs.end(), value) == leaf.outputs.end()) {
          continue;
        }
        Node* item = create(OpCode::kCallFunction, Target::getitem(),
                            {node, static_cast<int64_t>(i)}, leaf.call, "getitem");
        set_meta(item, value, leaf.call);
        env_[value] = item;
      }
    }
  }

  Argument flat_result(const std::vector<Node*>& outputs) const {
    std::vector<Argument> items;
    for (Node* v : outputs) items.emplace_back(env_.at(v));
    return items.size() == 1 ? items[0] : tuple(std::move(items));
  }

  // The nested tuple a recurrent layer returns (see recurrent_paths).
  Argument recurrent_result(const Node* op) const {
    const std::vector<Node*>& made = made_items_.at(op);
    auto item = [&](size_t i) { return Argument(made.at(i)); };
    if (op->target().op_name() == "lstm") return tuple({item(0), tuple({item(1), item(2)})});
    return tuple({item(0), item(1)});
  }

  // getitem chains from a recurrent layer's call to each output something reads, in output
  // order, sharing the inner tuple (`getitem_1 = lstm[1]; getitem_2 = getitem_1[0]`).
  void emit_recurrent_items(Node* call, const LeafCall& leaf) {
    const auto paths = recurrent_paths(leaf.recurrent->target().op_name());
    const std::vector<Node*>& items = items_of(leaf.recurrent);
    std::map<int64_t, Node*> inner;
    for (size_t i = 0; i < paths.size() && i < items.size(); ++i) {
      Node* value = items[i];
      if (!value ||
          std::find(leaf.outputs.begin(), leaf.outputs.end(), value) == leaf.outputs.end()) {
        continue;
      }
      if (!needed_.count(value) && !read_outside(value)) continue;
      Node* source = call;
      if (paths[i].size() == 2) {
        Node*& tuple_node = inner[paths[i][0]];
        if (!tuple_node) {
          tuple_node = create(OpCode::kCallFunction, Target::getitem(), {call, paths[i][0]},
                              leaf.call, "getitem");
          set_meta(tuple_node, value, leaf.call);
          tuple_node->meta().tensor = {};
        }
        source = tuple_node;
      }
      Node* item = create(OpCode::kCallFunction, Target::getitem(), {source, paths[i].back()},
                          leaf.call, "getitem");
      set_meta(item, value, leaf.call);
      env_[value] = item;
    }
  }

  Shared& s_;
  NameScopes names_;
  FxView out_;
  Node* tensordict_ = nullptr;
  Node* first_op_ = nullptr;
  size_t current_call_ = 0;
  std::string param_prefix_;
  /// Set for the builder of a leaf's body.
  bool body_ = false;
  /// Method faces for method-only ops; leaf bodies stay aten calls, which run.
  bool method_calls_ = false;
  std::unordered_map<const Node*, Node*> env_;
  /// Values that must get a node even when no recorded node reads them: the outputs.
  std::unordered_set<const Node*> needed_;
  /// Ops whose every item gets a node: a recurrent layer's, which its body returns.
  std::unordered_set<const Node*> forced_items_;
  /// The item nodes made for each multi-result op, by index.
  std::unordered_map<const Node*, std::vector<Node*>> made_items_;
  /// For a leaf's body builder, the leaf call's nodes: reads by other nodes are not its own.
  const std::unordered_set<const Node*>* scope_ = nullptr;
};

}  // namespace

FxView fx_view(const Graph& graph, const PipelineRecording& recording, const LiveNodes& live,
               const LeafCalls& leaves, const StateUpdates& updates, const TraceOptions& options) {
  Shared shared{recording, live, leaves, updates, options, graph};
  return Builder(shared).build();
}

}  // namespace tdfx::detail
