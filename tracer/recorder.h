#pragma once

/// \file
/// Recorder: runs a TensorDict module's own forward once under LibTorch's JIT
/// tracer, as the KeyAccessHook of its reads and calls, and keeps what the
/// graph builder needs — the recorded jit graph, which jit nodes read which
/// key, which TensorDictModule call produced which nodes, and the traced
/// value of every selected out key at the end.

#include <torch/csrc/jit/ir/ir.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tdfx/core/nested_key.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx::detail {

/// One call of a TensorDictModule during the trace.
struct ModuleCall {
  const TensorDictModule* module = nullptr;
  /// Path of the TensorDictModule from the graph root ("0", "0.module.1"), "" for a root module.
  std::string td_path;
  /// Path of the wrapped module from the graph root ("0.module"), "" when it is the root.
  std::string inner_path;
  /// The wrapped module as printed (`Linear(in_features=4, …)`), every node's module_type.
  std::string module_type;
  /// For each enclosing TensorDictSequential, innermost first: its index and child index.
  std::vector<std::pair<int, int>> levels;
  /// The jit nodes its wrapped module recorded that something needs, in order (key reads
  /// excluded).
  std::vector<torch::jit::Node*> nodes;
  /// The jit values of its inputs (one per in key) and outputs (one per out key), without
  /// those the trace pruned because nothing needed them (all, for a call whose outputs are
  /// never read).
  std::vector<torch::jit::Value*> inputs, outputs;
};

/// A key read recorded as a `tdfx::read` jit node.
struct KeyRead {
  NestedKey key = "?";
  size_t call = 0;  // index into Recording::calls of the module that read it first
};

/// Everything one trace recorded.
struct Recording {
  std::shared_ptr<torch::jit::Graph> graph;
  /// Graph inputs that are parameters or buffers, by path from the graph root. A tensor
  /// registered at several paths (a layer shared by two TensorDictModules) is one input with
  /// its first path here and all of them in parameter_paths.
  std::unordered_map<const torch::jit::Value*, std::string> parameters;
  std::unordered_map<const torch::jit::Value*, std::vector<std::string>> parameter_paths;
  std::unordered_map<const torch::jit::Node*, KeyRead> reads;
  std::vector<ModuleCall> calls;
  /// Number of TensorDictSequential levels (level 0 is the root).
  int level_count = 1;
  /// For each output key (selected out keys, in out_keys order), its jit value.
  std::vector<std::pair<NestedKey, torch::jit::Value*>> outputs;
  /// For each jit node, the index of the ModuleCall that produced it.
  std::unordered_map<const torch::jit::Node*, size_t> node_call;
  /// A child of a wrapped torch::nn::Sequential: its path (`0.module.2`) and its description.
  struct Child {
    std::string path, type;
  };
  std::vector<Child> children;
  /// The jit nodes a child recorded, and the child (an index into `children`); a node not here
  /// belongs to its call's wrapped module.
  std::unordered_map<const torch::jit::Node*, size_t> node_child;
  /// The dimensions of tensor values that follow the batch size (set by generalise_batch in
  /// batch_generalise.h); printed `s0`.
  std::unordered_map<const torch::jit::Value*, std::vector<int64_t>> batch_dims;
};

/// Records `module.forward` run on `example`: key reads, writes and selected out keys behave
/// as in eager mode, because they are eager mode. `strip_prefix` is cut from parameter paths
/// (the graph root may be a child of `module`, as "module" is of its TensorDictModule). Throws
/// TraceError naming the module on failure; never leaves tracing state behind.
/// A module that turns a traced tensor into a C++ value (`item`, `is_nonzero`,
/// `equal`, `allclose`, as a branch on a tensor does) is a TraceError naming the
/// op, as torch.fx refuses control flow on traced values. Nodes that no output
/// needs are not kept, unless they mutate, draw random numbers or update
/// running statistics; the outputs of a call that `options` makes a leaf (one
/// call_module node) are kept or dropped together.
/// The module runs on copies of `example`'s tensors, and its parameters and
/// buffers and the default CPU generator's state are put back as they were
/// afterwards (also on failure), so neither the example, the module nor the
/// generator changes (BatchNorm's running statistics stay; a Dropout draws
/// the same mask in the next recording as in this one).
Recording record(TensorDictModuleBase& module, const TensorDict& example,
                 const std::string& strip_prefix, const TraceOptions& options = {});

}  // namespace tdfx::detail
