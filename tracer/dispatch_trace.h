#pragma once

/// \file
/// record_program: a TensorDict pipeline recorded by tdfx's recorder on the dispatcher
/// (dispatch_recorder.h) into its flat program graph, in one run of its own forward — the
/// recording *is* the program: each example key read becomes a placeholder (named by its
/// joined key, in read order), each parameter or buffer a get_attr node where an op first
/// reads it, each aten op a node as it runs, the selected out keys the output tuple.
/// export_program(module, inputs, {.dispatch_recorder = true}) exports it; the JIT-based
/// symbolic_trace stays the default until this recorder builds the FX view too (issue 36).
///
/// Each node's meta names its TensorDictModule (`td_module`) and module: the built-in layer
/// whose parameters it reads, the child of a wrapped Sequential that ran it, or else the
/// wrapped module.

#include <optional>
#include <vector>

#include "tdfx/graph/graph.h"
#include "tdfx/tensordict/modules.h"

namespace tdfx::detail {

/// What record_program recorded.
struct RecordedProgram {
  /// Placeholders, get_attr reads (paths from the recorded module), aten calls, one output
  /// tuple of the selected out keys' values.
  Graph graph;
  /// The key each placeholder reads, in order.
  std::vector<NestedKey> input_keys;
  /// The key each output is written to, in order.
  std::vector<NestedKey> out_keys;
  /// The example's batch size, when it has one.
  std::optional<int64_t> batch;
};

/// Records `module.forward` run on a copy of `example`. Neither changes: the keys it reads
/// are copied before it may write into them, the parameters and buffers it writes (BatchNorm's
/// running statistics) are put back after, as is the default generator. TraceError naming
/// the module for a value read (`item`, a branch on a tensor), a tensor the recording does not
/// follow, or an out key never written; KeyError for a missing key.
RecordedProgram record_program(TensorDictModuleBase& module, const TensorDict& example);

}  // namespace tdfx::detail
