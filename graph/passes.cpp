#include "tdfx/graph/passes.h"

#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/graph/graph_module.h"

namespace tdfx {
namespace {

bool inline_one(Graph& graph, Node* call) {
  const Graph& body = *call->body();
  std::vector<Node*> placeholders;
  for (Node* node : body.nodes()) {
    if (node->op() == OpCode::kPlaceholder) placeholders.push_back(node);
  }
  const Node* output = body.output_node();
  if (!output || !output->args()[0].node() || placeholders.size() != call->args().size()) {
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
  {
    auto guard = graph.inserting_before(call);
    for (Node* node : body.nodes()) {
      if (node->op() == OpCode::kPlaceholder || node->op() == OpCode::kOutput) continue;
      Node* copy = node->op() == OpCode::kGetAttr
                       ? graph.create_node(OpCode::kGetAttr, Target(prefix + node->target().str()),
                                           {}, {}, node->name())
                       : graph.node_copy(*node, lookup);
      if (node->op() == OpCode::kGetAttr) copy->meta() = node->meta();
      // Errors while running name the call the user saw, outermost first.
      copy->meta().shown_as =
          call->meta().shown_as.empty() ? describe(*call) : call->meta().shown_as;
      value_map[node] = copy;
    }
  }
  Node* result = value_map.at(output->args()[0].node());
  call->replace_all_uses_with(result);
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
