#pragma once

/// \file
/// ExportedProgram: a self-contained aten-level program that takes and returns
/// plain tensors — the lifted parameters and buffers, then the user inputs by
/// keyword name — with no TensorDict involved (seed 000).

#include <ATen/core/Tensor.h>
#include <fmt/format.h>

#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tdfx/export/optimizer_state.h"
#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/batch_check.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace tdfx {

/// What a program input is: a parameter, a buffer, a tensor the module captured (a constant,
/// as torch.export's CONSTANT_TENSOR), or an input the caller gives.
enum class InputKind { kParameter, kBuffer, kConstant, kUserInput };

/// "parameter", "buffer", "constant", "user_input".
std::string_view to_string(InputKind kind);

/// One input of the program: its placeholder name and where it comes from.
struct InputSpec {
  /// Where the input comes from: a parameter, a buffer, a constant or a user input.
  InputKind kind;
  /// The placeholder (`p_module_0_module_weight`, `x`).
  std::string name;
  /// The parameter/buffer path (`module.0.module.weight`) or the input key's joined name.
  std::string target;
  /// The dimensions that follow the batch size, which the program takes at any value (its
  /// placeholder's TensorMeta::batch_dims); printed `(dim 0 is s0)`.
  std::vector<int64_t> batch_dims;
};

/// One output of the program: the node returned and the key it is written to.
struct OutputSpec {
  /// The name of the node returned.
  std::string name;
  /// The key the output is written to.
  NestedKey key;
};

/// The inputs and outputs of an exported program.
struct GraphSignature {
  /// The program's inputs, one per placeholder, in the graph's order.
  std::vector<InputSpec> inputs;
  /// The program's outputs, in the order it returns them.
  std::vector<OutputSpec> outputs;
  /// One line per input and output: `input parameter p_module_0_module_weight ->
  /// module.0.module.weight`, `input user_input obs -> obs (dim 0 is s0)`.
  std::string str() const;
};

/// A callable taking and returning plain tensors, as `ExportedProgram.module()`.
class ExportedModule {
 public:
  /// `input_meta`: what each user input was traced with; an input whose dimensions differ
  /// (but for those that follow the batch) is refused.
  ExportedModule(std::shared_ptr<const GraphModule> runner, std::vector<at::Tensor> state,
                 std::vector<std::string> user_inputs,
                 std::optional<BatchSpecialisation> specialisation = std::nullopt,
                 std::vector<TensorMeta> input_meta = {}, uint64_t memory_budget = 0,
                 double time_budget = 0);
  /// Positional user inputs, in signature order; returns one tensor per output.
  /// ShapeError when the program is specialised to another batch size, or an input's
  /// dimensions differ from the traced ones but for those that follow the batch. A
  /// non-contiguous input is copied contiguous first (detail::contiguous_as_traced), or
  /// refused with a ShapeError when the program writes into it. With a memory budget (a
  /// loaded program's), a RunError naming the node that would allocate past it, before it
  /// allocates; with a time budget (core/time_budget.h), a RunError naming the node that would
  /// not finish in it, or that comes after the deadline, before it starts.
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& args) const;
  /// User inputs by name (`{{"x", x}}`); every user input must be given once.
  std::vector<at::Tensor> operator()(
      const std::vector<std::pair<std::string, at::Tensor>>& kwargs) const;

  /// The compiled graph the module runs; with graph_inputs(), what an Interpreter runs.
  const GraphModule& graph_module() const { return *runner_; }
  /// The graph's inputs for these user inputs: the parameters and buffers, then `args`,
  /// after the checks operator() makes (ShapeError).
  std::vector<c10::IValue> graph_inputs(const std::vector<at::Tensor>& args) const;

 private:
  std::shared_ptr<const GraphModule> runner_;
  std::vector<at::Tensor> state_;
  std::vector<std::string> user_inputs_;
  std::optional<BatchSpecialisation> specialisation_;
  std::vector<TensorMeta> input_meta_;
  uint64_t memory_budget_ = 0;
  double time_budget_ = 0;
};

