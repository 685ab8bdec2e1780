#pragma once

/// \file
/// Options of symbolic_trace.

#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

// is_builtin_leaf: what TraceOptions::is_leaf_module adds to, which a user's callback may ask.
#include "tdfx/tracer/builtin_layers.h"

namespace tdfx {

/// How a key read appears in the graph.
enum class KeyStyle {
  /// `getitem(tensordict, key)` at the point of the read (torch.fx style, seed 002).
  kGetItem,
  /// A placeholder named by the `_`-joined key (export style, seed 000).
  kPlaceholder,
};

/// Options of symbolic_trace.
struct TraceOptions {
  /// How a key read shows in the graph: a getitem of the `tensordict` placeholder (the default), or
  /// a placeholder of its own.
  KeyStyle key_style = KeyStyle::kGetItem;
  /// Show leaf modules as call_module nodes (with their op-level body).
  /// When false every op is inlined, as torch.export shows them.
  bool outline_leaves = true;
  /// With outline_leaves: ops that Python has only as Tensor methods (`view`,
  /// `contiguous`, `size`) and in-place ops (`sub_`, `add_`) become
  /// call_method nodes, as torch.fx records `x.view(...)`, so that the printed
  /// code is valid Python (`view = flatten.view([2, -1])`, not
  /// `torch.view(...)`). Each keeps the aten operator it was recorded from
  /// as its target (Target::method), which is what runs.
  bool method_calls = true;
  /// Declares more leaf modules, as torch.fx's `Tracer.is_leaf_module`:
  /// called with a module and its path from the graph root. Built-in
  /// torch::nn modules other than containers are always leaves. C++ modules
  /// have no call hook, so a leaf inside another module is found from the ops
  /// that read its parameters: each call is the run of ops from its first such
  /// read to its last, and reading a parameter again starts the next call. A
  /// user leaf therefore needs parameters, read once per call, unless a
  /// TensorDictModule wraps it directly.
  std::function<bool(const torch::nn::Module&, const std::string&)> is_leaf_module;
  /// The batch contract (dynamic_batch.h says exactly what is checked). false, the
  /// default: a static trace, as torch.export's. The module is recorded once, and a run at
  /// another batch size than the example's is a ShapeError naming the traced batch. true: a
  /// dynamic batch. The module is also recorded at each of batch_probes; what follows the
  /// batch becomes size nodes and prints as `s0`, and recordings that differ otherwise (a
  /// branch on `x.size(0)`) are a TraceError naming the first op where they part.
  bool dynamic_batch = false;
  /// With dynamic_batch: the batch sizes recorded besides the example's batch B, in order;
  /// empty: B + 1, 1 and 4B + 3 (2 and 7 when B is 1). The module runs once per batch;
  /// TDGraphModule::recorded_batches() says which. A module that cannot run at one of them
  /// (BatchNorm in training at batch 1) is a TraceError until the probes leave it out.
  std::vector<int64_t> batch_probes;
};

namespace detail {

/// True when a trace with `options` shows `module`, at `path` from the graph root, as a
/// leaf: a built-in layer (is_builtin_leaf) or one that options.is_leaf_module declares. The
/// recorder, the leaf finder and the choice of graph root all ask this one question.
inline bool is_leaf(const TraceOptions& options, const torch::nn::Module& module,
                    const std::string& path) {
  return is_builtin_leaf(module) ||
         (options.is_leaf_module && options.is_leaf_module(module, path));
}

}  // namespace detail
}  // namespace tdfx
