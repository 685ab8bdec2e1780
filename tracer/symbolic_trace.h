#pragma once

/// \file
/// symbolic_trace: records a TensorDictModule or TensorDictSequential into a
/// graph that prints like torch.fx and runs with bit-identical results.

#include <fmt/format.h>

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tdfx/graph/graph_module.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/batch_check.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx {

/// A traced TensorDict module: runs the graph on a TensorDict and writes the
/// out keys, as tensordict's prototype `TDGraphModule` does.
///
///     auto gm = symbolic_trace(module, example);
///     std::cout << gm.graph() << gm.code();
///     gm.forward(td);   // td now holds the out keys
class TDGraphModule {
 public:
  /// `graph` reads its keys with getitem(tensordict, key) and calls leaves
  /// with call_module; `root` is the module its targets name. What runs is
  /// `graph` with its call_module bodies inlined and its key reads made inputs.
  TDGraphModule(std::shared_ptr<torch::nn::Module> root, Graph graph,
                std::vector<NestedKey> out_keys, std::vector<ModuleBox> modules = {},
                std::optional<BatchSpecialisation> specialisation = std::nullopt);
  /// As above, running `runnable` instead: a flat graph of the same program
  /// taking `input_keys` as positional inputs (symbolic_trace builds it from
  /// the same recording as `graph`).
  TDGraphModule(std::shared_ptr<torch::nn::Module> root, Graph graph,
                std::vector<NestedKey> out_keys, std::vector<ModuleBox> modules,
                std::optional<BatchSpecialisation> specialisation, Graph runnable,
                std::vector<NestedKey> input_keys);

  /// The graph as traced (and printed).
  const Graph& graph() const { return graph_; }
  /// The printed graph for editing; call recompile() afterwards (until then, runs are
  /// refused).
  Graph& mutable_graph();
  /// Lints the edited graph, gives nodes without meta (a user's inserted nodes) their dtype
  /// and shape by running the graph on inputs of the traced shapes (ShapeProp), and rebuilds
  /// what runs from it: the next forward runs the edited graph. GraphError naming the node
  /// when the graph cannot run, or returns another number of values than out keys.
  void recompile();
  /// The printed graph compiled (call_module nodes run their bodies): with graph_inputs(),
  /// what an Interpreter runs to show the nodes as printed. Valid until the next recompile().
  const GraphModule& graph_module() const;
  /// The input of graph_module() for `td`: one dictionary of the keys the graph reads, after
  /// the checks forward() makes (KeyError, ShapeError, RunError).
  std::vector<c10::IValue> graph_inputs(const TensorDict& td) const;
  /// The module the graph's call_module and get_attr targets name.
  const std::shared_ptr<torch::nn::Module>& root() const { return root_; }
  /// The forward code, byte-identical to torch.fx's `GraphModule.code`.
  std::string code() const;
  /// The keys the graph reads from its input TensorDict, in order of first read.
  const std::vector<NestedKey>& input_keys() const { return input_keys_; }
  /// The keys the outputs are written to, in output order.
  const std::vector<NestedKey>& out_keys() const { return out_keys_; }
  /// The TensorDictModules and nested TensorDictSequentials the trace went through, in run
  /// order, a sequential before its children (pipeline_modules).
  const std::vector<ModuleBox>& modules() const { return modules_; }
  /// Set when the graph holds the traced batch size as a constant: every run
  /// then checks its batch (ShapeError naming the node). Unset: any batch runs.
  const std::optional<BatchSpecialisation>& batch_specialisation() const { return specialisation_; }

  /// Runs the graph on `td`'s keys and writes the out keys into `td`. ShapeError when the
  /// graph is specialised to another batch, or a key's dimensions differ from the traced
  /// ones but for those that follow the batch (a sequence length read as an integer is a
  /// constant of the graph). RunError when a module's train/eval mode changed since tracing.
  TensorDict& forward(TensorDict& td) const;
  /// Runs the graph on `td`'s keys and writes the out keys into `tensordict_out`.
  TensorDict& forward(const TensorDict& td, TensorDict& tensordict_out) const;
  /// Runs the graph; returns one tensor per out key.
  std::vector<at::Tensor> run(const TensorDict& td) const;

 private:
  std::shared_ptr<torch::nn::Module> root_;
  Graph graph_;
  std::vector<NestedKey> out_keys_;
  std::vector<ModuleBox> modules_;
  std::vector<NestedKey> input_keys_;
  std::optional<BatchSpecialisation> specialisation_;
  /// What runs: the program of graph_ with leaf bodies inlined and each key
  /// read a positional input (input_keys_ order), so a call builds no
  /// dictionary and runs one flat plan.
  std::unique_ptr<GraphModule> runner_;
  /// What each input key was traced with (runner_'s placeholders): a run checks its inputs
  /// against it (detail::check_input_shape).
  std::vector<TensorMeta> input_meta_;

  /// Each module of root_ and its training mode when traced: the graph holds that mode's ops,
  /// so a run after train() or eval() changed it is refused.
  struct TracedMode {
    std::string path;
    std::shared_ptr<torch::nn::Module> module;
    bool training;
  };
  std::vector<TracedMode> modes_;

  /// graph_module(), compiled on first use from a copy of graph_ (read and set with
  /// std::atomic_load/store: concurrent first uses may both compile; one is kept).
  mutable std::shared_ptr<const GraphModule> printed_;
  /// graph_.generation() when what runs was last built from it: a run of an edited graph
  /// (through mutable_graph() or any reference kept from it) is refused until recompile().
  uint64_t compiled_generation_ = 0;
  void check_not_edited() const;

  void note_input_meta();
  void note_modes();
  void check_modes() const;
  /// The input tensors for `td`, in input_keys_ order, checked as forward() checks them.
  std::vector<at::Tensor> checked_inputs(const TensorDict& td) const;
};

/// Traces `module` run once on `example`. Neither changes: the module runs on
/// copies of the example's tensors (an in-place op does not reach them), and
/// its parameters and buffers are put back afterwards, also when tracing
/// fails (BatchNorm's running statistics stay as they were). Key reads
/// become `getitem(tensordict, key)` nodes, built-in torch::nn modules
/// `call_module` nodes; the root is the wrapped module of a
/// TensorDictModule, or the ModuleList of a TensorDictSequential, as in the
/// tensordict prototype. Sizes the module reads as plain integers are
/// constants of the recording; the module is recorded again at the next
/// batch size, and a constant that is the batch becomes a size node
/// (`size = x.size(0)`); a graph that still depends on the batch checks
/// every input's batch (see batch_generalise.h). Throws KeyError for a
/// missing key, TraceError naming the module for anything that cannot be
/// recorded.
TDGraphModule symbolic_trace(const std::shared_ptr<TensorDictModuleBase>& module,
                             const TensorDict& example, TraceOptions options = {});

namespace detail {
/// The graph root symbolic_trace uses for `module`, and the prefix its
/// parameter paths lose.
std::pair<std::shared_ptr<torch::nn::Module>, std::string> graph_root(
    const std::shared_ptr<TensorDictModuleBase>& module, const TraceOptions& options);
}  // namespace detail

/// The forward code (`code()`), what torch.fx prints of a GraphModule after its submodules.
std::string to_string(const TDGraphModule& value);
std::ostream& operator<<(std::ostream& os, const TDGraphModule& value);

}  // namespace tdfx

/// `fmt::format("{}", gm)` is to_string(gm): the forward code.
template <>
struct fmt::formatter<tdfx::TDGraphModule> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const tdfx::TDGraphModule& value, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tdfx::to_string(value), ctx);
  }
};
