#include "tdfx/tracer/leaf_calls.h"

#include <algorithm>

#include "tdfx/core/error.h"
#include "tdfx/graph/effects.h"
#include "tdfx/tracer/builtin_layers.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx::detail {
namespace {

bool is_aten_call(const Node& node) {
  return node.op() == OpCode::kCallFunction && node.target().is_aten();
}

}  // namespace

Node* item_source(const Node& node) {
  if (node.op() != OpCode::kCallFunction || !node.target().is_getitem()) return nullptr;
  return node.args().at(0).node();
}

LiveNodes::LiveNodes(const PipelineRecording& recording, const TraceOptions& options) {
  // A call shown whole as one call_module node has all of the call's outputs.
  auto outlined_whole = [&](const RecordedCall& call) {
    return options.outline_leaves && is_leaf(options, *call.module->inner_ptr(), call.inner_path);
  };
  NodeTable<char> needed;
  const std::vector<Node*> nodes = recording.graph.node_list();
  size_t current = recording.calls.size();
  size_t current_composite = PipelineRecording::kNone;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* node = *it;
    // A composite op's results (lstm_cell's h and c) are what a leaf's call returns: kept or
    // dropped together. Its nodes are contiguous and every reader of its results comes after
    // them, so whether one is needed is known at its last node, met first.
    const size_t composite = recording.node_composite.get(node);
    if (composite != current_composite) {
      current_composite = composite;
      if (composite != PipelineRecording::kNone && options.outline_leaves) {
        const std::vector<Node*>& results = recording.composites[composite].results;
        const bool any = std::any_of(results.begin(), results.end(),
                                     [&](const Node* r) { return r && needed.get(r) != 0; });
        for (const Node* r : results) {
          if (any && r) needed.set(r, 1);
        }
      }
    }
    // Nodes of one TensorDictModule call are contiguous: its last is met first, once the calls
    // after it are done.
    const size_t call = recording.call_of(node);
    if (call != current && call < recording.calls.size()) {
      current = call;
      const RecordedCall& c = recording.calls[call];
      bool outputs_needed = false;
      for (const Node* out : c.outputs) outputs_needed |= needed.get(out) != 0;
      if (outputs_needed && outlined_whole(c)) {
        for (const Node* out : c.outputs) needed.set(out, 1);
      }
    }
    const bool live = node->op() == OpCode::kPlaceholder || node->op() == OpCode::kOutput ||
                      needed.get(node) != 0 || has_effect(*node);
    if (!live) continue;
    live_.set(node, 1);
    for (Node* input : node->input_nodes()) needed.set(input, 1);
  }
}

Node* LiveNodes::first_user(const Node* node) const {
  for (Node* user : node->users()) {
    if (contains(user)) return user;
  }
  return nullptr;
}

std::vector<Node*> LiveNodes::users(const Node* node) const {
  std::vector<Node*> users;
  for (Node* user : node->users()) {
    if (contains(user)) users.push_back(user);
  }
  return users;
}

StateUpdates::StateUpdates(const PipelineRecording& recording) {
  for (Node* node : recording.graph.nodes()) {
    if (!is_aten_call(*node) || node->args().empty()) continue;
    Node* self = node->args()[0].node();
    if (!self) continue;
    Node* root = state_of(self);
    if (root->op() != OpCode::kGetAttr) continue;
    // In-place ops are named with a trailing `_`; the schema says it writes its first argument.
    const std::string& name = node->target().op_name();
    if (name.empty() || name.back() != '_') continue;
    const auto& formals = node->target().schema().arguments();
    if (formals.empty() || !formals[0].alias_info() || !formals[0].alias_info()->isWrite()) {
      continue;
    }
    updates_.set(node, root);
  }
}

Node* StateUpdates::state_of(Node* node) const {
  Node* root = updates_.get(node);
  return root ? root : node;
}

