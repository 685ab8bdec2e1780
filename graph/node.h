#pragma once

/// \file
/// Node: one operation of a Graph, in torch.fx's vocabulary.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/FunctionRef.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "tdfx/graph/argument.h"
#include "tdfx/graph/size_expr.h"
#include "tdfx/graph/target.h"

namespace tdfx {

class Graph;

/// What a node does; prints with its torch.fx spelling (`call_function`).
enum class OpCode { kPlaceholder, kGetAttr, kCallFunction, kCallMethod, kCallModule, kOutput };

/// The torch.fx spelling of `op`: "placeholder", "get_attr", ...
std::string_view to_string(OpCode op);
/// Writes to_string(op): `std::cout << OpCode::kCallFunction` prints `call_function`.
std::ostream& operator<<(std::ostream& os, OpCode op);

/// What is known of the value a node produces, when it is a tensor.
struct TensorMeta {
  /// The tensor's dtype, when known.
  std::optional<c10::ScalarType> dtype;
  /// The tensor's shape as traced, when known.
  std::optional<std::vector<int64_t>> shape;
  /// Set by ShapeProp; the tracer does not record strides.
  std::optional<std::vector<int64_t>> stride;
  /// The tensor's device, when known.
  std::optional<c10::Device> device;
  /// The dimensions that follow the batch size, which the graph runs at any
  /// value of.
  std::vector<int64_t> batch_dims;
  /// The dimensions that are another function of the batch size (`s0*2` where attention
  /// reshapes to [T, B*heads, d]), in order of dimension; none of them in batch_dims.
  std::vector<DerivedDim> derived_dims;

  /// True when dimension `dim` follows the batch size.
  bool follows_batch(size_t dim) const;
  /// The function of the batch dimension `dim` is, when it is one (derived_dims).
  const SizeExpr* derived(size_t dim) const;
  /// True when dimension `dim` follows the batch size and prints as `s0`, as
  /// torch.export prints a dynamic dimension: a traced size of 0 or 1 prints
  /// as itself, as torch.export specialises those (`f32[1, 3]`).
  bool prints_symbolic(size_t dim) const;
  /// Dimension `dim` as a signature prints it: `s0` (prints_symbolic), `s0*2` (derived), or
  /// its traced size.
  std::string dim_str(size_t dim) const;
};

/// Facts attached to a node by the tracer and passes.
struct NodeMeta {
  /// Set when the node produces one tensor.
  TensorMeta tensor;
  /// Path of the module whose forward produced the node ("module.0.module"), "" at the root.
  std::string module_path;
  /// That module's description (`Linear(in_features=3, out_features=4, bias=true)`).
  std::string module_type;
  /// Path of the TensorDictModule whose call produced the node ("0", "0.module.1"),
  /// "" outside any; diagrams draw one box per TensorDictModule from it.
  std::string td_module;
  /// For a node of a graph built to run another one (a call_module's body
  /// inlined, or TDGraphModule's flat graph): the node as the user saw it
  /// printed (`%_0_fc1 = call_module[target=0.module.fc1](...)`), so errors
  /// name it. "" when the node is the one printed.
  std::string shown_as;
};

/// An insertion-ordered set of nodes: a node's users. Iterates in the order
/// nodes were added (`#users` and FX's printed order depend on it); insertion,
/// removal and `contains` are O(1) amortised, so removing one of 16,000 users
/// or linting a node that has them stays linear. Small sets are a plain
/// vector; from kIndexedFrom nodes on, an index by node finds a node's slot and
/// a removal leaves a hole that is compacted away once holes outnumber nodes.
class OrderedNodeSet {
 public:
  /// Iterates the nodes in insertion order as `Node*`, skipping holes.
  class Iterator {
   public:
    ///@{
    /// A forward iterator's member types.
    using iterator_category = std::forward_iterator_tag;
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using pointer = Node* const*;
    using reference = Node*;
    ///@}

    /// An iterator at the first node from `at` on, before `end`.
    Iterator(Node* const* at, Node* const* end) : at_(at), end_(end) { skip(); }
    ///@{
    /// The node it is at; moving on (++) goes to the next node, skipping holes.
    Node* operator*() const { return *at_; }
    Iterator& operator++() {
      ++at_;
      skip();
      return *this;
    }
    ///@}
    ///@{
    /// Whether two iterators are at the same slot, or at different ones.
    bool operator==(const Iterator& other) const { return at_ == other.at_; }
    bool operator!=(const Iterator& other) const { return at_ != other.at_; }
    ///@}

   private:
    void skip() {
      while (at_ != end_ && *at_ == nullptr) ++at_;
    }
    Node* const* at_;
    Node* const* end_;
  };

  /// From this size on, the set keeps an index by node.
  static constexpr size_t kIndexedFrom = 16;