/// Where a loaded program's memory budget is set, for messages.
inline constexpr const char* kProgramBudget =
    "the program's memory budget (LoadOptions::memory_budget, tdfx run --memory-budget)";
/// Where a loaded program's time budget is set, for messages.
inline constexpr const char* kProgramTimeBudget =
    "the program's time budget (LoadOptions::time_budget, tdfx run --time-budget)";

/// An exported program: its graph, signature and weights.
class ExportedProgram {
 public:
  /// `modules`: the TensorDictModules and nested sequentials it came from (pipeline_modules),
  /// which its diagrams draw; none for a program without them (an archive of version 2).
  /// GraphError when the graph does not compile or a parameter or buffer input of
  /// `signature` has no tensor in `state` (load() reports these as ArchiveError).
  ExportedProgram(Graph graph, GraphSignature signature, std::map<std::string, at::Tensor> state,
                  std::optional<BatchSpecialisation> specialisation = std::nullopt,
                  std::vector<ModuleBox> modules = {});
  /// How export_program makes its program: as above, but the graph, which tdfx's own passes
  /// made, is linted and compiled on the program's first run rather than here.
  struct CompileOnFirstRun {};
  /// The program of `graph`, `signature` and `state` (as the constructor above), compiled on its
  /// first run.
  ExportedProgram(CompileOnFirstRun, Graph graph, GraphSignature signature,
                  std::map<std::string, at::Tensor> state,
                  std::optional<BatchSpecialisation> specialisation,
                  std::vector<ModuleBox> modules);

  /// The program's graph.
  const Graph& graph() const { return runner_->graph(); }
  /// The compiled graph (inputs: the state, then the user inputs; see ExportedModule).
  const GraphModule& graph_module() const { return *runner_; }
  /// Its inputs and outputs.
  const GraphSignature& graph_signature() const { return signature_; }
  /// Parameters and buffers by placeholder name.
  const std::map<std::string, at::Tensor>& state() const { return state_; }
  /// Set when the program holds its traced batch size as a constant (see
  /// tracer/dynamic_batch.h); its module then checks each call's batch.
  const std::optional<BatchSpecialisation>& batch_specialisation() const { return specialisation_; }
  /// The TensorDictModules and nested sequentials the program came from, paths as its nodes'
  /// `td_module` names them (`module.0`); see pipeline_modules.
  const std::vector<ModuleBox>& modules() const { return modules_; }
  /// Inputs kept with the program, by the placeholder name of a user input: a snapshot of a
  /// training step (Watch) keeps that step's inputs, so that `tdfx run` replays it. Saved in
  /// the archive (format version 4) and loaded back; empty unless set.
  const std::map<std::string, at::Tensor>& example_inputs() const { return example_inputs_; }
  /// Sets them. GraphError when a name is not a user input's placeholder, or a tensor's dtype
  /// or shape is not its placeholder's (a dimension that follows the batch may differ).
  void set_example_inputs(std::map<std::string, at::Tensor> inputs);
  /// An optimizer's state kept with the program, by its parameters' names (their targets in
  /// the signature): a snapshot of a training step (Watch) keeps the state before that step's
  /// update. Saved in the archive (format version 5) and loaded back; none unless set.
  const std::optional<OptimizerState>& optimizer_state() const { return optimizer_state_; }
  /// Sets it. GraphError when its type is not one of optimizer_kinds(), a group's options are
  /// not its type's, a parameter is not a parameter input of the program or is in two groups,
  /// a state is for no parameter of a group, or a state tensor is not one of its type's or not
  /// of its parameter's dtype and shape.
  void set_optimizer_state(OptimizerState state);
  /// A callable running the program on plain tensors.
  ExportedModule module() const;
  /// The memory budget its runs are held to, in bytes (core/memory_budget.h): what load() was
  /// given (LoadOptions::memory_budget) for a program read from a file, 0 (none) for one
  /// exported in this process.
  uint64_t memory_budget() const { return memory_budget_; }
  /// Sets memory_budget() (load() sets it from LoadOptions::memory_budget); 0: none.
  void set_memory_budget(uint64_t bytes) { memory_budget_ = bytes; }
  /// The time budget each of its runs is held to, in seconds (core/time_budget.h): what load()
  /// was given (LoadOptions::time_budget) for a program read from a file, 0 (none) for one
  /// exported in this process.
  double time_budget() const { return time_budget_; }
  /// Sets time_budget() (load() sets it from LoadOptions::time_budget); 0: none.
  void set_time_budget(double seconds) { time_budget_ = seconds; }
  /// The forward code in export style (`torch.ops.aten.linear.default(...)`).
  std::string code() const;
  /// The program as seed 000 prints it: annotations and `# Module:` comments.
  std::string print_readable() const;

