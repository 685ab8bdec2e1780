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

namespace detail {
class TracedView;
}  // namespace detail

/// A traced TensorDict module: runs the graph on a TensorDict and writes the
/// out keys, as tensordict's prototype `TDGraphModule` does.
///
///     auto gm = symbolic_trace(module, example);
///     std::cout << gm.graph() << gm.code();
///     gm.forward(td);   // td now holds the out keys
class TDGraphModule {
 public:
  /// A traced module of `pipeline`, whose graph's targets are paths from `root` (`pipeline`
  /// or one of its modules, reached by `root_prefix`: "module" for a sequential's module
  /// list). `graph` is the printed graph: it reads its keys with getitem(tensordict, key)
  /// and calls leaves with call_module. `program` is what runs: the flat op-level graph of
  /// the same recording (recompile() lowers an edited `graph` into a new one), taking
  /// `input_keys` as positional inputs. `specialisation`: set for a
  /// static trace of an example with a batch.
  TDGraphModule(std::shared_ptr<TensorDictModuleBase> pipeline,
                std::shared_ptr<torch::nn::Module> root, std::string root_prefix, Graph graph,
                Graph program, std::vector<NestedKey> input_keys, std::vector<NestedKey> out_keys,
                std::optional<BatchSpecialisation> specialisation,
                std::vector<int64_t> recorded_batches);
  /// As above, with the printed graph made from the trace's recording when first asked for
  /// (symbolic_trace): `program` is the one `view` was recorded as, and its errors name a
  /// node as the view prints it; `attributes` are root's parameters and buffers by path, and
  /// `constants` the tensors the module captured (GraphModule's constants);
  /// `input_contiguous` says which inputs were contiguous when recorded (see run()).
  TDGraphModule(std::shared_ptr<TensorDictModuleBase> pipeline,
                std::shared_ptr<torch::nn::Module> root, std::string root_prefix,
                std::shared_ptr<detail::TracedView> view, Graph program,
                GraphModule::Attributes attributes, GraphModule::Attributes constants,
                std::vector<NestedKey> input_keys, std::vector<bool> input_contiguous,
                std::vector<NestedKey> out_keys, std::optional<BatchSpecialisation> specialisation,
                std::vector<int64_t> recorded_batches);
  /// Moves the traced module.
  TDGraphModule(TDGraphModule&&) noexcept;
  /// Moves the traced module.
  TDGraphModule& operator=(TDGraphModule&&) noexcept;
  ~TDGraphModule();

  /// The graph as traced (and printed). A trace makes it on first use: running or exporting
  /// a trace does not.
  const Graph& graph() const;
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
  ///@{
  /// The traced pipeline, and the path of root() in it ("module", or "").
  const std::shared_ptr<TensorDictModuleBase>& pipeline() const { return pipeline_; }
  const std::string& root_prefix() const { return root_prefix_; }
  ///@}
  /// What runs: the flat op-level program graph (every leaf's ops inline, each input key a
  /// placeholder in input_keys() order, aten calls only, named as torch.export names them).
  /// A trace runs it as recorded and pruned; its nodes get their modules and names on the
  /// first call of this (or of graph(), or when an error names a node), not before: a trace
  /// that is only run never pays for them. Each recompile() lowers the edited graph() into a
  /// new one. export_program(const TDGraphModule&) exports it.
  const Graph& program_graph() const;
  /// The forward code, byte-identical to torch.fx's `GraphModule.code`.
  std::string code() const;
  /// The keys the graph reads from its input TensorDict, in order of first read.
  const std::vector<NestedKey>& input_keys() const { return input_keys_; }
  /// The keys the outputs are written to, in output order.
  const std::vector<NestedKey>& out_keys() const { return out_keys_; }
  /// The TensorDictModules and nested TensorDictSequentials the trace went through, in run
  /// order, a sequential before its children (pipeline_modules), described on first use (only
  /// drawings ask; a trace does not pay for them).
  const std::vector<ModuleBox>& modules() const;
  /// Set for a static trace (the default) of an example with a batch: every run checks that
  /// its batch is the traced one (ShapeError naming it). Unset for a dynamic trace (its
  /// inputs' batch dimensions may differ, the others not) and for an example without a
  /// batch (every input dimension must be as traced).
  const std::optional<BatchSpecialisation>& batch_specialisation() const { return specialisation_; }
  /// The batch sizes the module was recorded at, the example's first: one for a static
  /// trace, the example's and TraceOptions::batch_probes' for a dynamic one; empty when the
  /// example has no batch.
  const std::vector<int64_t>& recorded_batches() const { return recorded_batches_; }
  /// The tensors the module captured, lifted as constants, by their paths from root():
  /// `0.module._tensor_constant0` (GraphModule::constants).
  const GraphModule::Attributes& constants() const { return runner_->constants(); }