  ///@{
  /// The nodes in insertion order, for range-for loops.
  Iterator begin() const { return {items_.data() + first_, items_.data() + items_.size()}; }
  Iterator end() const {
    const auto end = items_.data() + items_.size();
    return {end, end};
  }
  ///@}
  ///@{
  /// How many nodes it holds, and whether it holds none.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  ///@}
  /// The oldest node; the set must not be empty.
  Node* front() const { return *begin(); }
  /// True when `node` is in the set.
  bool contains(const Node* node) const;
  /// The nodes in insertion order.
  std::vector<Node*> to_vector() const { return {begin(), end()}; }

 private:
  friend class Node;
  friend class Graph;

  /// Adds `node` last unless present; returns whether it was added.
  bool insert(Node* node);
  /// Removes `node` if present; returns whether it was.
  bool erase(const Node* node);
  void clear();
  void compact();

  std::vector<Node*> items_;  // nullptr: a removed node's hole (only while indexed)
  std::unordered_map<const Node*, size_t> index_;  // node → slot; empty below kIndexedFrom
  size_t size_ = 0;
  // The first slot that may hold a node: begin() does not walk the holes that
  // removing the oldest users leaves.
  size_t first_ = 0;
};

/// The distinct nodes one node reads (Node::input_nodes()), in order of appearance: up to
/// eight are held inline, so that asking a node for its inputs — every pass does, for every
/// node — allocates nothing for most nodes.
class InputNodes {
 public:
  InputNodes() = default;
  ///@{
  /// The nodes in order, as a range of `Node*`.
  Node* const* begin() const { return data(); }
  Node* const* end() const { return data() + size_; }
  ///@}
  ///@{
  /// How many nodes it holds, and whether it holds none.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  ///@}
  /// The `i`th node.
  Node* operator[](size_t i) const { return data()[i]; }
  /// True when `node` is one of them.
  bool contains(const Node* node) const { return std::find(begin(), end(), node) != end(); }
  /// The nodes as a vector.
  std::vector<Node*> to_vector() const { return {begin(), end()}; }
  /// Appends `node` (the caller keeps them distinct).
  void push_back(Node* node) {
    if (size_ < kInline) {
      inline_[size_++] = node;
      return;
    }
    if (size_ == kInline) spilled_.assign(inline_, inline_ + kInline);
    spilled_.push_back(node);
    ++size_;
  }

 private:
  static constexpr size_t kInline = 8;
  Node* const* data() const { return size_ <= kInline ? inline_ : spilled_.data(); }
  Node* inline_[kInline] = {};
  std::vector<Node*> spilled_;  // all of them, once there are more than kInline
  size_t size_ = 0;
};

/// One operation of a Graph. Owned by its graph; `Node*` is a non-owning
/// handle that stays valid until the node is erased. Its users are kept up to
/// date by the graph: every edit of args goes through the node's setters.
class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// The node's name, unique in its graph (`relu`, `_0_fc1`).
  const std::string& name() const { return name_; }
  /// What it does: placeholder, get_attr, call_function, call_method, call_module or output.
  OpCode op() const { return op_; }
  /// What it calls or names: an aten operator, a method, a module path, an attribute path, a
  /// placeholder's name.
  const Target& target() const { return target_; }
  /// Its positional arguments.
  const Args& args() const { return args_; }
  /// Its keyword arguments, by name.
  const Kwargs& kwargs() const { return kwargs_; }
  /// The nodes that read this one, in the order they started to.
  const OrderedNodeSet& users() const { return users_; }
  /// Every distinct node read by args and kwargs, in order of appearance.
  InputNodes input_nodes() const;
  /// The graph this node is in. GraphError once the node was erased.
  Graph& graph() const;
  /// The node's number in its graph: unique, in creation order, never reused (an erased
  /// node keeps its own). Passes keep per-node facts in tables indexed by it (NodeTable)
  /// rather than in hash maps keyed by Node*.
  size_t index() const { return index_; }
  /// True once erase_node removed this node: it stays a valid handle (name, op, target,
  /// arguments readable) until its graph dies, but cannot be edited or used as an argument.
  bool erased() const { return home_ == nullptr; }

  ///@{
  /// What the tracer and passes know of it (NodeMeta): module, tensor dtype and shape, ...
  NodeMeta& meta() { return meta_; }
  const NodeMeta& meta() const { return meta_; }
  ///@}

  /// For call_module: the module's op-level body, a graph whose placeholders
  /// are the call's arguments and whose get_attr targets are relative to the
  /// module. Null when unknown.
  const std::shared_ptr<const Graph>& body() const { return body_; }
  /// Replaces the body; an edit of the graph (it changes what the node runs).
  void set_body(std::shared_ptr<const Graph> body);

