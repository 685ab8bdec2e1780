#pragma once

/// \file
/// Debuggee: what the debugging tools run — a compiled graph, its inputs, the
/// key each output is written to and the printed code — made from a traced
/// module and a TensorDict, or from an exported program and its user inputs.

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "tdfx/core/nested_key.h"
#include "tdfx/graph/graph_module.h"

namespace tdfx {

class TDGraphModule;
class TensorDict;
class ExportedProgram;

/// One run to look inside. Refers to the module it was made from, which must outlive it.
struct Debuggee {
  /// The graph that runs, with the nodes as the user sees them printed.
  const GraphModule* module = nullptr;
  /// One value per placeholder.
  std::vector<c10::IValue> inputs;
  /// The key each output value is written to, in output order.
  std::vector<NestedKey> output_keys;
  /// The printed forward code, where each node's line is found.
  std::string code;
  /// For an exported program: the inputs that are its parameters, by index into `inputs`,
  /// with their paths (`module.0.module.weight`), and those that are its buffers or
  /// constants (put back after a debugging run, as a run may write them). A traced
  /// module reads its own parameters and buffers through get_attr nodes instead.
  std::vector<std::pair<size_t, std::string>> state_inputs;
  /// The inputs that are the exported program's buffers or constants, by index into `inputs` (put
  /// back after a debugging run).
  std::vector<size_t> buffer_inputs;
  /// For a traced module: what its parameters' paths in the module's root start with, to name
  /// them from the pipeline ("module" for a sequential's: `module.0.module.weight`).
  std::string parameter_prefix;
};

/// One run of a debuggee's graph that leaves the debuggee as it found it, for every tool to
/// see the same state: its buffers (a traced module's, an exported program's buffer inputs)
/// are saved when the run starts and put back when it ends, as is the default generator's
/// state, so that a layer in training mode (BatchNorm's running statistics) changes nothing
/// for the next run and a Dropout draws the same mask in each. The module's own buffers and
/// the generator are written: not for a module another thread uses meanwhile. tdfx::Error
/// for a Debuggee made without debuggee() (no graph).
class DebugRun {
 public:
  /// Saves the debuggee's buffers and the default generator's state, which the destructor puts
  /// back.
  explicit DebugRun(const Debuggee& debuggee);
  ~DebugRun();
  DebugRun(const DebugRun&) = delete;
  DebugRun& operator=(const DebugRun&) = delete;

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> saved_;
  at::Tensor generator_state_;
};

/// A traced module run on `td`: its printed graph, nodes named as `gm.graph()` prints them.
/// The checks of `gm.forward` apply (KeyError, ShapeError).
Debuggee debuggee(const TDGraphModule& gm, const TensorDict& td);
/// An exported program run on its user inputs, in signature order (ShapeError as its module).
Debuggee debuggee(const ExportedProgram& program, const std::vector<at::Tensor>& user_inputs);

/// The line of `code` that computes `node` (`    relu = torch.relu(_0_fc1);  _0_fc1 = None`,
/// without its indent), the `def forward(...)` line for a placeholder; "" when none.
std::string code_line(const std::string& code, const Node& node);

/// The first output key `node` flows into (through its users), or nullopt.
std::optional<NestedKey> key_fed(const Debuggee& debuggee, const Node& node);

}  // namespace tdfx
