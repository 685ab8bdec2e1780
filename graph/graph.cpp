#include "tdfx/graph/graph.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <new>
#include <string_view>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/effects.h"

namespace tdfx {
namespace {

// torch.fx's _target_to_str: the name a node gets when none is given.
std::string default_name(OpCode op, const Target& target) {
  if (op == OpCode::kCallFunction && target.is_aten()) return target.op_name();
  if (target.is_getitem()) return "getitem";
  if (target.is_size_arith()) return target.op_name();
  return snake_case(target.str());
}

// One counter for every graph: a stamp names one state of one graph.
uint64_t next_generation() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

Graph::InsertGuard::InsertGuard(Graph& graph, Node* before)
    : graph_(graph), previous_(graph.insert_before_) {
  graph_.insert_before_ = before;
}

Graph::InsertGuard::~InsertGuard() { graph_.insert_before_ = previous_; }

// Storage for kNodesPerBlock nodes, constructed in place one by one.
struct Graph::NodeBlock {
  static constexpr size_t kNodesPerBlock = 64;
  alignas(Node) std::byte bytes[kNodesPerBlock * sizeof(Node)];
};

Graph::Graph() : generation_(next_generation()) {}
Graph::~Graph() { destroy_nodes(); }

void Graph::destroy_nodes() noexcept {
  // Drop every edge first so that destruction order does not matter.
  for (Node* node : owned_) node->users_.clear();
  for (Node* node : owned_) node->~Node();
  owned_.clear();
  blocks_.clear();
  first_ = last_ = nullptr;
  size_ = 0;
}

void* Graph::node_storage() {
  const size_t slot = owned_.size() % NodeBlock::kNodesPerBlock;
  if (blocks_.size() * NodeBlock::kNodesPerBlock == owned_.size()) {
    blocks_.push_back(std::unique_ptr<NodeBlock>(new NodeBlock));  // left uninitialised
  }
  // Room to record the node, so that recording it cannot throw (grown geometrically).
  if (owned_.size() == owned_.capacity()) owned_.reserve(std::max<size_t>(64, 2 * owned_.size()));
  return blocks_.back()->bytes + slot * sizeof(Node);
}

void Graph::link_before(Node* node, Node* before) {
  node->next_ = before;
  node->prev_ = before ? before->prev_ : last_;
  (node->prev_ ? node->prev_->next_ : first_) = node;
  (before ? before->prev_ : last_) = node;
  ++size_;
}

void Graph::unlink(Node* node) {
  (node->prev_ ? node->prev_->next_ : first_) = node->next_;
  (node->next_ ? node->next_->prev_ : last_) = node->prev_;
  node->prev_ = nullptr;  // next_ stays: see Node::next_
  --size_;
}

Graph::Graph(Graph&& other) noexcept : generation_(0) { *this = std::move(other); }

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  destroy_nodes();
  first_ = other.first_;
  last_ = other.last_;
  size_ = other.size_;
  owned_ = std::move(other.owned_);
  blocks_ = std::move(other.blocks_);
  names_ = std::move(other.names_);
  insert_before_ = other.insert_before_;
  generation_ = other.generation_;
  // The nodes keep their home cell, which now holds this graph's address: a move is O(1). This
  // graph's old cell, if any, goes to the emptied graph (its nodes were destroyed above).
  std::swap(home_, other.home_);
  if (home_) *home_ = this;
  if (other.home_) *other.home_ = &other;
  other.insert_before_ = nullptr;
  other.first_ = other.last_ = nullptr;
  other.size_ = 0;
  other.owned_.clear();
  other.blocks_.clear();
  other.generation_ = next_generation();
  return *this;
}

Graph* const* Graph::home() {
  if (!home_) home_ = std::make_unique<Graph*>(this);
  return home_.get();
}

void Graph::bump_generation() { generation_ = next_generation(); }

std::vector<Node*> Graph::node_list() const {
  std::vector<Node*> out;
  out.reserve(size_);
  for (Node* node = first_; node; node = node->next_) out.push_back(node);
  return out;
}

Node* Graph::create_node(OpCode op, Target target, Args args, Kwargs kwargs,
                         const std::string& name_hint) {
  if (op == OpCode::kOutput && output_node() != nullptr) {
    fail<GraphError>("graph already has an output node %{}", output_node()->name());
  }
  Node::check_arguments(
      this,
      [&] {
        return "cannot create %" + (name_hint.empty() ? default_name(op, target) : name_hint);
      },
      args, kwargs);
  Node::check_target(op, target, [] { return std::string(); });
  std::string name = names_.create_name(name_hint.empty() ? default_name(op, target) : name_hint);
  Node* raw = new (node_storage()) Node(home(), std::move(name), op, std::move(target));
  raw->index_ = owned_.size();
  owned_.push_back(raw);  // room was reserved: cannot throw
  // Appending goes before an existing output node, which stays last.
  Node* before = insert_before_ ? insert_before_ : output_node();
  link_before(raw, op != OpCode::kOutput ? before : nullptr);
  raw->args_ = std::move(args);
  raw->kwargs_ = std::move(kwargs);
  raw->add_uses();
  bump_generation();
  return raw;
}

Node* Graph::placeholder(const std::string& name) {
  Node* node = create_node(OpCode::kPlaceholder, Target(name), {}, {}, name);
  // torch.fx keeps the requested name as the target even when the node's
  // name had to change, so the forward signature keeps it.
  return node;
}

Node* Graph::get_attr(const std::string& path) {
  return create_node(OpCode::kGetAttr, Target(path));
}

Node* Graph::call_function(Target target, Args args, Kwargs kwargs) {
  return create_node(OpCode::kCallFunction, std::move(target), std::move(args), std::move(kwargs));
}

Node* Graph::call_method(Target method, Args args, Kwargs kwargs) {
  return create_node(OpCode::kCallMethod, std::move(method), std::move(args), std::move(kwargs));
}

Node* Graph::call_module(const std::string& path, Args args, Kwargs kwargs) {
  return create_node(OpCode::kCallModule, Target(path), std::move(args), std::move(kwargs));
}

Node* Graph::output(Argument result) {
  return create_node(OpCode::kOutput, Target("output"), {std::move(result)});
}

Node* Graph::output_node() const {
  if (!last_ || last_->op_ != OpCode::kOutput) return nullptr;
  return last_;
}

Graph::InsertGuard Graph::inserting_before(Node* node) {
  if (node->owner() != this) fail<GraphError>("%{} is not a node of this graph", node->name());
  return InsertGuard(*this, node);
}

Graph::InsertGuard Graph::inserting_after(Node* node) {
  if (node->owner() != this) fail<GraphError>("%{} is not a node of this graph", node->name());
  return InsertGuard(*this, node->next_);
}

void Graph::erase_node(Node* node) {
  if (node->owner() != this) fail<GraphError>("%{} is not a node of this graph", node->name());
  if (!node->users_.empty()) {
    std::string users;
    for (Node* user : node->users_) users += (users.empty() ? "%" : ", %") + user->name();
    fail<GraphError>("cannot erase %{}: it still has {} user(s): {}", node->name(),
                     node->users_.size(), users);
  }
  if (insert_before_ == node) insert_before_ = nullptr;
  node->remove_uses();
  unlink(node);
  // The node stays allocated (owned_) as a handle that no longer belongs to a graph.
  node->home_ = nullptr;
  bump_generation();
}

void Graph::rename(Node* node, const std::string& name) {
  if (node->name_ == name) return;
  if (!is_python_identifier(name) || Namespace::is_reserved(name)) {
    fail<GraphError>("cannot rename %{} to '{}': not a legal, unreserved identifier", node->name_,
                     name);
  }
  for (const auto& other : nodes()) {
    if (other->name_ == name) {
      fail<GraphError>("cannot rename %{} to '{}': the name is taken", node->name_, name);
    }
  }
  names_.reserve(name);
  node->name_ = name;
  bump_generation();
}

void Graph::rename_fresh(Node* node, std::string_view hint) {
  if (node->owner() != this) fail<GraphError>("%{} is not a node of this graph", node->name());
  node->name_ = names_.create_name(hint);
  bump_generation();
}

void Graph::lift_to_placeholder(Node* node, std::string name, Node* before) {
  if (node->owner() != this) fail<GraphError>("%{} is not a node of this graph", node->name());
  if (node->op_ != OpCode::kGetAttr) {
    fail<GraphError>("cannot lift %{} to a placeholder: it is a {}, not a get_attr", node->name(),
                     to_string(node->op_));
  }
  if (before && before->owner() != this) {
    fail<GraphError>("%{} is not a node of this graph", before->name());
  }
  Target target(std::move(name));
  Node::check_target(OpCode::kPlaceholder, target,
                     [&] { return "cannot lift %" + node->name_ + ": "; });
  node->op_ = OpCode::kPlaceholder;
  node->name_ = names_.create_name(target.str());
  node->target_ = std::move(target);
  node->meta_ = NodeMeta();
  if (before && before != node && node->next_ != before) {
    if (insert_before_ == node) insert_before_ = node->next_;
    unlink(node);
    link_before(node, before);
  }
  bump_generation();
}

void Graph::rename_all(const std::function<std::string(const Node&)>& hint_of) {
  rename_keeping_generation(hint_of);
  bump_generation();
}

void Graph::rename_keeping_generation(const std::function<std::string(const Node&)>& hint_of) {
  Namespace fresh;
  for (Node* node : nodes()) {
    const std::string hint = hint_of(*node);
    node->name_ = fresh.create_name(hint.empty() ? default_name(node->op_, node->target_) : hint);
  }
  names_ = std::move(fresh);
}

Node* Graph::node_copy(const Node& node, const std::function<Node*(Node*)>& arg_map) {
  Args args;
  for (const auto& arg : node.args_) args.push_back(map_nodes(arg, arg_map));
  Kwargs kwargs;
  for (const auto& [key, arg] : node.kwargs_) kwargs.emplace_back(key, map_nodes(arg, arg_map));
  Node* copy = create_node(node.op_, node.target_, std::move(args), std::move(kwargs), node.name_);
  copy->meta_ = node.meta_;
  copy->body_ = node.body_;
  return copy;
}

Argument Graph::graph_copy(const Graph& other, std::unordered_map<const Node*, Node*>& value_map) {
  auto lookup = [&](Node* n) -> Node* {
    auto it = value_map.find(n);
    if (it == value_map.end()) throw InternalError("graph_copy: %" + n->name() + " not copied yet");
    return it->second;
  };
  for (const auto& node : other.nodes()) {
    if (node->op_ == OpCode::kOutput) {
      return map_nodes(node->args_.at(0), lookup);
    }
    if (value_map.count(node)) continue;  // pre-seeded (bound placeholder)
    value_map[node] = node_copy(*node, lookup);
  }
  return None{};
}

Graph Graph::copy() const {
  Graph out;
  std::unordered_map<const Node*, Node*> value_map;
  Argument result = out.graph_copy(*this, value_map);
  if (output_node() != nullptr) out.output(std::move(result));
  return out;
}

size_t Graph::eliminate_dead_code() {
  size_t erased = 0;
  const auto order = node_list();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    if (!node->users_.empty()) continue;
    if (node->op_ == OpCode::kPlaceholder || node->op_ == OpCode::kOutput) continue;
    if (has_effect(*node)) continue;  // called for what it does, not its result
    erase_node(node);
    ++erased;
  }
  return erased;
}

