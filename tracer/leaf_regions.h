#pragma once

/// \file
/// Finding the calls of leaf modules in a recording. A TensorDictModule's call is known from
/// the recorder's hook; a leaf inside a wrapped module (the Linear in a user's MLP) is not,
/// because C++ modules have no call hook. Its calls are found from the ops that read its
/// parameters instead: each call is the run of ops from its first such read to its last,
/// with what it computes alone before (LSTM's zero state), and reading a parameter again
/// starts the next call. The graph builder outlines each region into one call_module node.
///
///     // the ops of a call of MLP(lin1, relu, lin2) on a matrix:  t addmm relu t addmm
///     // regions:  lin1 = [t addmm]  lin2 = [t addmm]; relu stays inline

#include <torch/csrc/jit/ir/ir.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tdfx/tracer/recorder.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx::detail {

/// A run of jit nodes that one call of a leaf module recorded.
struct LeafRegion {
  /// The nodes, in program order.
  std::vector<torch::jit::Node*> nodes;
  /// The leaf's path from the graph root (`0.module.lin`; `module` for a root leaf).
  std::string target;
  /// The name its call_module node is made from (`lin`, or `linear` for a wrapped leaf).
  std::string base_name;
  const torch::nn::Module* module = nullptr;
  /// The TensorDictModule call it is part of (an index into Recording::calls).
  size_t call = 0;
  /// The values it reads from outside (parameters and constants aside), in order of first
  /// read; and those read after it, in program order.
  std::vector<torch::jit::Value*> inputs;
  std::vector<torch::jit::Value*> outputs;
  /// For a recurrent layer (aten::lstm, gru, rnn_tanh, rnn_relu as its last op), that op: the
  /// call returns what Python's does, `(output, (h, c))` or `(output, h)`, and its users pick
  /// from it with getitem.
  const torch::jit::Node* recurrent = nullptr;
};

/// The in-place updates of parameters and buffers in a recording
/// (`num_batches_tracked.add_(1)`): the JIT trace gives their results new values, but they are
/// the parameter, updated. Both the finder and the graph builder read them as the parameter.
class ParameterUpdates {
 public:
  /// Finds the updates in `recording`'s graph.
  explicit ParameterUpdates(const Recording& recording);

  /// The parameter or buffer that `value` is after in-place updates, else `value`.
  const torch::jit::Value* parameter_of(const torch::jit::Value* value) const;

 private:
  std::unordered_map<const torch::jit::Value*, const torch::jit::Value*> updates_;
};

/// True for a prim::Constant, or a list or tuple built of constants only: a value the graph
/// builder folds into arguments, which therefore belongs to no region.
bool is_constant_expression(const torch::jit::Value* value);

/// The leaf regions of a recording, none overlapping.
struct LeafRegions {
  /// In the order found: TensorDictModule calls in order, and within one, its leaves in
  /// named_modules order.
  std::vector<LeafRegion> regions;
  /// Every node of a region: the graph builder emits those only as part of their region.
  std::unordered_set<const torch::jit::Node*> nodes;
  /// The index into `regions` of the region that starts at each node.
  std::unordered_map<const torch::jit::Node*, size_t> starts;
};

/// The calls of leaf modules (TraceOptions::is_leaf_module and the built-in layers) in
/// `recording`: a TensorDictModule whose wrapped module is a leaf is one region; inside
/// another, each leaf's calls are found from its parameter reads (see the file comment). A
/// leaf that outlines hides its children; one that does not (no call found) shows theirs.
/// A run that would overlap an earlier region stays inline.
LeafRegions find_leaf_regions(const Recording& recording, const TraceOptions& options,
                              const ParameterUpdates& updates);

}  // namespace tdfx::detail
