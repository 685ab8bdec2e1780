#pragma once

/// \file
/// Graph: the tdfx IR — an ordered list of nodes owned by the graph, printed
/// and named as torch.fx does.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <unordered_map>

#include "tdfx/graph/namespace.h"
#include "tdfx/graph/node.h"

namespace tdfx {

/// An ordered list of nodes, in program order. Owns its nodes; movable, not
/// copyable (`copy()` is explicit). Every name is unique (torch.fx's rules).
///
///     Graph g;
///     Node* x = g.placeholder("x");
///     Node* r = g.call_function(Target::aten("aten::relu"), {x});
///     g.output(r);
///     std::cout << g;   // graph(): %x : [#users=1] = placeholder[target=x] ...
class Graph {
 public:
  /// Iterates the nodes as `Node*`, in program order: `for (Node* n : graph.nodes())`,
  /// `for (auto& n : graph.nodes())` (a `Node* const&`, valid until the iterator moves on).
  class Iterator {
   public:
    ///@{
    /// A forward iterator's member types.
    using iterator_category = std::forward_iterator_tag;
    using value_type = Node*;
    using difference_type = std::ptrdiff_t;
    using pointer = Node* const*;
    using reference = Node* const&;
    ///@}

    Iterator() = default;
    /// An iterator at `node`; nullptr is the end.
    explicit Iterator(Node* node) : node_(node) {}
    ///@{
    /// The node it is at, and a pointer to it; moving on (++) goes to the next node.
    reference operator*() const { return node_; }
    pointer operator->() const { return &node_; }
    Iterator& operator++() {
      node_ = node_->next_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      node_ = node_->next_;
      return before;
    }
    ///@}
    ///@{
    /// Whether two iterators are at different nodes, or at the same.
    bool operator!=(const Iterator& other) const { return node_ != other.node_; }
    bool operator==(const Iterator& other) const { return node_ == other.node_; }
    ///@}

   private:
    Node* node_ = nullptr;
  };

  /// A view of the nodes for range-for loops.
  struct NodeRange {
    ///@{
    /// Where the range begins and ends, which begin() and end() return.
    Iterator b, e;
    Iterator begin() const { return b; }
    Iterator end() const { return e; }
    ///@}
  };

  /// Restores the previous insert point when it goes out of scope.
  class InsertGuard {
   public:
    /// Makes `graph` insert new nodes before `before` (nullptr: at the end) until the guard goes
    /// out of scope.
    InsertGuard(Graph& graph, Node* before);
    ~InsertGuard();
    InsertGuard(const InsertGuard&) = delete;
    InsertGuard& operator=(const InsertGuard&) = delete;

   private:
    Graph& graph_;
    Node* previous_;
  };

  Graph();
  ~Graph();
  /// Moves the nodes; the graph moved from is left empty.
  Graph(Graph&&) noexcept;
  /// Moves the nodes; the graph moved from is left empty.
  Graph& operator=(Graph&&) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// The nodes in program order, for range-for loops.
  NodeRange nodes() const { return {Iterator(first_), Iterator(nullptr)}; }
  /// How many nodes the graph has.
  size_t size() const { return size_; }
  /// The nodes as a vector, for reverse walks and indexing.
  std::vector<Node*> node_list() const;

  /// Creates a node at the insert point (the end, before any output node,
  /// unless a guard says otherwise). Its name is `name_hint` made unique, or derived from the
  /// target as torch.fx does (`relu`, `getitem`, `_0_fc1`).
  Node* create_node(OpCode op, Target target, Args args = {}, Kwargs kwargs = {},
                    const std::string& name_hint = "");
  ///@{
  /// torch.fx's node makers: create_node with that opcode, the target named (a placeholder keeps
  /// `name` as its target when its node name had to change), at the insert point.
  Node* placeholder(const std::string& name);
  Node* get_attr(const std::string& path);
  Node* call_function(Target target, Args args, Kwargs kwargs = {});
  ///@}
  /// `x.method(...)`: a plain method name prints but cannot run; Target::method(op) runs op.
  Node* call_method(Target method, Args args, Kwargs kwargs = {});
  /// A call_module node calling the module at `path` in the root.
  Node* call_module(const std::string& path, Args args, Kwargs kwargs = {});
  /// The output node; at most one per graph, and the last node.
  Node* output(Argument result);
  /// The output node, or nullptr.
  Node* output_node() const;

  /// Nodes created while the guard lives go before `node`.
  InsertGuard inserting_before(Node* node);
  /// Nodes created while the guard lives go after `node`, in creation order.
  InsertGuard inserting_after(Node* node);

