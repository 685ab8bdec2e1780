#pragma once

/// \file
/// fx_view: the graph torch.fx would print for a PipelineRecording — a pass over the
/// recording, which is the program. Key reads become `getitem(tensordict, key)` at the point of
/// the read (or placeholders, KeyStyle::kPlaceholder); the ops of each leaf call (leaf_calls.h)
/// become one call_module node that keeps its body, one per call (a Linear called twice gives
/// `lin` and `lin_1`); multi-result ops give getitem nodes for the items something reads; ops
/// Python has only as Tensor methods become call_method nodes (TraceOptions::method_calls).
/// Node names follow the tensordict prototype tracer exactly (name_scopes.h).
///
/// The view prints; the flat program (program_pass.h) runs. An edited view runs once
/// TDGraphModule::recompile() lowers it again.

#include <unordered_map>
#include <vector>

#include "tdfx/graph/graph.h"
#include "tdfx/tracer/leaf_calls.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx::detail {

/// What fx_view made besides the graph.
struct FxView {
  Graph graph;
  /// The keys that the graph reads, in placeholder/getitem order.
  std::vector<NestedKey> input_keys;
  /// The keys the outputs are written to, in output order.
  std::vector<NestedKey> output_keys;
  /// The view node each recorded node became (the call_module node for the ops of a leaf call).
  std::unordered_map<const Node*, Node*> origin;
};

/// The FX view of `recording` (see the file comment); node targets are paths from the graph
/// root the recording was made for. `graph` holds the recording's nodes: `recording.graph`, or
/// the program flat_program made of it (it keeps their order and PipelineRecording::items keeps
/// the items it prunes), which is how TDGraphModule builds the view on first use.
FxView fx_view(const Graph& graph, const PipelineRecording& recording, const LiveNodes& live,
               const LeafCalls& leaves, const StateUpdates& updates, const TraceOptions& options);

}  // namespace tdfx::detail
