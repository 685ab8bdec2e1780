#pragma once

/// \file
/// Interpreter: runs a GraphModule node by node, as torch.fx's Interpreter
/// does, so a subclass can look at or change what each node produces; and
/// ShapeProp, the Interpreter that records each node's dtype, shape and
/// strides in its meta.

#include <ATen/core/ivalue.h>

#include <cstddef>
#include <vector>

#include "tdfx/graph/graph_module.h"

namespace tdfx {

namespace detail {
struct Plan;
struct Step;
}  // namespace detail

/// Runs a GraphModule's compiled plan one node at a time. `run` calls
/// `run_node` for each node in program order; `run_node` fetches the node's
/// arguments from the environment and calls the method of its opcode. Override
/// any of them (FX's names and shape), or `run_node` to see every node:
///
///     struct Printer : tdfx::Interpreter {
///       using Interpreter::Interpreter;
///       c10::IValue run_node(const tdfx::Node& node) override {
///         c10::IValue value = Interpreter::run_node(node);
///         if (value.isTensor()) fmt::print("%{}: {}\n", node.name(), value.toTensor().sizes());
///         return value;
///       }
///     };
///     Printer(gm).run({x});   // the same value as gm.forward({x})
///
/// Values are released after their last reader, as the plan does, unless
/// Options::garbage_collect_values is false. The module must outlive the
/// interpreter; each run uses the module's current plan, so a module
/// recompiled between runs runs its new graph (edited during a run, the run
/// stops with a GraphError).
class Interpreter {
 public:
  /// How an Interpreter keeps the values it computes.
  struct Options {
    /// Release each value after its last reader (FX's garbage_collect_values). When false,
    /// every value stays readable through value() after the run, until the next run.
    bool garbage_collect_values = true;
  };

  ///@{
  /// An interpreter of `module`'s graph (which must outlive it), with the default Options or
  /// `options`.
  explicit Interpreter(const GraphModule& module);
  Interpreter(const GraphModule& module, Options options);
  ///@}
  virtual ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  /// Runs the graph on one value per placeholder; returns the output value, as
  /// GraphModule::forward does. A LibTorch failure is a RunError naming the node; a
  /// tdfx::Error (a ShapeError, say) and an InternalError pass through as they are.
  c10::IValue run(std::vector<c10::IValue> inputs);

  /// Runs one node on the environment's values and returns its value (which
  /// `run` stores in the environment).
  virtual c10::IValue run_node(const Node& node);

  /// The next input of `run`.
  virtual c10::IValue placeholder(const Node& node, c10::IValue input);
  /// The parameter or buffer the node names.
  virtual c10::IValue get_attr(const Node& node);
  /// Calls the node's operator on `args` (an aten operator's arguments in
  /// schema order, keyword arguments and defaults included; for getitem the
  /// container and the index).
  virtual c10::IValue call_function(const Node& node, std::vector<c10::IValue> args);
  /// Calls the aten operator the method was recorded from; `args` start with self.
  virtual c10::IValue call_method(const Node& node, std::vector<c10::IValue> args);
  /// Runs the module's body graph, or the root's built-in layer at the target
  /// when the node has none, on the call's arguments.
  virtual c10::IValue call_module(const Node& node, std::vector<c10::IValue> args);
  /// The value the graph returns.
  virtual c10::IValue output(const Node& node, c10::IValue result);

  /// The values of `node`'s arguments, taken from the environment, as the
  /// opcode's method receives them.
  std::vector<c10::IValue> fetch_args(const Node& node) const;
  /// True when `node` has run and its value is still held.
  bool has_value(const Node& node) const;
  /// The value `node` produced. GraphError when it has not run, or was released.
  const c10::IValue& value(const Node& node) const;

  /// The graph module it runs.
  const GraphModule& module() const { return module_; }

 private:
  const detail::Step& step_of(const Node& node) const;
  c10::IValue call(const Node& node, std::vector<c10::IValue>& args) const;

  const GraphModule& module_;
  /// The module's plan, taken at the start of each run and held until its end: a recompile
  /// during the run cannot free it; an edit during the run stops it (GraphError).
  std::shared_ptr<const detail::Plan> plan_;
  Options options_;
  std::vector<c10::IValue> env_;
  std::vector<bool> computed_;
  std::vector<c10::IValue> inputs_;
  size_t next_input_ = 0;
  size_t current_ = 0;  // the step `run` is at, so run_node finds it without a lookup
};

/// Runs the graph and records in each node's meta the dtype, shape, strides
/// and device of the tensor it produces (torch.fx's ShapeProp), so edited and
/// hand-built graphs print annotated code and draw shapes on edges.
///
///     ShapeProp(gm).propagate({torch::randn({2, 3})});
///     gm.graph().node_list()[1]->meta().tensor.shape;   // [2, 4]
class ShapeProp : public Interpreter {
 public:
  /// Writes the meta of `module`'s graph nodes, which is not an edit of the graph.
  explicit ShapeProp(GraphModule& module);
  /// Runs the graph on `inputs`, filling the meta; returns the output.
  c10::IValue propagate(std::vector<c10::IValue> inputs);
  c10::IValue run_node(const Node& node) override;

 private:
  Graph& graph_;
};

}  // namespace tdfx
