#pragma once

/// \file
/// flat_program: the runnable program of a PipelineRecording, the form TDGraphModule runs and
/// export_program saves — the recording's live nodes (leaf_calls.h) in the order they ran,
/// named afresh as torch.export names them (`linear`, `relu_1`; placeholders by their joined
/// key), so that a pruned op leaves no gap in the names. Each op's module is the leaf call it
/// belongs to, else the TensorDictModule's wrapped module or the child of its Sequential.
///
/// It rewrites the recording's graph in place and moves it out (no second graph is built: the
/// program's nodes are the recording's live nodes), after it refuses a recording that reads
/// memory nothing recorded wrote (check_initialised).

#include <unordered_map>
#include <vector>

#include "tdfx/graph/graph.h"
#include "tdfx/tracer/leaf_calls.h"

namespace tdfx::detail {

/// A recording's runnable program.
struct FlatProgram {
  Graph graph;
  /// The key each placeholder reads, in order.
  std::vector<NestedKey> input_keys;
  /// The key each output is written to, in order.
  std::vector<NestedKey> out_keys;
};

/// The program of `recording` (see the file comment); `recording.graph` is moved into it.
/// The rest of `recording`, and `live`, `leaves` and the StateUpdates made from it, still
/// describe the program's nodes: fx_view can be made from them and the program afterwards.
FlatProgram flat_program(PipelineRecording& recording, const LiveNodes& live,
                         const LeafCalls& leaves);

/// TraceError when a live node reads a tensor the recording saw only allocated (`empty`,
/// `empty_like` and kin) and no recorded op wrote: its values were written outside the
/// dispatcher, as at::tensor({...}) copies its literal into an empty tensor, and the program
/// would read uninitialised memory. An allocation counts as written once an op writes into it
/// or into a view of it (fill_, copy_ into a slice, an `out=` argument); whether those writes
/// cover it whole is not checked.
void check_initialised(const PipelineRecording& recording, const LiveNodes& live);

}  // namespace tdfx::detail
