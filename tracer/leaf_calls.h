#pragma once

/// \file
/// Two analyses of a PipelineRecording that every pass over it shares:
/// - which of its nodes live: those the outputs need, and those called for their effect;
/// - which runs of its ops are calls of leaf modules. A TensorDictModule's call is known from
///   the recorder's hook; a leaf inside a wrapped module (the Linear in a user's MLP) is not,
///   because C++ modules have no call hook. Its calls are found from the ops that read its
///   parameters instead: each call is the run of ops from its first such read to its last,
///   with what it computes alone before (LSTM's zero state), and reading a parameter again
///   starts the next call. The FX view outlines each into one call_module node; the flat
///   program names each op's module by it.
///
///     // the ops of a call of MLP(lin1, relu, lin2) on a matrix:  t addmm relu t addmm
///     // leaf calls:  lin1 = [t addmm]  lin2 = [t addmm]; relu stays inline

#include <torch/nn/module.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tdfx/tracer/dispatch_trace.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx::detail {

/// The nodes of a recording that the passes over it keep: placeholders, the output, what the
/// outputs need, and ops with an effect (has_effect, graph/effects.h) with what they read. The
/// outputs of a call that `options` shows as one call_module node are kept or dropped together.
class LiveNodes {
 public:
  LiveNodes(const PipelineRecording& recording, const TraceOptions& options);
  /// `node` is one of the recording's nodes (a table by Node::index()).
  bool contains(const Node* node) const { return live_.get(node) != 0; }
  /// The users of `node` that live, in order.
  std::vector<Node*> users(const Node* node) const;
  /// The first user of `node` that lives, or nullptr.
  Node* first_user(const Node* node) const;

 private:
  NodeTable<char> live_;
};

/// The op that the item `node` (`getitem(lstm, 1)`, which the recorder makes for each result
/// of a multi-result op) picks from, else nullptr.
Node* item_source(const Node& node);

/// One call of a leaf module.
struct LeafCall {
  /// Its nodes in program order, the items of its multi-result ops among them.
  std::vector<Node*> nodes;
  /// The leaf's path from the graph root (`0.module.lin`; `module` for a root leaf).
  std::string target;
  /// The name its call_module node is made from (`lin`, or `linear` for a wrapped leaf).
  std::string base_name;
  const torch::nn::Module* module = nullptr;
  /// The module as printed (describe_module), made once per call.
  std::string module_type;
  /// The TensorDictModule call it is part of (an index into PipelineRecording::calls).
  size_t call = 0;
  /// The nodes it reads from outside (parameters aside), in the order its last op takes them;
  /// and those read after it, in program order.
  std::vector<Node*> inputs, outputs;
  /// For a call of a cell op with several results (lstm_cell's h and c, a CompositeCall), all
  /// of them, as Python's call returns them; else empty: the call returns its `outputs`.
  std::vector<Node*> cell_results;
  /// What its call_module node returns, in order.
  const std::vector<Node*>& returns() const {
    return cell_results.empty() ? outputs : cell_results;
  }
  /// The call of a cell op (a GRUCell's gru_cell, a CompositeCall) whose ops this call's are,
  /// else nullptr: its inputs come in that op's argument order.
  const CompositeCall* composite = nullptr;
  /// For a recurrent layer (lstm, gru, rnn_tanh, rnn_relu as its last op, its outputs all that
  /// op's items), that op: the call returns what Python's does, `(output, (h, c))` or
  /// `(output, h)`, and its users pick from it with getitem.
  const Node* recurrent = nullptr;
};

/// The leaf calls of a recording, none overlapping.
struct LeafCalls {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  /// TensorDictModule calls in order, and within one, its leaves in named_modules order.
  std::vector<LeafCall> calls;
  /// The index into `calls` of the call each node belongs to (kNone: none).
  NodeTable<size_t> of_node{kNone};
  /// The index into `calls` of the call that starts at each node (kNone: none starts there).
  NodeTable<size_t> starts{kNone};

  /// The leaf call `node` belongs to, or nullptr.
  const LeafCall* find(const Node* node) const {
    const size_t call = of_node.get(node);
    return call == kNone ? nullptr : &calls[call];
  }
  /// The leaf call whose first node is `node`, or nullptr.
  const LeafCall* starting_at(const Node* node) const {
    const size_t call = starts.get(node);
    return call == kNone ? nullptr : &calls[call];
  }
};

/// In-place updates of parameters and buffers (`num_batches_tracked.add_(1)`): their results
/// are the parameter, updated; leaf calls and the FX view read them as the parameter.
class StateUpdates {
 public:
  explicit StateUpdates(const PipelineRecording& recording);
  /// The get_attr node `node` updates in place (through a chain of updates), else `node`.
  Node* state_of(Node* node) const;

 private:
  NodeTable<Node*> updates_{nullptr};
};

/// The calls of leaf modules (TraceOptions::is_leaf_module and the built-in layers) among the
/// `live` nodes of `recording`: a TensorDictModule whose wrapped module is a leaf is one call;
/// inside another, each leaf's calls are found from its parameter reads (see the file
/// comment). A leaf that outlines hides its children; one that does not (no call found) shows
/// theirs. A run that would overlap an earlier call stays inline. None without
/// TraceOptions::outline_leaves: every op then shows as itself. `graph` holds the recording's
/// nodes: `recording.graph`, or the program prune_program made of it (only dead nodes are gone,
/// and the calls are found among the live ones).
LeafCalls find_leaf_calls(const Graph& graph, const PipelineRecording& recording,
                          const LiveNodes& live, const StateUpdates& updates,
                          const TraceOptions& options);

}  // namespace tdfx::detail
