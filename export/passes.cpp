#include "tdfx/export/passes.h"

#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/tracer/module_state.h"

namespace tdfx {
namespace {

bool is_op(const Node* node, const char* qualified) {
  return node && node->op() == OpCode::kCallFunction && node->target().is_aten() &&
         node->target().str() == qualified;
}

bool is_one(const Argument& arg) {
  return (arg.is<int64_t>() && arg.as<int64_t>() == 1) ||
         (arg.is<double>() && arg.as<double>() == 1.0);
}

// Makes `last` aten::linear(x, w, b), named afresh, and erases the rest of the chain it ends
// (`rest`, the chain's nodes before `last`, last first).
void replace_with_linear(Graph& graph, Node* last, Node* x, Node* w, const Argument& b,
                         std::initializer_list<Node*> rest) {
  static const Target kLinear = Target::aten("aten::linear");  // looked up once
  last->set_target(kLinear);
  last->set_args({x, w, b});
  if (!last->kwargs().empty()) last->set_kwargs({});
  graph.rename_fresh(last, "linear");
  for (Node* node : rest) graph.erase_node(node);
}

// The arguments of `node` by position, `count` of them, those after the first `required`
// defaulting to 1 (addmm's beta and alpha, add_'s alpha): as recorded when given
// positionally (node.args() itself when it has all `count`, else a copy in `storage`), else
// schema_arguments' (in `storage`).
const Args& positional_arguments(const Node& node, size_t required, size_t count, Args& storage) {
  if (node.kwargs().empty() && node.args().size() == count) return node.args();
  if (!node.kwargs().empty() || node.args().size() < required || node.args().size() > count) {
    storage = schema_arguments(node);
  } else {
    storage = node.args();
    storage.resize(count, Argument(int64_t{1}));
  }
  return storage;
}

}  // namespace

size_t fuse_linear(Graph& graph) {
  size_t rewrites = 0;
  Args storage;
  // A rewrite erases only nodes before the one it is at, so the walk goes on from there.
  for (Node* node : graph.nodes()) {
    if (is_op(node, "aten::addmm")) {
      // addmm(bias, x, t(w), beta=1, alpha=1)
      const Args& args = positional_arguments(*node, 3, 5, storage);
      Node* t = args[2].node();
      if (!is_op(t, "aten::t") || t->users().size() != 1 || !is_one(args[3]) || !is_one(args[4])) {
        continue;
      }
      Node* w = t->args()[0].node();
      Node* x = args[1].node();
      if (!w || !x) continue;
      const Argument bias = args[0];
      replace_with_linear(graph, node, x, w, bias, {t});
      ++rewrites;
    } else if (is_op(node, "aten::add_.Tensor")) {
      // add_(matmul(x, t(w)), bias, alpha=1)
      const Args& args = positional_arguments(*node, 2, 3, storage);
      Node* matmul = args[0].node();
      if (!is_op(matmul, "aten::matmul") || matmul->users().size() != 1 || !is_one(args[2])) {
        continue;
      }
      Node* t = matmul->args()[1].node();
      if (!is_op(t, "aten::t") || t->users().size() != 1) continue;
      Node* w = t->args()[0].node();
      Node* x = matmul->args()[0].node();
      if (!w || !x) continue;
      const Argument bias = args[1];
      replace_with_linear(graph, node, x, w, bias, {matmul, t});
      ++rewrites;
    }
  }
  return rewrites;
}

size_t canonicalize_scalar_overloads(Graph& graph) {
  size_t rewrites = 0;
  for (Node* node : graph.node_list()) {
    if (node->op() != OpCode::kCallFunction || !node->target().is_aten() ||
        node->target().overload() != "Scalar") {
      continue;
    }
    const std::string& op = node->target().op_name();
    if (op != "add" && op != "sub" && op != "mul" && op != "div") continue;
    // A number computed by the graph (`x * x.size(0)`) stays on the Scalar overload: the
    // runner wraps constants, not values, as tensors.
    if (node->args().size() < 2 || node->args()[1].node() != nullptr) continue;
    Node* replacement;
    {
      auto guard = graph.inserting_before(node);
      replacement =
          graph.create_node(OpCode::kCallFunction, Target::aten("aten::" + op + ".Tensor"),
                            node->args(), node->kwargs());
    }
    replacement->meta() = node->meta();
    node->replace_all_uses_with(replacement);
    const std::string name = node->name();
    graph.erase_node(node);
    graph.rename(replacement, name);
    ++rewrites;
  }
  return rewrites;
}

std::vector<LiftedState> lift_parameters(Graph& graph, torch::nn::Module& root) {
  return lift_parameters(graph, detail::state_tensors(root));
}

std::vector<LiftedState> lift_parameters(
    Graph& graph, const std::vector<detail::StateTensor>& state,
    const std::unordered_map<std::string, at::Tensor>& constants) {
  // By target path (a view of the first reading node's target: each entry is erased before
  // that node is lifted and its target replaced), the first read. Most paths are read once;
  // the further reads of the others are in `more_reads`, in graph order.
  std::unordered_map<std::string_view, Node*> attributes;
  attributes.reserve(state.size() + constants.size());
  std::unordered_map<const Node*, std::vector<Node*>> more_reads;
  for (Node* node : graph.nodes()) {
    if (node->op() != OpCode::kGetAttr) continue;
    auto [first, added] = attributes.emplace(node->target().str(), node);
    if (!added) more_reads[first->second].push_back(node);
  }
  // Lifted placeholders go before the graph's first node but get_attr reads (each of which
  // is lifted, or refused below), in the order lifted.
  Node* anchor = nullptr;
  for (Node* node : graph.nodes()) {
    if (node->op() == OpCode::kGetAttr) continue;
    anchor = node;
    break;
  }
  std::vector<LiftedState> lifted;
  auto lift = [&](const std::string& path, const at::Tensor& tensor, bool parameter,
                  bool constant) {
    auto it = attributes.find(path);
    if (it == attributes.end()) return;
    // The first read becomes the placeholder; the others read it instead.
    Node* placeholder = it->second;
    attributes.erase(it);
    std::string name;
    name.reserve(path.size() + 2);
    name += constant ? "c_" : parameter ? "p_" : "b_";
    name += path;
    for (char& c : name) c = c == '.' ? '_' : c;
    graph.lift_to_placeholder(placeholder, std::move(name), anchor);
    placeholder->meta().tensor.dtype = tensor.scalar_type();
    placeholder->meta().tensor.shape = tensor.sizes().vec();
    placeholder->meta().tensor.device = tensor.device();
    if (auto more = more_reads.find(placeholder); more != more_reads.end()) {
      for (Node* read : more->second) {
        read->replace_all_uses_with(placeholder);
        graph.erase_node(read);
      }
    }
    lifted.push_back({placeholder->name(), path, tensor, parameter, constant, placeholder});
  };
  for (const detail::StateTensor& entry : state) {
    lift(entry.path, entry.tensor, entry.parameter, false);
  }
  if (!constants.empty()) {
    std::vector<std::string> read;  // the constants' paths, in graph order
    for (const Node* node : graph.nodes()) {
      if (node->op() == OpCode::kGetAttr && constants.count(node->target().str())) {
        read.push_back(node->target().str());
      }
    }
    for (const std::string& path : read) lift(path, constants.at(path), false, true);
  }
  if (!attributes.empty()) {
    fail<GraphError>("get_attr %{} reads '{}', which is no parameter, buffer or constant",
                     attributes.begin()->second->name(), attributes.begin()->first);
  }
  return lifted;
}

}  // namespace tdfx