namespace {

// A run of nodes in an array, as a range.
struct NodeSpan {
  Node* const* first;
  Node* const* last;
  Node* const* begin() const { return first; }
  Node* const* end() const { return last; }
  size_t size() const { return static_cast<size_t>(last - first); }
  bool empty() const { return first == last; }
  Node* operator[](size_t i) const { return first[i]; }
};

class LeafCallFinder {
 public:
  LeafCallFinder(const Graph& graph, const PipelineRecording& recording, const LiveNodes& live,
                 const StateUpdates& updates, const TraceOptions& options)
      : recording_(recording),
        table_(*recording.table),
        live_(live),
        updates_(updates),
        options_(options) {
    // The get_attr node reading each tensor, at the first path of each (the last read where
    // there are several); and each call's live nodes but get_attr reads, in one array:
    // counted here, then placed.
    std::vector<Node*> read_at(table_.state().size(), nullptr);
    const size_t calls = recording.calls.size();
    call_begin_.assign(calls + 1, 0);
    auto call_of = [&](const Node* node) {
      const size_t call = node->op() == OpCode::kGetAttr ? calls : recording.call_of(node);
      return call < calls && live.contains(node) ? call : calls;
    };
    for (Node* node : graph.nodes()) {
      if (node->op() == OpCode::kGetAttr) {
        const size_t index = recording.node_state.get(node);
        if (index != PipelineRecording::kNone) read_at[index] = node;
      } else if (const size_t call = call_of(node); call < calls) {
        ++call_begin_[call + 1];
      }
    }
    for (size_t c = 0; c < calls; ++c) call_begin_[c + 1] += call_begin_[c];
    call_nodes_.resize(call_begin_[calls]);
    std::vector<size_t> next(call_begin_.begin(), call_begin_.end() - 1);
    for (Node* node : graph.nodes()) {
      const size_t call = call_of(node);
      if (call < calls) call_nodes_[next[call]++] = node;
    }
    state_node_.resize(read_at.size());
    for (size_t i = 0; i < read_at.size(); ++i) state_node_[i] = read_at[recording.first_state[i]];
    for (const Node* out : graph.output_node()->input_nodes()) escaping_.insert(out);
    for (const RecordedCall& call : recording.calls) {
      for (const Node* out : call.outputs) {
        if (out) escaping_.insert(out);
      }
    }
  }

  LeafCalls find() {
    if (!options_.outline_leaves) return {};
    out_.calls.reserve(recording_.calls.size());  // most calls have one leaf, or are one
    for (size_t c = 0; c < recording_.calls.size(); ++c) {
      const RecordedCall& call = recording_.calls[c];
      const torch::nn::Module& inner = *call.module->inner_ptr();
      if (is_leaf(options_, inner, call.inner_path)) {
        const NodeSpan nodes = nodes_of(c);
        if (nodes.empty()) continue;
        LeafCall leaf;
        leaf.nodes.assign(nodes.begin(), nodes.end());
        leaf.target = call.inner_path.empty() ? "module" : call.inner_path;
        leaf.base_name = snake_case(short_type(inner));
        leaf.module = &inner;
        leaf.module_type = describe_module(inner);
        leaf.call = c;
        for (Node* input : call.inputs) {
          if (input && live_.contains(input)) leaf.inputs.push_back(input);
        }
        for (Node* output : call.outputs) {
          if (output && live_.contains(output)) leaf.outputs.push_back(output);
        }
        add(std::move(leaf));
        continue;
      }
      const ModuleEntry* top = table_.find(inner, call.inner_path);
      if (!top) {
        throw InternalError("find_leaf_calls: the module table has no module at '" +
                            call.inner_path + "'");
      }
      const std::vector<ModuleEntry>& modules = table_.modules();
      for (size_t e = static_cast<size_t>(top - modules.data()) + 1; e < top->end;) {
        const ModuleEntry& entry = modules[e];
        bool found = false;
        if (is_leaf(options_, *entry.module, entry.path)) {
          found = add_calls_from_parameters(c, entry);
        }
        // A leaf that outlines hides its children; one that does not shows theirs.
        e = found ? entry.end : e + 1;
      }
    }
    return std::move(out_);
  }

 private:
  // Call `c`'s live nodes but get_attr reads, in order.
  NodeSpan nodes_of(size_t c) const {
    return {call_nodes_.data() + call_begin_[c], call_nodes_.data() + call_begin_[c + 1]};
  }