void Graph::lint() const {
  NodeSet defined;          // the nodes before the one checked (the ownership check comes first)
  size_t edges = 0;         // (input, reader) pairs, each input once per reader
  size_t listed_users = 0;  // entries of all users sets
  for (const Node* node : nodes()) {
    if (node->owner() != this) fail<GraphError>("lint: %{} is owned by another graph", node->name_);
    if (node->op_ == OpCode::kOutput && node->next_ != nullptr) {
      fail<GraphError>("lint: output node %{} is not the last node", node->name_);
    }
    if (node->op_ == OpCode::kPlaceholder || node->op_ == OpCode::kCallMethod) {
      Node::check_target(node->op_, node->target_,
                         [node] { return "lint: %" + node->name_ + ": "; });
    }
    if (node->op_ == OpCode::kCallFunction && !node->target_.is_aten() &&
        !node->target_.is_getitem() && !node->target_.is_size_arith()) {
      fail<GraphError>("lint: %{} calls '{}', which is neither an aten operator nor a builtin",
                       node->name_, node->target_.str());
    }
    for (const Node* input : node->input_nodes()) {
      if (input->owner() != this || !defined.contains(input)) {
        fail<GraphError>("lint: %{} reads %{}, which is not defined before it in this graph",
                         node->name_, input->name_);
      }
      // A set lists a node once at most; O(1) even for a node with thousands of users.
      if (!input->users_.contains(node)) {
        fail<GraphError>("lint: %{} reads %{} but is not listed among its users", node->name_,
                         input->name_);
      }
      ++edges;
    }
    listed_users += node->users_.size();
    defined.insert(node);
  }
  // Every edge is listed among its input's users, and a users set holds no node twice: when
  // the sets hold as many entries as there are edges, they list nothing else. Otherwise find
  // the user that does not read its node, to name it.
  if (listed_users == edges) return;
  for (const Node* node : nodes()) {
    for (const Node* user : node->users_) {
      if (user->owner() != this || !user->input_nodes().contains(node)) {
        fail<GraphError>("lint: %{} lists %{} as a user, but %{} does not read it", node->name_,
                         user->name_, user->name_);
      }
    }
  }
  throw InternalError("lint: the users sets and the edges disagree in number only");
}

std::vector<Node*> output_values(const Graph& graph) {
  std::vector<Node*> out;
  const Node* output = graph.output_node();
  if (!output || output->args().empty()) return out;
  const Argument& result = output->args()[0];
  if (result.is<ArgumentList>()) {
    for (const Argument& item : result.as<ArgumentList>().items) out.push_back(item.node());
  } else {
    out.push_back(result.node());
  }
  return out;
}

}  // namespace tdfx
