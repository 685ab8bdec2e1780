#pragma once

/// \file
/// record_pipeline: a TensorDict pipeline recorded by tdfx's recorder on the dispatcher
/// (dispatch_recorder.h), in one run of its own forward. The recording *is* the program, as
/// it ran: each example key read is a placeholder (named by its joined key, in read order),
/// each parameter or buffer a get_attr node where an op first reads it, each aten op a node
/// as it ran, the selected out keys the output tuple. Nothing is pruned or renamed here; the
/// forms users see are passes over it: the runnable flat program (program_pass.h) and the
/// FX view (fx_view.h), both told which ops are leaf calls by leaf_calls.h.
///
/// Beside the graph, the recording keeps where each op ran — which TensorDictModule call,
/// which child of a wrapped Sequential — and where each key was read, which the FX view needs
/// for its names and its getitem reads. Its nodes' metadata holds their tensors' types; the
/// passes give their own nodes the module that ran them (give_module), so that no module
/// string is copied into every recorded node.

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/dispatch_recorder.h"
#include "tdfx/tracer/module_state.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx::detail {

/// One call of a TensorDictModule during the recording.
struct RecordedCall {
  const TensorDictModule* module = nullptr;
  /// Path of the TensorDictModule from the graph root ("0", "0.module.1"), "" for a root module.
  std::string td_path;
  /// Path of the wrapped module from the graph root ("0.module"), "" when it is the root.
  std::string inner_path;
  /// The wrapped module as printed (`Linear(in_features=4, …)`): empty until give_modules
  /// (program_pass.h) describes it.
  std::string module_type;
  /// For each enclosing TensorDictSequential, innermost first: its level and child index.
  std::vector<std::pair<int, int>> levels;
  /// The nodes of its inputs (one per in key) and outputs (one per out key).
  std::vector<Node*> inputs, outputs;
};

/// The first read of an example key: its placeholder, and where in the recording it happened.
struct RecordedRead {
  Node* input = nullptr;
  NestedKey key = "?";
  /// The call that read it (an index into PipelineRecording::calls).
  size_t call = 0;
  /// The last node recorded before the read, nullptr when none was.
  const Node* after = nullptr;
  /// Whether the tensor the recording read was contiguous: `contiguous()` of a contiguous
  /// tensor never dispatches, so the recording holds no copy where the code asked for one.
  bool contiguous = true;
};

/// A child of a wrapped torch::nn::Sequential: its path (`0.module.2`) and description (empty
/// until give_modules, program_pass.h, describes `module`).
struct RecordedChild {
  std::string path, type;
  const torch::nn::Module* module = nullptr;
};

/// What record_pipeline recorded.
struct PipelineRecording {
  /// Placeholders (key reads), get_attr reads (paths from the graph root), aten calls and
  /// their items, one output tuple of the selected out keys' values. Every op recorded is
  /// here, also those nothing reads.
  Graph graph;
  /// The key reads, one per placeholder, in read order.
  std::vector<RecordedRead> reads;
  /// The key each output is written to, in order.
  std::vector<NestedKey> out_keys;
  std::vector<RecordedCall> calls;
  /// Number of TensorDictSequential levels (level 0 is the root).
  int level_count = 1;
  /// What node_call and node_child hold for a node without one.
  static constexpr size_t kNone = static_cast<size_t>(-1);
  /// The call each op, item and get_attr node was recorded in (an index into `calls`).
  NodeTable<size_t> node_call{kNone};
  std::vector<RecordedChild> children;
  /// The child of a wrapped Sequential that recorded each node (an index into `children`),
  /// where one did.
  NodeTable<size_t> node_child{kNone};
  /// Calls of ops recorded as the ops they call (a GRUCell's gru_cell), and the one each node
  /// was recorded inside, where one was (an index into `composites`).
  std::vector<CompositeCall> composites;
  NodeTable<size_t> node_composite{kNone};
  /// The item nodes of each op with several results (or a list), by index: all the recorder
  /// made, also those the program prunes, which a leaf call's body in the view still returns.
  std::unordered_map<const Node*, std::vector<Node*>> items;
  /// For a parameter or buffer bound at several paths (a layer shared by two
  /// TensorDictModules), every path, by the path its get_attr reads (the first, which comes
  /// first). A tensor with one path has no entry.
  std::unordered_map<std::string, std::vector<std::string>> state_paths;
  /// The pipeline's modules, parameters and buffers (the layout's).
  std::shared_ptr<const ModuleTable> table;
  /// For each get_attr of a parameter or buffer, the index in table->state() of the path it
  /// reads; kNone for every other node.
  NodeTable<size_t> node_state{kNone};
  /// For each index in table->state(), the index whose path a get_attr reads that tensor at:
  /// itself, or the first path of a tensor registered at several.
  std::vector<size_t> first_state;
  /// The paths of the tensors the pipeline captured (no input, parameter or buffer, nor
  /// computed from them), lifted as constants in the order first read, with their tensors.
  /// The parameters and buffers are `table`'s.
  std::vector<std::pair<std::string, at::Tensor>> constants;
  /// The example's batch size, when it has one.
  std::optional<int64_t> batch;