  /// Erases a node that has no users; a node with users is a GraphError.
  void erase_node(Node* node);
  /// Renames `node` to `name` exactly; the name must be a free identifier.
  void rename(Node* node, const std::string& name);
  /// Gives `node` the name `hint` made unique, as create_node names a new node: for a pass that
  /// rewrites a node in place (fuse_linear's addmm becomes `linear`).
  void rename_fresh(Node* node, std::string_view hint);
  /// Turns `node`, a get_attr without users outside this graph, into a placeholder whose target
  /// is `name` and whose name is `name` made unique, with empty meta, moved before `before`
  /// (nullptr or `node` itself: left where it is). Its users keep reading it. What
  /// lift_parameters does to a state read, without making one node and erasing another.
  void lift_to_placeholder(Node* node, std::string name, Node* before);
  /// Names every node afresh, in order, from `hint_of(node)` made unique as create_node makes
  /// a name hint unique (`add`, `add_1`): what a pass that rewrites a graph in place gives its
  /// nodes instead of the names they had. `hint_of` sees each node before it is renamed.
  void rename_all(const std::function<std::string(const Node&)>& hint_of);
  /// Copies `node` from another graph into this one at the insert point, with
  /// every node argument mapped through `arg_map` (torch.fx's node_copy).
  Node* node_copy(const Node& node, const std::function<Node*(Node*)>& arg_map);
  /// Copies every node of `other` except its output into this graph;
  /// `value_map` receives old → new and may be pre-seeded (e.g. to bind
  /// placeholders). Returns the copied output argument, or None.
  Argument graph_copy(const Graph& other, std::unordered_map<const Node*, Node*>& value_map);
  /// A deep copy of this graph (names, meta and bodies kept).
  Graph copy() const;

  /// Erases nodes whose value is unused, last first. Keeps placeholders, the
  /// output and the nodes with an effect (has_effect, graph/effects.h: mutation, random draws,
  /// training-mode running statistics, ops that return nothing).
  /// Returns the number erased.
  ///
  ///     before: %a = relu(%x); %b = neg(%x); return a      after: %a = relu(%x); return a
  size_t eliminate_dead_code();

  /// Checks the invariants: ownership, args defined before use, users equal to
  /// the readers, one output at the end, aten targets with schemas, placeholder
  /// and call_method targets that are identifiers. Throws GraphError naming the
  /// node. (Names are not checked: the graph hands every name out itself, unique
  /// and legal, through create_node, rename and rename_all.)
  void lint() const;

  /// A stamp that changes with every edit: creating, erasing or renaming a
  /// node, or changing a node's target, arguments or body (edits of meta keep
  /// it). Stamps come from one process-wide counter, so no two states of any
  /// graphs share one; a moved graph keeps its stamp and the emptied one gets a
  /// new one. GraphModule records it when it compiles and refuses a stale plan.
  uint64_t generation() const { return generation_; }

 private:
  friend class Node;
  friend class GraphModule;  // rename_nodes: see rename_keeping_generation
  /// rename_all without a new generation(): for a graph compiled into a plan, which runs nodes,
  /// not names, and which another thread may be running (it checks generation() each run).
  void rename_keeping_generation(const std::function<std::string(const Node&)>& hint_of);
  /// Gives the graph a new generation(); every edit calls it.
  void bump_generation();
  uint64_t generation_;
  /// New nodes go before this one; nullptr appends.
  Node* insert_before_ = nullptr;
  /// The nodes in program order: a list linked through Node::prev_ and Node::next_.
  Node* first_ = nullptr;
  Node* last_ = nullptr;
  size_t size_ = 0;
  /// Every node created, erased ones included (Node* handles never dangle until the graph
  /// dies), by Node::index(). They live in blocks_, in creation order: the nodes of a graph
  /// built in program order lie one after another in memory, which a walk of a large graph
  /// needs more than anything else (each node in a heap allocation of its own cost a cache
  /// miss per node per pass).
  std::vector<Node*> owned_;
  struct NodeBlock;
  std::vector<std::unique_ptr<NodeBlock>> blocks_;
  /// Room for one more node, in the last block or a new one.
  void* node_storage();
  /// Destroys every node (the graph is empty afterwards, its blocks freed).
  void destroy_nodes() noexcept;
  void link_before(Node* node, Node* before);
  void unlink(Node* node);
  /// A cell holding this graph's address, which its nodes point to (Node::owner()); made with
  /// the first node, and moved with the nodes.
  std::unique_ptr<Graph*> home_;
  Graph* const* home();
  Namespace names_;
};

/// What the output node returns, one entry per returned value (each element of a returned
/// tuple or list), in order: the node, or nullptr for a constant. Empty without an output.
std::vector<Node*> output_values(const Graph& graph);

}  // namespace tdfx

// Printing a Graph or Node (operator<<, fmt): the graph printer's header.
#include "tdfx/graph/graph_printer.h"
