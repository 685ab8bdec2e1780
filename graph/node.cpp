#include "tdfx/graph/node.h"

#include <algorithm>
#include <optional>
#include <ostream>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/graph.h"

namespace tdfx {

bool TensorMeta::follows_batch(size_t dim) const {
  return std::find(batch_dims.begin(), batch_dims.end(), static_cast<int64_t>(dim)) !=
         batch_dims.end();
}

bool TensorMeta::prints_symbolic(size_t dim) const {
  return follows_batch(dim) && shape && dim < shape->size() && (*shape)[dim] >= 2;
}

const SizeExpr* TensorMeta::derived(size_t dim) const {
  for (const DerivedDim& d : derived_dims) {
    if (d.dim == static_cast<int64_t>(dim)) return &d.size;
  }
  return nullptr;
}

std::string TensorMeta::dim_str(size_t dim) const {
  if (prints_symbolic(dim)) return "s0";
  if (const SizeExpr* size = derived(dim)) return size->str();
  return shape && dim < shape->size() ? std::to_string((*shape)[dim]) : "?";
}

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

bool OrderedNodeSet::contains(const Node* node) const {
  if (!index_.empty()) return index_.count(node) != 0;
  return std::find(items_.begin(), items_.end(), node) != items_.end();
}

bool OrderedNodeSet::insert(Node* node) {
  if (index_.empty()) {
    if (std::find(items_.begin(), items_.end(), node) != items_.end()) return false;
    items_.push_back(node);
    ++size_;
    // Small sets have no holes: slots are positions.
    if (items_.size() >= kIndexedFrom) {
      for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i], i);
    }
    return true;
  }
  if (!index_.emplace(node, items_.size()).second) return false;
  items_.push_back(node);
  ++size_;
  return true;
}

bool OrderedNodeSet::erase(const Node* node) {
  if (index_.empty()) {
    auto it = std::find(items_.begin(), items_.end(), node);
    if (it == items_.end()) return false;
    items_.erase(it);
    --size_;
    return true;
  }
  auto it = index_.find(node);
  if (it == index_.end()) return false;
  items_[it->second] = nullptr;
  index_.erase(it);
  --size_;
  // Each hole is stepped over once.
  while (first_ < items_.size() && items_[first_] == nullptr) ++first_;
  // Each compaction follows at least as many removals as it moves nodes.
  if (items_.size() - size_ > size_) compact();
  return true;
}

void OrderedNodeSet::clear() {
  items_.clear();
  index_.clear();
  size_ = 0;
  first_ = 0;
}

void OrderedNodeSet::compact() {
  items_.erase(std::remove(items_.begin(), items_.end(), nullptr), items_.end());
  index_.clear();
  first_ = 0;
  if (items_.size() < kIndexedFrom) return;
  for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i], i);
}

std::ostream& operator<<(std::ostream& os, OpCode op) { return os << to_string(op); }

Node::Node(Graph* const* home, std::string name, OpCode op, Target target)
    : home_(home), name_(std::move(name)), op_(op), target_(std::move(target)) {}

Graph& Node::graph() const {
  if (home_ == nullptr) fail<GraphError>("%{} was erased from its graph", name_);
  return **home_;
}

namespace {

// Appends the nodes of `arg` not yet in `inputs`. A set only for wide nodes (an output of a
// long pipeline reads thousands); no std::function, as every pass asks for inputs.
void collect_inputs(const Argument& arg, InputNodes& inputs,
                    std::optional<std::unordered_set<Node*>>& seen) {
  if (arg.is<Node*>()) {
    Node* n = arg.as<Node*>();
    if (inputs.size() < 16) {
      if (inputs.contains(n)) return;
    } else {
      if (!seen) seen.emplace(inputs.begin(), inputs.end());
      if (!seen->insert(n).second) return;
    }
    inputs.push_back(n);
  } else if (arg.is<ArgumentList>()) {
    for (const auto& item : arg.as<ArgumentList>().items) collect_inputs(item, inputs, seen);
  }
}

}  // namespace

InputNodes Node::input_nodes() const {
  InputNodes inputs;
  std::optional<std::unordered_set<Node*>> seen;  // made for a node with many inputs only
  for (const auto& arg : args_) collect_inputs(arg, inputs, seen);
  for (const auto& [key, arg] : kwargs_) collect_inputs(arg, inputs, seen);
  return inputs;
}

namespace {

// Calls fn on every node `arg` holds, duplicates included, without a list of them.
template <class Fn>
void visit_nodes(const Argument& arg, Fn& fn) {
  if (arg.is<Node*>()) {
    fn(arg.as<Node*>());
  } else if (arg.is<ArgumentList>()) {
    for (const auto& item : arg.as<ArgumentList>().items) visit_nodes(item, fn);
  }
}

}  // namespace