  /// Replaces the target, keeping name and arguments (torch.fx's `node.target = ...`).
  /// A placeholder's or call_method's target must be an identifier; lint() checks
  /// the rest (a call_function calls an aten operator or getitem).
  ///
  ///     before: %relu = call_function[target=torch.relu](args = (%x,))
  ///     relu->set_target(Target::aten("aten::sigmoid"))
  ///     after:  %relu = call_function[target=torch.sigmoid](args = (%x,))
  ///
  /// A call_module given another target loses its body: it calls the module at the new
  /// target, as FX's call_module does.
  void set_target(Target target);
  /// Replaces the positional arguments, updating users.
  void set_args(Args args);
  /// Replaces the keyword arguments, updating users.
  void set_kwargs(Kwargs kwargs);
  /// Replaces one positional argument, updating users.
  void set_arg(size_t index, Argument arg);
  /// Makes every read of `old_input` in this node read `new_input`.
  void replace_input_with(Node* old_input, Node* new_input);
  /// Makes every user of this node read `replacement` instead; returns those users.
  ///
  ///     before: %b = relu(%a); %c = neg(%b)      b.replace_all_uses_with(a)
  ///     after:  %b = relu(%a); %c = neg(%a)      (%b now has no users)
  std::vector<Node*> replace_all_uses_with(Node* replacement);

  /// The keyword argument `name`, or nullptr.
  const Argument* kwarg(std::string_view name) const;

 private:
  friend class Graph;
  Node(Graph* const* home, std::string name, OpCode op, Target target);
  /// The graph that owns this node, nullptr once erased.
  Graph* owner() const { return home_ ? *home_ : nullptr; }

  void add_uses();
  void remove_uses();
  // What starts a check's message (`lint: %relu: `), made only when the check fails: the
  // checks run for every node created or linted.
  // (A reference to the caller's lambda, not a std::function: no allocation per node.)
  using Who = c10::function_ref<std::string()>;
  // GraphError unless a placeholder's or call_method's target is an identifier (not a
  // keyword); `who` starts the message.
  static void check_target(OpCode op, const Target& target, Who who);
  // GraphError unless every node argument is a non-null node of `graph` and
  // every keyword name is an identifier given once; `who` starts the message.
  static void check_arguments(const Graph* graph, Who who, const Args& args, const Kwargs& kwargs);

  // The graph's home cell (Graph::home_), which holds the graph's address: a moved graph
  // updates the one cell, not every node. Null once erased.
  Graph* const* home_;
  size_t index_ = 0;
  std::string name_;
  OpCode op_;
  Target target_;
  Args args_;
  Kwargs kwargs_;
  OrderedNodeSet users_;
  NodeMeta meta_;
  std::shared_ptr<const Graph> body_;
  // The graph's node order, linked through the nodes themselves: a walk touches only nodes.
  // An erased node keeps `next_` (its last successor) and loses `prev_`.
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
};

/// Per-node facts of one graph's nodes, indexed by Node::index(): what a pass keeps for each
/// node without a hash map keyed by Node*. A node never set reads as `fallback`. Only nodes of
/// one graph may be used with one table (their indices are unique within it).
///
///     NodeTable<size_t> call_of(kNone);
///     call_of.set(node, 3);
///     call_of.get(node);   // 3;   call_of.get(other) is kNone
template <class T>
class NodeTable {
  static_assert(!std::is_same_v<T, bool>, "NodeTable<char> for flags: vector<bool> has no refs");

 public:
  /// A table where every node reads as `fallback` until set.
  explicit NodeTable(T fallback = T()) : fallback_(std::move(fallback)) {}
  /// Sets `node`'s value.
  void set(const Node* node, T value) {
    const size_t i = node->index();
    // Grown by half again, as NodeSet does: a pass sets its nodes in index order.
    if (i >= values_.size()) values_.resize(i + 1 + i / 2, fallback_);
    values_[i] = std::move(value);
  }
  /// `node`'s value, or the fallback when it was never set.
  const T& get(const Node* node) const {
    const size_t i = node->index();
    return i < values_.size() ? values_[i] : fallback_;
  }

 private:
  std::vector<T> values_;
  T fallback_;
};

/// A set of one graph's nodes, by Node::index(): insert and lookup without hashing, and
/// clear() in constant time (it moves to a new stamp), so that one set serves a pass's many
/// small uses (one per call, one per leaf) without allocating again.
///
///     NodeSet seen;
///     seen.insert(node);   // true: new
///     seen.contains(node); // true
///     seen.clear();        // seen.contains(node) is false
class NodeSet {
 public:
  /// Adds `node`; true when it was not in the set.
  bool insert(const Node* node) {
    const size_t i = node->index();
    if (i >= stamps_.size()) stamps_.resize(i + 1 + i / 2, 0);
    if (stamps_[i] == stamp_) return false;
    stamps_[i] = stamp_;
    return true;
  }
  /// True when `node` was inserted since the last clear().
  bool contains(const Node* node) const {
    const size_t i = node->index();
    return i < stamps_.size() && stamps_[i] == stamp_;
  }
  /// Empties the set, in constant time.
  void clear() {
    if (++stamp_ == 0) {  // wrapped: every old stamp could read as current
      std::fill(stamps_.begin(), stamps_.end(), 0);
      stamp_ = 1;
    }
  }

 private:
  std::vector<uint32_t> stamps_;
  uint32_t stamp_ = 1;
};

}  // namespace tdfx

/// `fmt::format("{}", OpCode::kGetAttr)` is `get_attr`; string format specs apply.
template <>
struct fmt::formatter<tdfx::OpCode> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(tdfx::OpCode op, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tdfx::to_string(op), ctx);
  }
};
