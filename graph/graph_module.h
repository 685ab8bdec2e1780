#pragma once

/// \file
/// GraphModule: runs a Graph. Aten nodes are called through the c10
/// dispatcher with operator handles cached at compile time; a flat plan
/// (value slots, constant arguments, release points) is built once, so a call
/// costs little more than the ops themselves.

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tdfx/graph/graph.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace tdfx {

namespace detail {
struct Plan;
struct DeferredCompile;
}  // namespace detail

/// A graph together with the module its get_attr and call_module nodes refer
/// to. `forward` runs the graph, not the module's own forward.
///
///     GraphModule gm(root, std::move(graph));
///     auto outputs = gm.run({x});   // one value per placeholder, in order
class GraphModule {
 public:
  /// Compiles `graph` against `root`; get_attr targets are parameter or
  /// buffer paths of `root` (`0.module.fc1.weight`). Throws GraphError naming
  /// the node when a target cannot be resolved or an argument does not fit. Errors while
  /// running name a node by `shown_as` when it is given and gives a name (TDGraphModule names
  /// the program's nodes as its FX view prints them), else as printed or by meta().shown_as.
  GraphModule(std::shared_ptr<torch::nn::Module> root, Graph graph,
              std::function<std::string(const Node&)> shown_as = {});
  /// Every parameter and buffer of a root by its path.
  using Attributes = std::unordered_map<std::string, at::Tensor>;
  /// As above, but the graph is linted and compiled when it is first run (plan()), with
  /// `attributes`, which hold every parameter and buffer of `root` by path (a trace has them):
  /// a trace that is only looked at never compiles, and the first compile does not gather the
  /// attributes again. Concurrent first runs compile once. An edit before the first run makes
  /// runs refuse until recompile(), as after any compile. `constants`: as with_constants.
  GraphModule(std::shared_ptr<torch::nn::Module> root, Graph graph,
              std::function<std::string(const Node&)> shown_as, Attributes attributes,
              Attributes constants = {});
  /// As the first constructor, with get_attr targets also resolved in `constants`: tensors
  /// the graph reads that `root` does not hold (a trace's captured tensors,
  /// `0.module._tensor_constant0`), kept for every recompile().
  static GraphModule with_constants(std::shared_ptr<torch::nn::Module> root, Graph graph,
                                    Attributes constants,
                                    std::function<std::string(const Node&)> shown_as = {});
  ~GraphModule();
  /// Moves the graph, the root, the attributes and the compiled plan.
  GraphModule(GraphModule&&) noexcept;
  /// Moves the graph, the root, the attributes and the compiled plan.
  GraphModule& operator=(GraphModule&&) noexcept;

  /// The graph that runs.
  const Graph& graph() const { return graph_; }
  /// The graph for editing; call recompile() afterwards (runs refuse until then).
  Graph& mutable_graph() { return graph_; }
  /// Lints the graph and rebuilds the plan after edits.
  void recompile();
  /// Renames every node as Graph::rename_all does, but without making the plan stale (the plan
  /// runs nodes, not names) and without a new generation, so that a run on another thread is
  /// not refused meanwhile. A trace names its program this way when it is first looked at.
  void rename_nodes(const std::function<std::string(const Node&)>& hint_of);
  /// The module whose parameters, buffers and submodules get_attr and call_module nodes name (null
  /// for a graph of plain functions).
  const std::shared_ptr<torch::nn::Module>& root() const { return root_; }
  /// The tensors get_attr nodes may read besides the root's parameters and buffers.
  const Attributes& constants() const { return constants_; }
  /// The compiled plan (internal: Interpreter walks it). GraphError when the graph was
  /// edited after the last compile.
  const detail::Plan& plan() const;
  /// plan(), shared: an Interpreter holds it for a run, so that a recompile during the run
  /// cannot free it (the run then stops with a GraphError).
  std::shared_ptr<const detail::Plan> shared_plan() const;

  /// Runs the graph on one value per placeholder; returns the output value
  /// (a tuple output stays a tuple). A LibTorch failure is a RunError naming the node; a
  /// tdfx::Error and an InternalError pass through as they are; a GraphError when the graph
  /// was edited since the last compile.
  c10::IValue forward(std::vector<c10::IValue> inputs) const;
  /// forward() with the output flattened to a list of values.
  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) const;

 private:
  std::shared_ptr<torch::nn::Module> root_;
  Graph graph_;
  /// Shared with Interpreter runs, which keep the plan they started with alive. Mutable: a
  /// deferred compile sets it on the first run, under deferred_'s mutex.
  mutable std::shared_ptr<const detail::Plan> plan_;
  uint64_t plan_generation_ = 0;  // graph_.generation() that plan_ was built from
  std::function<std::string(const Node&)> shown_as_;
  /// Tensors get_attr nodes read besides the root's (with_constants).
  Attributes constants_;
  /// Set until the first run of a GraphModule built to compile then (the constructor with
  /// attributes); recompile() clears it.
  std::unique_ptr<detail::DeferredCompile> deferred_;
  std::shared_ptr<const detail::Plan> build_plan(const Attributes& attributes) const;
  void compile(const Attributes& attributes);
};

}  // namespace tdfx
