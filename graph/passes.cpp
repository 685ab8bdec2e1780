#include "tdfx/graph/passes.h"

#include <unordered_map>

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
  for (size_t i = 0; i < placeholders.size(); ++i) {
    Node* bound = call->args()[i].node();
    if (!bound) return false;
    value_map[placeholders[i]] = bound;
  }
  auto lookup = [&](Node* n) { return value_map.at(n); };
  const std::string prefix = call->target().str() + ".";
  const NodeMeta& called = call->meta();
  {
    auto guard = graph.inserting_before(call);
    for (Node* node : body.nodes()) {
      if (node->op() == OpCode::kPlaceholder || node->op() == OpCode::kOutput) continue;
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

}  // namespace tdfx
