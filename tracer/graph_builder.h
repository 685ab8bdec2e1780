#pragma once

/// \file
/// Builds a tdfx Graph from a Recording: aten nodes become call_function
/// nodes with their schema, constants fold into arguments, list unpacking
/// becomes getitem, key reads become getitem or placeholders, and the ops of
/// leaf modules are outlined into call_module nodes that keep their body, one
/// per call (a Linear called twice gives `lin` and `lin_1`).
/// Node names follow the tensordict prototype tracer exactly (name_scopes.h); which ops
/// are leaf calls, leaf_regions.h finds. Unless the graph built is flat already, each node
/// also gets the name a flat build would give it (NodeMeta::program_name, torch.export's
/// names), which the program graph derived from this one takes.

#include <unordered_map>

#include "tdfx/graph/graph.h"
#include "tdfx/tracer/recorder.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx::detail {

/// What build_graph made besides the graph.
struct BuiltGraph {
  Graph graph;
  /// The keys that the graph reads, in placeholder/getitem order.
  std::vector<NestedKey> input_keys;
  /// The keys the outputs are written to, in output order.
  std::vector<NestedKey> output_keys;
  /// The node each recorded op became (the call_module node for the ops of a leaf's call).
  std::unordered_map<const torch::jit::Node*, Node*> origin;
};

/// Converts `recording`; node targets are paths from the graph root the recording was
/// made for (record's `strip_prefix`).
BuiltGraph build_graph(const Recording& recording, const TraceOptions& options);

}  // namespace tdfx::detail
