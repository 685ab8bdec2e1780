#include "tdfx/tracer/program_pass.h"

#include <algorithm>
#include <string_view>

#include "tdfx/core/error.h"
#include "tdfx/graph/effects.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/name_scopes.h"

namespace tdfx::detail {
namespace {

std::string describe_call(const PipelineRecording& recording, size_t call) {
  if (call >= recording.calls.size()) return "the traced module";
  return recording.calls[call].module->describe();
}

}  // namespace

void check_initialised(const PipelineRecording& recording, const LiveNodes& live) {
  // Each allocation or view of one not yet written, and the allocation it belongs to.
  std::unordered_map<const Node*, const Node*> unwritten;
  std::unordered_set<const Node*> written;
  auto refuse = [&](const Node* root, const std::string& reader, size_t call) {
    fail<TraceError>(
        "{}: {} reads a tensor the trace saw only allocated (aten::{}), never written by a "
        "recorded op, so the program would read uninitialised memory; a tensor literal "
        "(at::tensor({{...}})) is written outside the recorded ops: make it a buffer "
        "(register_buffer) or build it with a recorded factory (at::arange, at::full)",
        describe_call(recording, call), reader, root->target().op_name());
  };
  // Most programs allocate nothing uninitialised: then nothing below can be found.
  auto allocates = [](const Node* node) {
    return node->op() == OpCode::kCallFunction && effect_of(*node) == "uninitialised";
  };
  const auto& nodes = recording.graph.nodes();
  if (std::none_of(nodes.begin(), nodes.end(), allocates)) return;
  for (const Node* node : nodes) {
    if (!live.contains(node)) continue;
    if (node->op() == OpCode::kOutput) {
      const auto& results = node->args().at(0).as<ArgumentList>().items;
      for (size_t i = 0; i < results.size(); ++i) {
        auto it = unwritten.find(results[i].node());
        if (it != unwritten.end() && !written.count(it->second)) {
          refuse(it->second, "output " + recording.out_keys.at(i).repr(), recording.calls.size());
        }
      }
      continue;
    }
    const bool aten = node->op() == OpCode::kCallFunction && node->target().is_aten();
    const c10::FunctionSchema* schema = aten ? &node->target().schema() : nullptr;
    auto writes = [&](size_t i) {
      if (!schema || i >= schema->arguments().size()) return false;
      const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
      return alias && alias->isWrite();
    };
    const bool view = schema && !schema->arguments().empty() && schema->returns().size() == 1 &&
                      schema->arguments()[0].alias_info() && schema->returns()[0].alias_info() &&
                      !schema->arguments()[0].alias_info()->isWrite() &&
                      !schema->returns()[0].alias_info()->isWrite();
    for (size_t i = 0; i < node->args().size(); ++i) {
      for_each_node(node->args()[i], [&](Node* input) {
        auto it = unwritten.find(input);
        if (it == unwritten.end() || written.count(it->second)) return;
        const Node* root = it->second;
        if (writes(i)) {
          written.insert(root);
        } else if (i == 0 && view) {
          unwritten[node] = root;
        } else {
          const std::string reader =
              aten ? "aten::" + node->target().op_name() : node->target().str();
          refuse(root, reader, recording.call_of(node));
        }
      });
    }
    if (allocates(node)) unwritten[node] = node;
  }
}

ProgramNames::ProgramNames(const PipelineRecording& recording)
    : recording_(recording), scopes_(recording) {}

std::string ProgramNames::operator()(const Node& node) {
  switch (node.op()) {
    case OpCode::kPlaceholder:
      return node.name();
    case OpCode::kGetAttr:
      return scoped(node,
                    recording_.relative_to_call(node.target().str(), recording_.call_of(&node)));
    case OpCode::kCallFunction:
      return scoped(node, node.target().is_getitem()
                              ? "getitem"
                              : fx_name(node.target(), node.args(), node.kwargs()));
    default:
      return "";
  }
}

std::string ProgramNames::scoped(const Node& node, const std::string& base) {
  const size_t call = recording_.call_of(&node);
  return call < recording_.calls.size() ? scopes_.node_name(call, base, node.op()) : base;
}

FlatProgram prune_program(PipelineRecording& recording, const LiveNodes& live) {
  check_initialised(recording, live);
  FlatProgram out;
  for (const RecordedRead& read : recording.reads) {
    out.input_keys.push_back(read.key);
    out.input_contiguous.push_back(read.contiguous);
  }
  out.out_keys = recording.out_keys;
  Graph& graph = recording.graph;
  std::vector<Node*> dead;
  // For each dead node, the last live node before it: a key read recorded after a dead node is
  // recorded after that one instead, so that the view (fx_view), made from the program, still
  // emits it in its place.
  std::unordered_map<const Node*, const Node*> live_before;
  const Node* last_live = nullptr;
  for (Node* node : graph.nodes()) {
    if (!live.contains(node)) {
      dead.push_back(node);
      live_before[node] = last_live;
      continue;
    }
    last_live = node;
  }
  for (RecordedRead& read : recording.reads) {
    auto it = read.after ? live_before.find(read.after) : live_before.end();
    if (it != live_before.end()) read.after = it->second;
  }
  // The composite calls name only nodes that stay.
  for (CompositeCall& composite : recording.composites) {
    for (Node*& node : composite.inputs) node = node && live.contains(node) ? node : nullptr;
    for (Node*& node : composite.results) node = node && live.contains(node) ? node : nullptr;
  }
  // A dead node's users are dead and come after it: erased last first, none has users left.
  for (auto it = dead.rbegin(); it != dead.rend(); ++it) graph.erase_node(*it);
  out.graph = std::move(graph);
  return out;
}

void describe_modules(PipelineRecording& recording) {
  for (RecordedCall& call : recording.calls) {
    if (call.module_type.empty()) call.module_type = describe_module(*call.module->inner_ptr());
  }
  for (RecordedChild& child : recording.children) {
    if (child.type.empty()) child.type = describe_module(*child.module);
  }
}

LeafCalls give_modules(const Graph& program, PipelineRecording& recording, const LiveNodes& live,
                       const StateUpdates& updates, const TraceOptions& options, bool state_reads) {
  describe_modules(recording);
  LeafCalls leaves = find_leaf_calls(program, recording, live, updates, options);
  for (Node* node : program.nodes()) {
    if (node->op() == OpCode::kOutput) continue;
    if (!state_reads && node->op() == OpCode::kGetAttr) continue;
    // A parameter belongs to the leaf call that first reads it.
    Node* reader = node->op() == OpCode::kGetAttr ? live.first_user(node) : nullptr;
    if (const LeafCall* leaf = leaves.find(reader ? reader : node)) {
      node->meta().td_module = recording.calls[leaf->call].td_path;
      node->meta().module_path = leaf->target;
      node->meta().module_type = leaf->module_type;
    } else {
      recording.give_module(node, node->meta());
    }
  }
  return leaves;
}

FlatProgram flat_program(PipelineRecording& recording, const LiveNodes& live,
                         const StateUpdates& updates, const TraceOptions& options) {
  const size_t recorded = recording.graph.size();
  FlatProgram out = prune_program(recording, live);
  give_modules(out.graph, recording, live, updates, options, /*state_reads=*/false);
  // Named in one namespace, as torch.export names a program's ops (`linear`, `relu`,
  // `linear_1`). The recorder named each op so as it ran, in the graph's one namespace; but
  // it named them before anything was known to be dead, so where the program lost a node the
  // ops are named afresh and a pruned op leaves no gap in the names. export_program, this
  // pass's user, lifts every get_attr to a placeholder named for its path (lift_parameters),
  // which replaces the name it would get here: it keeps the recorder's, as placeholders keep
  // theirs.
  if (out.graph.size() == recorded) return out;
  out.graph.rename_all([](const Node& node) {
    if (node.op() != OpCode::kCallFunction) return node.name();
    return node.target().is_getitem() ? std::string("getitem")
                                      : fx_name(node.target(), node.args(), node.kwargs());
  });
  return out;
}

}  // namespace tdfx::detail