  /// Runs the graph on `td`'s keys and writes the out keys into `td`. ShapeError when the
  /// graph is specialised to another batch, or a key's dimensions differ from the traced
  /// ones but for those that follow the batch (a sequence length read as an integer is a
  /// constant of the graph). RunError when a module's train/eval mode changed since tracing.
  TensorDict& forward(TensorDict& td) const;
  /// Runs the graph on `td`'s keys and writes the out keys into `tensordict_out`.
  TensorDict& forward(const TensorDict& td, TensorDict& tensordict_out) const;
  /// Runs the graph; returns one tensor per out key. An input that was contiguous when traced
  /// and is not now is copied contiguous first, as a `contiguous()` in the module would have
  /// copied it (which the recording could not see: it does not dispatch for a contiguous
  /// tensor); ShapeError instead when the program writes into that input (inputs_written),
  /// where a copy would leave the caller's tensor unwritten.
  std::vector<at::Tensor> run(const TensorDict& td) const;

 private:
  std::shared_ptr<TensorDictModuleBase> pipeline_;
  std::shared_ptr<torch::nn::Module> root_;
  std::string root_prefix_;
  /// The printed graph, made on first use (see graph()); never null.
  std::shared_ptr<detail::TracedView> view_;
  std::vector<NestedKey> out_keys_;
  /// modules(), described on first use (set atomically, as printed_).
  mutable std::shared_ptr<const std::vector<ModuleBox>> modules_;
  std::vector<NestedKey> input_keys_;
  /// Which inputs were contiguous when recorded; empty when not known (all taken as they
  /// come).
  std::vector<bool> input_contiguous_;
  /// inputs_written(program_graph()), worked out the first time an input needs a copy (set
  /// atomically, as printed_; recompile() clears it).
  mutable std::shared_ptr<const std::vector<bool>> inputs_written_;
  std::optional<BatchSpecialisation> specialisation_;
  std::vector<int64_t> recorded_batches_;
  /// What runs: program_graph(), compiled on the first run, so a call builds no dictionary
  /// and runs one flat plan.
  std::unique_ptr<GraphModule> runner_;
  /// What each input key was traced with (runner_'s placeholders): a run checks its inputs
  /// against it (detail::check_input_shape).
  std::vector<TensorMeta> input_meta_;

  /// Each module of root_ and its training mode when traced: the graph holds that mode's ops,
  /// so a run after train() or eval() changed it is refused.
  struct TracedMode {
    std::shared_ptr<torch::nn::Module> module;
    bool training;
  };
  std::vector<TracedMode> modes_;

  /// graph_module(), compiled on first use from a copy of graph() (read and set atomically:
  /// concurrent first uses may both compile; the first stored is the one every caller gets).
  mutable std::shared_ptr<const GraphModule> printed_;
  /// A run of an edited graph (through mutable_graph() or any reference kept from it) is
  /// refused until recompile() (TracedView::edited).
  void check_not_edited() const;

  void note_input_meta();
  void note_modes();
  void check_modes() const;
  /// The input tensors for `td`, in input_keys_ order, checked as forward() checks them.
  std::vector<at::Tensor> checked_inputs(const TensorDict& td) const;
};

/// Traces `module` run on `example`: once for a static trace (the default), once per
/// recorded batch for a dynamic one (TraceOptions::dynamic_batch; dynamic_batch.h says
/// what is checked). Neither changes: the module runs on copies of the example's tensors
/// (an in-place op does not reach them), and its parameters, buffers and the default
/// generator's state are put back after each recording, also when tracing fails
/// (BatchNorm's running statistics stay as they were). Key reads become
/// `getitem(tensordict, key)` nodes, built-in torch::nn modules `call_module` nodes; the
/// root is the wrapped module of a TensorDictModule, or the ModuleList of a
/// TensorDictSequential, as in the tensordict prototype. Sizes the module reads as plain
/// integers are constants of a static graph, which runs at the example's batch only; a
/// dynamic trace turns those that are the batch into size nodes (`size = x.size(0)`) and
/// refuses a module that records differently at another batch. Throws KeyError for a
/// missing key, TraceError naming the module for anything that cannot be recorded.
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
/// Writes to_string(value), the forward code.
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
