#pragma once

/// \file
/// The runnable program of a PipelineRecording, the form TDGraphModule runs and export_program
/// saves: the recording's live nodes (leaf_calls.h) in the order they ran, each with the module
/// that ran it and named afresh as torch.export names them (`linear`, `relu_1`; placeholders by
/// their joined key), so that a pruned op leaves no gap in the names. Each op's module is the
/// leaf call it belongs to, else the TensorDictModule's wrapped module or the child of its
/// Sequential.
///
/// Two steps: prune_program, which a trace needs to run (it refuses a recording that reads
/// memory nothing recorded wrote, drops the dead nodes and moves the recording's graph out: no
/// second graph is built), and give_modules with ProgramNames, which only what looks at the
/// program needs (a trace runs them when its program or view is first looked at,
/// detail::TracedView). flat_program does both, naming the ops itself.

#include <unordered_map>
#include <vector>

#include "tdfx/graph/graph.h"
#include "tdfx/tracer/leaf_calls.h"
#include "tdfx/tracer/name_scopes.h"

namespace tdfx::detail {

/// A recording's runnable program.
struct FlatProgram {
  Graph graph;
  /// The key each placeholder reads, in order.
  std::vector<NestedKey> input_keys;
  /// Whether each was contiguous when recorded (RecordedRead::contiguous).
  std::vector<bool> input_contiguous;
  /// The key each output is written to, in order.
  std::vector<NestedKey> out_keys;
};

/// The program of `recording` with its nodes as the recorder named them and without their
/// modules; `recording.graph` is moved into it. The rest of `recording`, `live` and the
/// StateUpdates made from it still describe the program's nodes: find_leaf_calls, give_modules,
/// ProgramNames and fx_view can be run on the program afterwards.
FlatProgram prune_program(PipelineRecording& recording, const LiveNodes& live);

/// Describes each call's wrapped module and each child of a wrapped Sequential
/// (RecordedCall::module_type, RecordedChild::type), which the recorder leaves empty: only what
/// shows the modules needs them.
void describe_modules(PipelineRecording& recording);

/// Finds the leaf calls of `program` (find_leaf_calls: the pruned program, so both a trace
/// and export find them on the live nodes alone) and writes each node's module into its meta
/// (td_module, module_path, module_type): the leaf call it belongs to (a parameter: the one
/// that first reads it), else what the recording says (after describe_modules); a get_attr
/// node only when `state_reads` (export, which lifts them, leaves them without). Returns the
/// leaf calls, which the FX view is made with.
LeafCalls give_modules(const Graph& program, PipelineRecording& recording, const LiveNodes& live,
                       const StateUpdates& updates, const TraceOptions& options,
                       bool state_reads = true);

/// The name each program node takes, for Graph::rename_all: as the tensordict prototype tracer
/// names it in the TensorDictModule call that recorded it (name_scopes.h), a parameter by its
/// path from the wrapped module (`_0_weight`), a key read by its joined key. Ask in program
/// order: the graph makes each unique.
class ProgramNames {
 public:
  /// `recording` must outlive it.
  explicit ProgramNames(const PipelineRecording& recording);
  std::string operator()(const Node& node);

 private:
  std::string scoped(const Node& node, const std::string& base);

  const PipelineRecording& recording_;
  NameScopes scopes_;
};

/// prune_program and give_modules, what a trace does in two steps (the second when first
/// looked at), at once, for export_program; then its ops named in one namespace, as
/// torch.export names a program's (a trace's program, TracedView, names them with
/// ProgramNames, which replays the prototype's nested scopes: the names come out alike, each
/// scope counting the same base names in program order). Its get_attr nodes keep the
/// recorder's names and get no module: export lifts each to a placeholder named for its path,
/// with meta of its own.
FlatProgram flat_program(PipelineRecording& recording, const LiveNodes& live,
                         const StateUpdates& updates, const TraceOptions& options);

/// TraceError when a live node reads a tensor the recording saw only allocated (`empty`,
/// `empty_like` and kin) and no recorded op wrote: its values were written outside the
/// dispatcher, as at::tensor({...}) copies its literal into an empty tensor, and the program
/// would read uninitialised memory. An allocation counts as written once an op writes into it
/// or into a view of it (fill_, copy_ into a slice, an `out=` argument); whether those writes
/// cover it whole is not checked.
void check_initialised(const PipelineRecording& recording, const LiveNodes& live);

}  // namespace tdfx::detail