  /// The call `node` was recorded in, or calls.size() when none (a key read).
  size_t call_of(const Node* node) const {
    const size_t call = node_call.get(node);
    return call == kNone ? calls.size() : call;
  }
  /// Gives `meta` the TensorDictModule and module that recorded `node`: its call's wrapped
  /// module, or (`by_child`) the child of a wrapped Sequential that ran it. Nodes outside any
  /// call are left as they are.
  void give_module(const Node* node, NodeMeta& meta, bool by_child = true) const {
    const size_t call = call_of(node);
    if (call >= calls.size()) return;
    meta.td_module = calls[call].td_path;
    const size_t child = by_child ? node_child.get(node) : kNone;
    if (child != kNone) {
      meta.module_path = children[child].path;
      meta.module_type = children[child].type;
    } else {
      meta.module_path = calls[call].inner_path;
      meta.module_type = calls[call].module_type;
    }
  }
  /// `path` relative to the wrapped module of call `call` (`weight` for `0.module.weight` in
  /// the call of `0`), or `path` itself when it lies outside or there is no such call.
  std::string relative_to_call(const std::string& path, size_t call) const {
    if (call >= calls.size()) return path;
    const std::string& inner = calls[call].inner_path;
    if (inner.empty() || path.rfind(inner + ".", 0) != 0) return path;
    return path.substr(inner.size() + 1);
  }
};

/// Records `module.forward` run on a copy of `example`; `strip_prefix` is cut from the paths of
/// parameters and modules (the graph root may be a child of `module`, as "module" is of its
/// TensorDictModule). Neither changes: the keys it reads are copied before it may write into
/// them, the parameters and buffers it writes (BatchNorm's running statistics) are put back
/// after, as is the default generator. TraceError naming the module for a value read (`item`,
/// a branch on a tensor), a tensor the recording does not follow, a module that fails, or an
/// out key never written; KeyError for a missing key.
PipelineRecording record_pipeline(TensorDictModuleBase& module, const TensorDict& example,
                                  const std::string& strip_prefix = "");

/// What every recording of one pipeline starts from: the calls of its TensorDictModules as its
/// structure plans them, and its parameters and buffers with their paths. A dynamic trace
/// records the pipeline several times and works this out once.
struct PipelineLayout {
  /// Each TensorDictModule's calls, in call order.
  std::unordered_map<const TensorDictModule*, std::vector<RecordedCall>> calls;
  /// Number of TensorDictSequential levels (level 0 is the root).
  int level_count = 1;
  /// The pipeline's modules, and its parameters then defined buffers in module order, with
  /// paths from the graph root; every recording of the layout shares it.
  std::shared_ptr<const ModuleTable> table;
  /// Every module of the pipeline with its place, in walk order: what the module view's boxes
  /// are made from (detail::pipeline_modules) without walking the pipeline again.
  PipelinePlaces places;
};

/// The layout of `module` with `strip_prefix` cut from its paths; TraceError for a module
/// tdfx cannot trace (refuse_untraceable_layers).
PipelineLayout pipeline_layout(TensorDictModuleBase& module, const std::string& strip_prefix);

/// record_pipeline from a layout pipeline_layout made of the same module (its paths already
/// stripped).
PipelineRecording record_pipeline(TensorDictModuleBase& module, const TensorDict& example,
                                  const PipelineLayout& layout);

}  // namespace tdfx::detail