// A users set holds a node once: inserting or erasing it again is a no-op.
void Node::add_uses() {
  auto add = [this](Node* input) { input->users_.insert(this); };
  for (const auto& arg : args_) visit_nodes(arg, add);
  for (const auto& [key, arg] : kwargs_) visit_nodes(arg, add);
}

void Node::remove_uses() {
  auto remove = [this](Node* input) { input->users_.erase(this); };
  for (const auto& arg : args_) visit_nodes(arg, remove);
  for (const auto& [key, arg] : kwargs_) visit_nodes(arg, remove);
}

void Node::check_arguments(const Graph* graph, Who who, const Args& args, const Kwargs& kwargs) {
  auto check_node = [&](Node* n) {
    if (n == nullptr) fail<GraphError>("{}: an argument is a null Node*", who());
    if (n->home_ == nullptr) fail<GraphError>("{}: argument %{} was erased", who(), n->name());
    if (n->owner() != graph) {
      fail<GraphError>("{}: argument %{} belongs to another graph", who(), n->name());
    }
  };
  for (const auto& arg : args) for_each_node(arg, check_node);
  for (size_t i = 0; i < kwargs.size(); ++i) {
    const std::string& key = kwargs[i].first;
    // Keyword names are printed as they are in code: only identifiers, once each.
    if (!is_python_identifier(key)) {
      fail<GraphError>("{}: keyword argument {} is not an identifier", who(), python_repr(key));
    }
    for (size_t j = 0; j < i; ++j) {
      if (kwargs[j].first == key) {
        fail<GraphError>("{}: keyword argument '{}' repeats", who(), key);
      }
    }
    for_each_node(kwargs[i].second, check_node);
  }
}

void Node::check_target(OpCode op, const Target& target, Who who) {
  if (op != OpCode::kCallMethod && op != OpCode::kPlaceholder) return;
  const bool identifier = is_python_identifier(target.str()) && !is_python_keyword(target.str());
  if (op == OpCode::kCallMethod && !identifier) {
    // Printed as `x.method(...)`.
    fail<GraphError>("{}call_method target {} is not a method name", who(),
                     python_repr(target.str()));
  }
  if (op == OpCode::kPlaceholder && !identifier) {
    // The target is the forward's parameter name in printed code.
    fail<GraphError>("{}placeholder target {} is not an identifier (or is a Python keyword)", who(),
                     python_repr(target.str()));
  }
}

void Node::set_target(Target target) {
  Graph& owner = graph();
  check_target(op_, target, [this] { return "%" + name_ + ": "; });
  // A call_module's body is the recorded code of the module it named: retargeted, the node
  // calls the module at its new target (as FX's call_module does), not the old body.
  if (op_ == OpCode::kCallModule && !(target.str() == target_.str())) body_.reset();
  target_ = std::move(target);
  owner.bump_generation();
}

void Node::set_args(Args args) {
  check_arguments(&graph(), [this] { return "%" + name_; }, args, {});
  remove_uses();
  args_ = std::move(args);
  add_uses();
  graph().bump_generation();
}

void Node::set_kwargs(Kwargs kwargs) {
  check_arguments(
      &graph(), [this] { return "%" + name_; }, {}, kwargs);
  remove_uses();
  kwargs_ = std::move(kwargs);
  add_uses();
  graph().bump_generation();
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
  if (new_input == nullptr || new_input->owner() != &graph()) {
    fail<GraphError>("%{}: the replacement input is null or belongs to another graph", name_);
  }
  auto swap = [&](Node* n) { return n == old_input ? new_input : n; };
  remove_uses();
  for (auto& arg : args_) arg = map_nodes(arg, swap);
  for (auto& [key, arg] : kwargs_) arg = map_nodes(arg, swap);
  add_uses();
  graph().bump_generation();
}

std::vector<Node*> Node::replace_all_uses_with(Node* replacement) {
  if (replacement == this) return {};
  if (replacement == nullptr) fail<GraphError>("cannot replace %{} with a null Node*", name_);
  if (replacement->owner() != &graph()) {
    fail<GraphError>("cannot replace %{} with %{}: the nodes belong to different graphs", name_,
                     replacement->name());
  }
  const std::vector<Node*> users = users_.to_vector();
  for (Node* user : users) user->replace_input_with(this, replacement);
  return users;
}

void Node::set_body(std::shared_ptr<const Graph> body) {
  Graph& owner = graph();
  body_ = std::move(body);
  owner.bump_generation();
}

const Argument* Node::kwarg(std::string_view name) const {
  for (const auto& [key, arg] : kwargs_) {
    if (key == name) return &arg;
  }
  return nullptr;
}

}  // namespace tdfx
