#include "graph/node.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "graph/graph.h"

namespace tdfx {

std::string_view to_string(OpCode op) {
  switch (op) {
    case OpCode::kPlaceholder:
      return "placeholder";
    case OpCode::kGetAttr:
      return "get_attr";
    case OpCode::kCallFunction:
      return "call_function";
    case OpCode::kCallMethod:
      return "call_method";
    case OpCode::kCallModule:
      return "call_module";
    case OpCode::kOutput:
      return "output";
  }
  return "?";
}

Node::Node(Graph* graph, std::string name, OpCode op, Target target)
    : graph_(graph), name_(std::move(name)), op_(op), target_(std::move(target)) {}

std::vector<Node*> Node::input_nodes() const {
  std::vector<Node*> inputs;
  // A set only for wide nodes (an output of a long pipeline reads thousands).
  std::unordered_set<Node*> seen;
  auto collect = [&](Node* n) {
    if (inputs.size() < 16) {
      if (std::find(inputs.begin(), inputs.end(), n) != inputs.end()) return;
    } else {
      if (seen.empty()) seen.insert(inputs.begin(), inputs.end());
      if (!seen.insert(n).second) return;
    }
    inputs.push_back(n);
  };
  for (const auto& arg : args_) for_each_node(arg, collect);
  for (const auto& [key, arg] : kwargs_) for_each_node(arg, collect);
  return inputs;
}

void Node::add_uses() {
  for (Node* input : input_nodes()) input->users_.push_back(this);
}

void Node::remove_uses() {
  for (Node* input : input_nodes()) {
    auto& users = input->users_;
    users.erase(std::remove(users.begin(), users.end(), this), users.end());
  }
}

void Node::set_args(Args args) {
  remove_uses();
  args_ = std::move(args);
  add_uses();
}

void Node::set_kwargs(Kwargs kwargs) {
  remove_uses();
  kwargs_ = std::move(kwargs);
  add_uses();
}

void Node::set_arg(size_t index, Argument arg) {
  if (index >= args_.size()) {
    fail<GraphError>("%{} has {} arguments; cannot set argument {}", name_, args_.size(), index);
  }
  Args args = args_;
  args[index] = std::move(arg);
  set_args(std::move(args));
}

void Node::replace_input_with(Node* old_input, Node* new_input) {
  auto swap = [&](Node* n) { return n == old_input ? new_input : n; };
  remove_uses();
  for (auto& arg : args_) arg = map_nodes(arg, swap);
  for (auto& [key, arg] : kwargs_) arg = map_nodes(arg, swap);
  add_uses();
}

std::vector<Node*> Node::replace_all_uses_with(Node* replacement) {
  if (replacement == this) return {};
  if (&replacement->graph() != graph_) {
    fail<GraphError>("cannot replace %{} with %{}: the nodes belong to different graphs", name_,
                     replacement->name());
  }
  const std::vector<Node*> users = users_;
  for (Node* user : users) user->replace_input_with(this, replacement);
  return users;
}

const Argument* Node::kwarg(std::string_view name) const {
  for (const auto& [key, arg] : kwargs_) {
    if (key == name) return &arg;
  }
  return nullptr;
}

}  // namespace tdfx