 private:
  std::shared_ptr<const GraphModule> runner_;
  GraphSignature signature_;
  std::map<std::string, at::Tensor> state_;
  std::optional<BatchSpecialisation> specialisation_;
  std::vector<ModuleBox> modules_;
  std::map<std::string, at::Tensor> example_inputs_;
  std::optional<OptimizerState> optimizer_state_;
  /// Each input's placeholder metadata, in signature order: a user input's; empty for a
  /// parameter, buffer or constant.
  std::vector<TensorMeta> in_meta_;
  uint64_t memory_budget_ = 0;
  double time_budget_ = 0;

  ExportedProgram(std::shared_ptr<const GraphModule> runner, GraphSignature signature,
                  std::map<std::string, at::Tensor> state,
                  std::optional<BatchSpecialisation> specialisation,
                  std::vector<ModuleBox> modules);
};

/// Options of export_program.
struct ExportOptions {
  /// The batch contract, as TraceOptions::dynamic_batch: false (the default) exports a
  /// static program, which runs at the example's batch only (ShapeError otherwise); true
  /// records at batch_probes too and exports a program whose batch dimensions are `s0`, or
  /// refuses with a TraceError where the recordings part (tracer/dynamic_batch.h).
  bool dynamic_batch = false;
  /// As TraceOptions::batch_probes.
  std::vector<int64_t> batch_probes;
};

/// Exports `module` run on `inputs` (named by joined in key: `x`, `some_key`)
/// into a program whose outputs are its selected out keys: it records the module once (or
/// once per batch probe) and exports the recording's program, without building the FX view
/// that symbolic_trace prints. Throws KeyError for an unknown or missing
/// input. The program's state() holds the module's own parameter and buffer tensors, not
/// copies (as torch.export's state_dict does): training the module afterwards changes the
/// program too. To keep a snapshot, save() it and load() it back.
ExportedProgram export_program(const std::shared_ptr<TensorDictModuleBase>& module,
                               const std::vector<std::pair<std::string, at::Tensor>>& inputs,
                               const ExportOptions& options = {});

/// Exports a traced module without recording it again: its program graph (program_graph(),
/// the edited graph after recompile()) with parameters and buffers lifted to placeholders
/// `p_<path>`/`b_<path>` (paths from the pipeline, dots as `_`), the C++ Linear's `t` +
/// `addmm` printed as `aten.linear`, and computation that no output needs removed. The same
/// program as exporting the pipeline itself. GraphError when the graph was edited and not
/// recompiled.
ExportedProgram export_program(const TDGraphModule& traced);

/// `ExportedProgram:`, the program as print_readable() shows it and its graph signature,
/// each indented, as Python prints an ExportedProgram.
std::string to_string(const ExportedProgram& value);
/// Writes to_string(value): `std::cout << program` prints as Python prints an ExportedProgram.
std::ostream& operator<<(std::ostream& os, const ExportedProgram& value);

}  // namespace tdfx

/// `fmt::format("{}", program)` is to_string(program).
template <>
struct fmt::formatter<tdfx::ExportedProgram> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const tdfx::ExportedProgram& value, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tdfx::to_string(value), ctx);
  }
};