  // The calls of the leaf module `entry` (below call `c`'s wrapped module), found from the
  // nodes that read its parameters: each call is a contiguous run of them, and a parameter
  // read again starts the next call (C++ runs a call's ops one after another, and but for
  // attention no built-in layer reads a parameter twice). A run becomes a call when it takes
  // at least one tensor from outside, gives at least one value, and holds the op its layer
  // records (ops_a_call_records); others stay inline as the ops they are (a weight read by
  // user code, `torch.t(self.emb.weight)`). Each call is added (add); true when one was.
  bool add_calls_from_parameters(size_t c, const ModuleEntry& entry) {
    const torch::nn::Module& module = *entry.module;
    const NodeSpan nodes = nodes_of(c);
    params_.clear();
    bool any_param = false;
    auto add_reads = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        if (Node* node = state_node_[i]) {
          params_.insert(node);
          any_param = true;
        }
      }
    };
    add_reads(entry.parameters_begin, entry.parameters_end);
    add_reads(entry.buffers_begin, entry.buffers_end);
    if (!any_param) return false;
    // In attention (and the transformer layers built on it), which reads its packed
    // in_proj_weight once each for query, key and value before its out_proj, a parameter read
    // again starts the next call only once the call has read every parameter of the layer.
    std::vector<const Node*> required;
    if (reads_parameters_repeatedly(module)) {
      for (size_t i = entry.parameters_begin; i < entry.parameters_end; ++i) {
        if (Node* node = state_node_[i]) required.push_back(node);
      }
    }
    auto complete = [&] {
      return std::all_of(required.begin(), required.end(),
                         [&](const Node* p) { return read_.contains(p); });
    };
    auto is_param = [&](Node* n) { return params_.contains(updates_.state_of(n)); };
    // Values computed from the parameters alone (`weight.t()`) stand for them: their readers
    // are part of the call, and reading one again is no new call. A parameter updated in place
    // (BatchNorm's num_batches_tracked += 1) is still that parameter.
    derived_.clear();
    read_.clear();
    std::vector<const Node*>& derived = derived_list_;
    derived.clear();
    std::vector<std::pair<size_t, size_t>>& runs = runs_;  // [first, last] indices into nodes
    runs.clear();
    for (size_t i = 0; i < nodes.size(); ++i) {
      Node* node = nodes[i];
      if (Node* source = item_source(*node)) {
        // An item goes with its op.
        if (!runs.empty() && runs.back().second + 1 == i &&
            std::find(nodes.begin() + static_cast<long>(runs.back().first),
                      nodes.begin() + static_cast<long>(i),
                      source) != nodes.begin() + static_cast<long>(i)) {
          runs.back().second = i;
        }
        if (derived_.contains(source) && derived_.insert(node)) derived.push_back(node);
        continue;
      }
      bool reads = false, again = false, only_parameters = true;
      const InputNodes inputs = node->input_nodes();
      for (Node* input : inputs) {
        const bool parameter = is_param(input);
        reads |= parameter || derived_.contains(input);
        again |= parameter && read_.contains(updates_.state_of(input)) && complete();
        only_parameters &= parameter || derived_.contains(input);
      }
      if (!reads) continue;
      if (runs.empty() || again) {
        runs.emplace_back(i, i);
        read_.clear();
      }
      runs.back().second = i;
      for (Node* input : inputs) {
        if (is_param(input)) read_.insert(updates_.state_of(input));
      }
      if (only_parameters && derived_.insert(node)) derived.push_back(node);
    }
    for (const Node* node : derived) params_.insert(node);
    cover_composites(nodes, runs);
    bool added = false;
    size_t previous_end = 0;
    for (const auto& [first, last] : runs) {
      LeafCall leaf;
      const NodeSpan before =
          prelude(nodes, previous_end, first, last, ops_before_parameters(module));
      leaf.nodes.reserve(before.size() + (last - first + 1));
      leaf.nodes.assign(before.begin(), before.end());
      leaf.nodes.insert(leaf.nodes.end(), nodes.begin() + static_cast<long>(first),
                        nodes.begin() + static_cast<long>(last) + 1);
      previous_end = last + 1;
      const size_t composite = recording_.node_composite.get(nodes[first]);
      if (composite != PipelineRecording::kNone &&
          recording_.node_composite.get(nodes[last]) == composite) {
        leaf.composite = &recording_.composites[composite];
      }
      find_boundary(leaf);
      order_as_called(leaf);
      if (leaf.inputs.empty() || leaf.outputs.empty() || !records_its_op(module, leaf.nodes) ||
          !reads_every_parameter(leaf, entry)) {
        continue;
      }
      leaf.target = entry.path;
      // Its path from the call's wrapped module.
      const std::string& inner_path = recording_.calls[c].inner_path;
      leaf.base_name = entry.path.substr(inner_path.empty() ? 0 : inner_path.size() + 1);
      leaf.module = &module;
      leaf.module_type = describe_module(module);
      leaf.call = c;
      leaf.recurrent = recurrent_op(leaf);
      leaf.cell_results = cell_results_of(leaf);
      added |= add(std::move(leaf));
    }
    return added;
  }

  // Runs that reach into the ops of a composite call (a GRUCell's gru_cell: its linears read
  // the cell's parameters, its gates' arithmetic does not) take all of them, the gates too: the
  // call is the cell op's. Runs that then meet are one.
  void cover_composites(NodeSpan nodes, std::vector<std::pair<size_t, size_t>>& runs) const {
    if (recording_.composites.empty()) return;
    const NodeTable<size_t>& of = recording_.node_composite;
    std::vector<std::pair<size_t, size_t>> covered;
    for (auto [first, last] : runs) {
      const size_t a = of.get(nodes[first]);
      while (a != PipelineRecording::kNone && first > 0 && of.get(nodes[first - 1]) == a) --first;
      const size_t b = of.get(nodes[last]);
      while (b != PipelineRecording::kNone && last + 1 < nodes.size() &&
             of.get(nodes[last + 1]) == b) {
        ++last;
      }
      if (!covered.empty() && first <= covered.back().second) {
        covered.back().second = std::max(covered.back().second, last);
      } else {
        covered.emplace_back(first, last);
      }
    }
    runs = std::move(covered);
  }

  // LeafCall::cell_results: a cell op's results when it has several, the call's outputs are
  // among them and every other result is one of the call's nodes; else none.
  static std::vector<Node*> cell_results_of(const LeafCall& leaf) {
    if (!leaf.composite || leaf.composite->results.size() < 2) return {};
    const std::vector<Node*>& results = leaf.composite->results;
    for (const Node* out : leaf.outputs) {
      if (std::find(results.begin(), results.end(), out) == results.end()) return {};
    }
    for (const Node* result : results) {
      if (!result || std::find(leaf.nodes.begin(), leaf.nodes.end(), result) == leaf.nodes.end()) {
        return {};
      }
    }
    return results;
  }

  static bool records_its_op(const torch::nn::Module& module, const std::vector<Node*>& nodes) {
    const std::vector<std::string>* ops = ops_a_call_records(module);
    if (!ops) return true;
    for (const Node* node : nodes) {
      if (is_aten_call(*node) &&
          std::find(ops->begin(), ops->end(), node->target().op_name()) != ops->end()) {
        return true;
      }
    }
    return false;
  }

  // The recurrent op a call ends in when the call's outputs are all items of it.
  static const Node* recurrent_op(const LeafCall& leaf) {
    const Node* last = nullptr;
    for (auto it = leaf.nodes.rbegin(); it != leaf.nodes.rend() && !last; ++it) {
      if (!item_source(**it)) last = *it;
    }
    if (!last || !is_aten_call(*last) ||
        !is_recurrent_op(last->target().op_name(), last->target().schema().returns().size())) {
      return nullptr;
    }
    for (const Node* out : leaf.outputs) {
      if (item_source(*out) != last) return nullptr;
    }
    return last;
  }

  // False when `leaf` leaves out a parameter of the built-in layer `entry`: a call of a
  // Linear reads its weight and its bias, so `F::linear(x, lin->weight)` is user code reading
  // the weight, not a call of `lin` (it would print as one, and seem to add the bias).
  bool reads_every_parameter(const LeafCall& leaf, const ModuleEntry& entry) {
    if (!is_torch_nn(*entry.module)) return true;  // a declared leaf: any reads
    read_.clear();
    for (const Node* node : leaf.nodes) {
      for (Node* input : node->input_nodes()) read_.insert(updates_.state_of(input));
    }
    for (size_t i = entry.parameters_begin; i < entry.parameters_end; ++i) {
      const Node* node = state_node_[i];
      if (!node || !read_.contains(node)) return false;
    }
    return true;
  }

  // The nodes just before nodes[first] that belong to the leaf call [first, last] although
  // they read none of its parameters: what it computes from constants alone and uses alone
  // (LSTM's zero initial state, sized by the batch of an input the call reads in a dynamic
  // trace), and the `leading` ops it runs on its input first
  // (ops_before_parameters). Anything else that reads a recorded value stays outside, where
  // it is the call's input. The span is in candidates_, valid until the next call.
  NodeSpan prelude(NodeSpan nodes, size_t begin, size_t first, size_t last, int leading) {
    members_.clear();
    for (size_t i = first; i <= last; ++i) members_.insert(nodes[i]);
    std::vector<Node*>& candidates = candidates_;  // in reverse program order, at first
    candidates.clear();
    for (size_t i = first; i-- > begin;) {
      if (out_.find(nodes[i])) break;
      candidates.push_back(nodes[i]);
    }
    std::reverse(candidates.begin(), candidates.end());
    // Keep the longest run ending at `first` whose nodes read only each other (but for
    // `leading` of them), and whose results only the call uses.
    for (bool changed = true; changed && !candidates.empty();) {
      changed = false;
      kept_.clear();
      for (const Node* candidate : candidates) kept_.insert(candidate);
      int reads_left = leading;
      for (size_t i = candidates.size(); i-- > 0;) {
        const Locality locality = local_to(candidates[i]);
        if (locality == Locality::kLocal ||
            (locality == Locality::kReadsOutside && reads_left-- > 0)) {
          continue;
        }
        candidates.erase(candidates.begin(), candidates.begin() + static_cast<long>(i) + 1);
        changed = true;
        break;
      }
    }
    return {candidates.data(), candidates.data() + candidates.size()};
  }

  enum class Locality { kLocal, kReadsOutside, kUsedOutside };

  // True when `node` reads the size of `input` (`x.size(0)` in a dynamic trace), a value the
  // call's run reads too: it is part of the call, as LSTM's zero state sized by the batch.
  bool size_of_call_input(const Node& node, const Node* input) const {
    const bool size_read = node.op() == OpCode::kCallFunction && node.target().is_aten() &&
                           node.target().op_name() == "size";
    if (!size_read) return false;
    for (const Node* user : input->users()) {
      if (members_.contains(user)) return true;
    }
    return false;
  }

  // Where `node` reads and is read, against the call's run (members_) and the prelude kept so
  // far (kept_).
  Locality local_to(const Node* node) const {
    if (escaping_.contains(node)) return Locality::kUsedOutside;
    for (const Node* user : node->users()) {
      if (live_.contains(user) && !members_.contains(user) && !kept_.contains(user)) {
        return Locality::kUsedOutside;
      }
    }
    for (const Node* input : node->input_nodes()) {
      if (!kept_.contains(input) && !size_of_call_input(*node, input)) {
        return Locality::kReadsOutside;
      }
    }
    return Locality::kLocal;
  }

  // The call's inputs in the order its last op takes them, through the call's own nodes:
  // LSTM's (x, h, c).
  void order_as_called(LeafCall& leaf) {
    members_.clear();
    for (const Node* node : leaf.nodes) members_.insert(node);
    seen_.clear();
    std::vector<Node*> ordered;
    ordered.reserve(leaf.inputs.size());
    // A cell op takes them in its arguments' order: GRUCell's (x, h).
    if (leaf.composite) {
      for (Node* input : leaf.composite->inputs) {
        if (input &&
            std::find(leaf.inputs.begin(), leaf.inputs.end(), input) != leaf.inputs.end() &&
            seen_.insert(input)) {
          ordered.push_back(input);
        }
      }
    }
    const Node* last = leaf.nodes.back();
    while (item_source(*last) && members_.contains(item_source(*last))) last = item_source(*last);
    visit_inputs(*last, leaf, ordered);
    for (Node* input : leaf.inputs) {
      if (std::find(ordered.begin(), ordered.end(), input) == ordered.end()) {
        ordered.push_back(input);
      }
    }
    leaf.inputs = std::move(ordered);
  }

  // order_as_called's walk: the inputs of `leaf` that `node` reads, directly or through the
  // call's own nodes (members_), appended to `ordered` in the order they are taken.
  void visit_inputs(const Node& node, const LeafCall& leaf, std::vector<Node*>& ordered) {
    for (Node* input : node.input_nodes()) {
      if (!seen_.insert(input)) continue;
      if (std::find(leaf.inputs.begin(), leaf.inputs.end(), input) != leaf.inputs.end()) {
        ordered.push_back(input);
      } else if (members_.contains(input)) {
        visit_inputs(*input, leaf, ordered);
      }
    }
  }

  // The nodes `leaf` reads from outside (parameters aside, params_) and those read after it.
  void find_boundary(LeafCall& leaf) {
    members_.clear();
    for (const Node* node : leaf.nodes) members_.insert(node);
    for (const Node* node : leaf.nodes) {
      for (Node* input : node->input_nodes()) {
        if (members_.contains(input) || params_.contains(input) ||
            params_.contains(updates_.state_of(input))) {
          continue;
        }
        if (std::find(leaf.inputs.begin(), leaf.inputs.end(), input) == leaf.inputs.end()) {
          leaf.inputs.push_back(input);
        }
      }
    }
    for (Node* node : leaf.nodes) {
      // A parameter updated in place is read as the parameter after the call.
      if (updates_.state_of(node) != node) continue;
      bool used_outside = escaping_.contains(node);
      for (const Node* user : node->users()) {
        used_outside |= live_.contains(user) && !members_.contains(user);
      }
      if (used_outside) leaf.outputs.push_back(node);
    }
  }

  bool add(LeafCall leaf) {
    for (Node* node : leaf.nodes) {
      if (out_.find(node)) return false;  // overlaps an earlier call: keep it inline
    }
    for (Node* node : leaf.nodes) out_.of_node.set(node, out_.calls.size());
    out_.starts.set(leaf.nodes.front(), out_.calls.size());
    out_.calls.push_back(std::move(leaf));
    return true;
  }

  const PipelineRecording& recording_;
  const ModuleTable& table_;
  const LiveNodes& live_;
  const StateUpdates& updates_;
  const TraceOptions& options_;
  /// Each TensorDictModule call's live nodes but get_attr reads, in order: those of call `c`
  /// are call_nodes_[call_begin_[c], call_begin_[c + 1]).
  std::vector<Node*> call_nodes_;
  std::vector<size_t> call_begin_;
  /// Nodes read after the recording or outside their call: the outputs and every call's
  /// outputs. A leaf call's node that gives one is no prelude, and it is an output.
  NodeSet escaping_;
  /// Sets reused by each leaf module's search (add_calls_from_parameters and what it calls): its
  /// parameters and what is derived from them alone; what the current run read; a run's or a
  /// call's nodes; a prelude's nodes kept; inputs visited.
  NodeSet params_, derived_, read_, members_, kept_, seen_;
  /// Lists reused likewise: the nodes derived from a leaf's parameters, in order; its runs of
  /// nodes ([first, last] indices into the call's nodes); a prelude's nodes (prelude's result,
  /// valid until its next call).
  std::vector<const Node*> derived_list_;
  std::vector<std::pair<size_t, size_t>> runs_;
  std::vector<Node*> candidates_;
  /// For each tensor of table_.state(), the get_attr node that reads it, or nullptr: a
  /// module's are the ranges its ModuleEntry gives.
  std::vector<Node*> state_node_;
  LeafCalls out_;
};

}  // namespace

LeafCalls find_leaf_calls(const Graph& graph, const PipelineRecording& recording,
                          const LiveNodes& live, const StateUpdates& updates,
                          const TraceOptions& options) {
  return LeafCallFinder(graph, recording, live, updates, options).find();
}

}  // namespace tdfx::detail
