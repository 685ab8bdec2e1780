#include "tdfx/graph/passes.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/graph/graph_module.h"

namespace tdfx {
namespace {

// True when every use of a call's result `value` can be bound to the part of the body's result
// `result` it reads: a node, or a tuple read by getitem with a constant index (a recurrent
// layer's `(output, (h, c))`), at any depth.
bool bindable(const Node* value, const Argument& result) {
  if (result.node()) return true;
  if (!result.is<ArgumentList>()) return false;
  const auto& items = result.as<ArgumentList>().items;
  for (const Node* user : value->users()) {
    if (!user->target().is_getitem() || user->args().size() != 2 || !user->args()[1].is<int64_t>())
      return false;
    const int64_t i = user->args()[1].as<int64_t>();
    if (i < 0 || i >= static_cast<int64_t>(items.size()) || !bindable(user, items[i])) return false;
  }
  return true;
}

// Replaces the uses of `value` by the nodes of `result` (bindable() said they fit); the
// getitem nodes that picked from a tuple are erased.
void bind_result(Graph& graph, Node* value, const Argument& result,
                 const std::unordered_map<const Node*, Node*>& value_map) {
  if (Node* node = result.node()) {
    value->replace_all_uses_with(value_map.at(node));
    return;
  }
  const auto& items = result.as<ArgumentList>().items;
  const std::vector<Node*> users(value->users().begin(), value->users().end());
  for (Node* user : users) {
    bind_result(graph, user, items[static_cast<size_t>(user->args()[1].as<int64_t>())], value_map);
    graph.erase_node(user);
  }
}

bool inline_one(Graph& graph, Node* call) {
  const Graph& body = *call->body();
  std::vector<Node*> placeholders;
  for (Node* node : body.nodes()) {
    if (node->op() == OpCode::kPlaceholder) placeholders.push_back(node);
  }
  const Node* output = body.output_node();
  if (!output || placeholders.size() != call->args().size() || !bindable(call, output->args()[0])) {
    return false;
  }
  std::unordered_map<const Node*, Node*> value_map;
  // A tuple of nodes passed for a placeholder (an LSTM's state, `lstm(x, (h, c))`) is bound
  // item by item: each getitem the body reads it with is the item itself, not copied.
  std::unordered_set<const Node*> unpacked;
  for (size_t i = 0; i < placeholders.size(); ++i) {
    const Argument& arg = call->args()[i];
    if (Node* bound = arg.node()) {
      value_map[placeholders[i]] = bound;
      continue;
    }
    if (!arg.is<ArgumentList>()) return false;
    const auto& items = arg.as<ArgumentList>().items;
    for (Node* user : placeholders[i]->users()) {
      const bool item_read = user->op() == OpCode::kCallFunction && user->target().is_getitem() &&
                             user->args().size() == 2 && user->args()[1].is<int64_t>();
      if (!item_read) return false;
      const int64_t k = user->args()[1].as<int64_t>();
      if (k < 0 || k >= static_cast<int64_t>(items.size()) ||
          !items[static_cast<size_t>(k)].node()) {
        return false;
      }
      value_map[user] = items[static_cast<size_t>(k)].node();
      unpacked.insert(user);
    }
  }
  auto lookup = [&](Node* n) { return value_map.at(n); };
  const std::string prefix = call->target().str() + ".";
  const NodeMeta& called = call->meta();
  {
    auto guard = graph.inserting_before(call);
    for (Node* node : body.nodes()) {
      if (node->op() == OpCode::kPlaceholder || node->op() == OpCode::kOutput) continue;
      if (unpacked.count(node)) continue;
      Node* copy = node->op() == OpCode::kGetAttr
                       ? graph.create_node(OpCode::kGetAttr, Target(prefix + node->target().str()),
                                           {}, {}, node->name())
                       : graph.node_copy(*node, lookup);
      NodeMeta& meta = copy->meta();
      if (node->op() == OpCode::kGetAttr) meta = node->meta();
      // The body's ops belong to the module the call ran, as the call itself does.
      meta.module_path = called.module_path;
      meta.module_type = called.module_type;
      meta.td_module = called.td_module;
      // Errors while running name the call the user saw, outermost first.
      meta.shown_as = called.shown_as.empty() ? describe(*call) : called.shown_as;
      value_map[node] = copy;
    }
  }
  bind_result(graph, call, output->args()[0], value_map);
  graph.erase_node(call);
  return true;
}

}  // namespace

size_t inline_call_modules(Graph& graph) {
  size_t inlined = 0;
  for (Node* node : graph.node_list()) {
    if (node->op() == OpCode::kCallModule && node->body() && inline_one(graph, node)) ++inlined;
  }
  graph.lint();
  return inlined;
}

namespace {

bool is_aten_call(const Node* node) {
  return node && node->op() == OpCode::kCallFunction && node->target().is_aten() &&
         node->target().has_operator();
}

// The sole result of an aten op that aliases none of its arguments: memory only the program
// holds, which an update in place changes for the program's own later readers alone.
bool computes_fresh_tensor(const Node* node) {
  if (!is_aten_call(node)) return false;
  const auto& returns = node->target().schema().returns();
  return returns.size() == 1 && !returns[0].alias_info() &&
         returns[0].type()->kind() == c10::TypeKind::TensorType;
}

// Whether `reader` may keep or change `value`'s memory: `value` is passed as an argument its
// schema annotates with an alias set (a view's self, an in-place op's self, an out= tensor),
// or `reader` is no aten call, whose effect on its arguments is not known.
bool may_alias(const Node& reader, const Node* value) {
  if (!is_aten_call(&reader)) return true;
  const auto& params = reader.target().schema().arguments();
  auto passes = [value](const Argument& arg) {
    bool found = false;
    for_each_node(arg, [&](Node* n) { found |= n == value; });
    return found;
  };
  for (size_t i = 0; i < reader.args().size(); ++i) {
    if (passes(reader.args()[i]) && (i >= params.size() || params[i].alias_info())) return true;
  }
  for (const auto& [name, arg] : reader.kwargs()) {
    if (!passes(arg)) continue;
    auto it = std::find_if(params.begin(), params.end(),
                           [&name = name](const c10::Argument& p) { return p.name() == name; });
    if (it == params.end() || it->alias_info()) return true;
  }
  return false;
}

// `op_` with a functional overload `op` of the same arguments, unannotated, that returns one
// fresh tensor: its target; else nullopt.
std::optional<Target> functional_twin(const Node& node) {
  const Target& target = node.target();
  const std::string& op = target.op_name();
  if (op.size() < 2 || op.back() != '_' || op.front() == '_') return std::nullopt;
  // These change what memory the tensor is, not what it holds: after `h.set_(g)`, an update
  // of h is one of g, which a functional `set` would lose.
  static const std::set<std::string_view> rebinds = {"set_", "resize_", "resize_as_"};
  if (rebinds.count(op)) return std::nullopt;
  const auto& schema = target.schema();
  const auto& params = schema.arguments();
  if (params.empty() || !params[0].alias_info() || !params[0].alias_info()->isWrite()) {
    return std::nullopt;
  }
  const std::string base = "aten::" + op.substr(0, op.size() - 1);
  const auto handle = c10::Dispatcher::singleton().findOp({base, target.overload()});
  if (!handle) return std::nullopt;
  const auto& twin = handle->schema();
  if (twin.arguments().size() != params.size() || twin.returns().size() != 1 ||
      twin.returns()[0].alias_info()) {
    return std::nullopt;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (twin.arguments()[i].name() != params[i].name() || twin.arguments()[i].alias_info()) {
      return std::nullopt;
    }
  }
  return Target::aten(target.overload().empty() ? base : base + "." + target.overload());
}

// Every tensor argument of `node` has `self`'s dtype, as the trace recorded them, but for bool
// tensors (masks, conditions), which never widen a tensor of another dtype.
bool same_dtypes(const Node& node, const Node& self) {
  const auto dtype = self.meta().tensor.dtype;
  if (!dtype) return false;
  bool same = true;
  auto check = [&](Node* n) {
    const auto other = n->meta().tensor.dtype;
    same &= other == dtype || other == c10::kBool;
  };
  for (const Argument& arg : node.args()) for_each_node(arg, check);
  for (const auto& kwarg : node.kwargs()) for_each_node(kwarg.second, check);
  return same;
}

bool is_target(const Node* node, const char* qualified) {
  return is_aten_call(node) && node->target().str() == qualified;
}

}  // namespace

size_t functionalize(Graph& graph) {
  size_t rewrites = 0;
  NodeTable<size_t> position;  // in program order; a functional twin takes its op's
  size_t next_position = 0;
  for (Node* node : graph.nodes()) position.set(node, next_position++);
  for (Node* node : graph.node_list()) {
    if (!is_aten_call(node) || node->args().empty()) continue;
    Node* self = node->args()[0].node();
    if (!computes_fresh_tensor(self)) continue;
    const auto twin = functional_twin(*node);
    if (!twin || !same_dtypes(*node, *self)) continue;
    const size_t at = position.get(node);
    bool shared_before = false;
    std::vector<Node*> later;
    for (Node* reader : self->users()) {
      if (reader == node) continue;
      if (position.get(reader) > at) {
        later.push_back(reader);
      } else if (may_alias(*reader, self)) {
        shared_before = true;
      }
    }
    if (shared_before) continue;
    Node* functional;
    {
      auto guard = graph.inserting_before(node);
      functional = graph.create_node(OpCode::kCallFunction, *twin, node->args(), node->kwargs());
    }
    functional->meta() = node->meta();
    position.set(functional, at);
    node->replace_all_uses_with(functional);
    for (Node* reader : later) reader->replace_input_with(self, functional);
    graph.erase_node(node);
    ++rewrites;
  }
  // fill(empty_like(x, options), v) -> full_like(x, v, options); zero(empty_like) likewise.
  for (Node* node : graph.node_list()) {
    const bool fill = is_target(node, "aten::fill.Scalar");
    if (!fill && !is_target(node, "aten::zero")) continue;
    Node* empty = node->args().empty() ? nullptr : node->args()[0].node();
    // empty_like(self, dtype, layout, device, pin_memory, memory_format) as the recorder
    // writes it, every argument positional; full_like takes the fill value second.
    if (!is_target(empty, "aten::empty_like") || empty->users().size() != 1 ||
        empty->args().size() != empty->target().schema().arguments().size() ||
        !empty->kwargs().empty() || node->args().size() != (fill ? 2u : 1u) ||
        !node->kwargs().empty()) {
      continue;
    }
    Args args = empty->args();
    args.insert(args.begin() + 1, fill ? node->args()[1] : Argument(int64_t{0}));
    Node* full;
    {
      auto guard = graph.inserting_before(node);
      full = graph.create_node(OpCode::kCallFunction, Target::aten("aten::full_like"),
                               std::move(args), {});
    }
    full->meta() = node->meta();
    node->replace_all_uses_with(full);
    graph.erase_node(node);
    graph.erase_node(empty);
    ++rewrites;
  }
  return rewrites;
}

}  // namespace tdfx
