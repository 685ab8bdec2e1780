#include "tdfx/tracer/leaf_regions.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include "tdfx/graph/namespace.h"
#include "tdfx/tracer/builtin_layers.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx::detail {

namespace jit = torch::jit;

ParameterUpdates::ParameterUpdates(const Recording& recording) {
  for (const jit::Node* node : recording.graph->nodes()) {
    if (node->inputs().empty() || node->outputs().size() != 1) continue;
    const jit::Value* root = parameter_of(node->input(0));
    if (!recording.parameters.count(root)) continue;
    // The schema lookup is the costly test (tens of thousands of instructions for a node whose
    // schema was never asked for): made only for ops on a parameter named as in-place ops are
    // (`add_`, `copy_`), the only ones whose first argument aten marks as written.
    const char* name = node->kind().toUnqualString();
    if (name[0] == '\0' || name[std::strlen(name) - 1] != '_') continue;
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (!schema) continue;
    const auto& self = schema->arguments();
    if (self.empty() || !self[0].alias_info() || !self[0].alias_info()->isWrite()) continue;
    updates_[node->output()] = root;
  }
}

const jit::Value* ParameterUpdates::parameter_of(const jit::Value* value) const {
  auto it = updates_.find(value);
  return it == updates_.end() ? value : it->second;
}

bool is_constant_expression(const jit::Value* value) {
  const jit::Node* node = value->node();
  if (node->kind() == c10::prim::Constant) return true;
  if (node->kind() == c10::prim::ListConstruct || node->kind() == c10::prim::TupleConstruct) {
    for (const jit::Value* input : node->inputs()) {
      if (!is_constant_expression(input)) return false;
    }
    return true;
  }
  return false;
}

namespace {

// False when `nodes` lack every op a call of the built-in layer `module` records.
bool records_its_op(const torch::nn::Module& module, const std::vector<jit::Node*>& nodes) {
  const std::vector<std::string>* ops = ops_a_call_records(module);
  if (!ops) return true;
  for (const jit::Node* node : nodes) {
    const char* kind = node->kind().toUnqualString();
    if (std::find(ops->begin(), ops->end(), kind) != ops->end()) return true;
  }
  return false;
}

// The recurrent op a region ends in when the region's outputs are all of that op's (see
// LeafRegion::recurrent), else null.
const jit::Node* recurrent_op(const LeafRegion& region) {
  const jit::Node* last = region.nodes.back();
  if (!is_recurrent_op(last->kind().toUnqualString(), last->outputs().size())) return nullptr;
  for (const jit::Value* out : region.outputs) {
    if (out->node() != last) return nullptr;
  }
  return last;
}

class LeafRegionFinder {
 public:
  LeafRegionFinder(const Recording& recording, const TraceOptions& options,
                   const ParameterUpdates& updates)
      : recording_(recording), options_(options), updates_(updates) {
    for (const auto& [value, paths] : recording_.parameter_paths) {
      for (const std::string& path : paths) parameters_by_path_[path] = value;
    }
    for (const auto& [key, value] : recording_.outputs) escaping_.insert(value);
    for (const auto& call : recording_.calls) {
      for (jit::Value* v : call.outputs) escaping_.insert(v);
    }
  }

  LeafRegions find() {
    for (size_t c = 0; c < recording_.calls.size(); ++c) {
      const ModuleCall& call = recording_.calls[c];
      const torch::nn::Module& inner = *call.module->inner_ptr();
      if (is_leaf(options_, inner, call.inner_path) && !call.nodes.empty()) {
        LeafRegion region;
        region.nodes = call.nodes;
        region.target = call.inner_path.empty() ? "module" : call.inner_path;
        region.base_name = snake_case(short_type(inner));
        region.module = &inner;
        region.call = c;
        region.inputs = call.inputs;
        region.outputs = call.outputs;
        add_region(std::move(region));
        continue;
      }
      std::vector<std::string> chosen;
      for (const auto& item : inner.named_modules("", false)) {
        const std::string& sub = item.key();
        bool inside_chosen = false;
        for (const auto& c2 : chosen) inside_chosen |= sub.rfind(c2 + ".", 0) == 0;
        if (inside_chosen || !is_leaf(options_, *item.value(), join_path(call.inner_path, sub))) {
          continue;
        }
        bool found = false;
        for (LeafRegion& region : regions_from_parameters(call, c, sub, *item.value())) {
          found |= add_region(std::move(region));
        }
        // A leaf that outlines hides its children; one that does not shows theirs.
        if (found) chosen.push_back(sub);
      }
    }
    return std::move(out_);
  }

 private:
  // The calls of the leaf `sub` of `call`, found from the nodes that read its parameters: each
  // call is a contiguous run of them, and a parameter read again starts the next call (C++
  // runs a call's ops one after another, and but for attention no built-in layer reads a
  // parameter twice). A
  // run becomes a region when it takes at least one tensor from outside, gives at least one
  // value, and holds the op its layer records (records_its_op); others stay inline as the ops
  // they are (a weight read by user code, `torch.t(self.emb.weight)`).
  std::vector<LeafRegion> regions_from_parameters(const ModuleCall& call, size_t c,
                                                  const std::string& sub,
                                                  const torch::nn::Module& module) {
    const std::string target = join_path(call.inner_path, sub);
    std::unordered_set<const jit::Value*> params;
    const std::string prefix = target + ".";
    for (auto it = parameters_by_path_.lower_bound(prefix);
         it != parameters_by_path_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
         ++it) {
      params.insert(it->second);
    }
    std::vector<LeafRegion> regions;
    if (params.empty()) return regions;
    std::vector<std::pair<size_t, size_t>> runs;  // [first, last] indices into call.nodes
    // Values computed from the parameters alone (`weight.t()`, LSTM's list of weights) stand
    // for them: their readers are part of the call. Reading one again is no new call.
    // A parameter updated in place (BatchNorm's num_batches_tracked += 1) is still that
    // parameter: reading it again starts the next call too.
    // A parameter read again starts the next call; in attention (and the transformer layers
    // built on it), which reads its packed in_proj_weight once each for query, key and value
    // before its out_proj, only once the call has read every parameter of the layer.
    std::unordered_set<const jit::Value*> required;
    if (reads_parameters_repeatedly(module)) {
      for (const auto& item : module.named_parameters(true)) {
        auto it = parameters_by_path_.find(join_path(target, item.key()));
        if (it != parameters_by_path_.end()) required.insert(it->second);
      }
    }
    auto complete = [&](const std::unordered_set<const jit::Value*>& read) {
      return std::all_of(required.begin(), required.end(),
                         [&](const jit::Value* p) { return read.count(p) > 0; });
    };
    std::unordered_set<const jit::Value*> derived, read;
    for (size_t i = 0; i < call.nodes.size(); ++i) {
      const jit::Node* node = call.nodes[i];
      bool reads = false, again = false, only_parameters = true;
      for (const jit::Value* input : node->inputs()) {
        const bool parameter = params.count(updates_.parameter_of(input)) > 0;
        reads |= parameter || derived.count(input);
        again |= parameter && read.count(updates_.parameter_of(input)) && complete(read);
        only_parameters &= parameter || derived.count(input) || is_constant_expression(input);
      }
      if (!reads) continue;
      if (runs.empty() || again) {
        runs.emplace_back(i, i);
        read.clear();
      }
      runs.back().second = i;
      for (const jit::Value* input : node->inputs()) {
        if (params.count(updates_.parameter_of(input))) read.insert(updates_.parameter_of(input));
      }
      if (only_parameters) derived.insert(node->outputs().begin(), node->outputs().end());
    }
    params.insert(derived.begin(), derived.end());
    size_t previous_end = 0;
    for (const auto& [first, last] : runs) {
      LeafRegion region;
      region.nodes = prelude(call, previous_end, first, last, ops_before_parameters(module));
      region.nodes.insert(region.nodes.end(), call.nodes.begin() + static_cast<long>(first),
                          call.nodes.begin() + static_cast<long>(last) + 1);
      previous_end = last + 1;
      absorb_list_inputs(region);
      find_boundary(region, params);
      order_as_called(region);
      const bool tensors_in =
          std::all_of(region.inputs.begin(), region.inputs.end(),
                      [](const jit::Value* v) { return v->type()->cast<c10::TensorType>(); });
      if (region.inputs.empty() || !tensors_in || region.outputs.empty() ||
          !records_its_op(module, region.nodes) || !reads_every_parameter(region, module, target)) {
        continue;
      }
      region.target = target;
      region.base_name = sub;
      region.module = &module;
      region.call = c;
      region.recurrent = recurrent_op(region);
      regions.push_back(std::move(region));
    }
    return regions;
  }

  // False when `region` leaves out a parameter of the built-in layer `module`: a call of a
  // Linear reads its weight and its bias, so `F::linear(x, lin->weight)` is user code reading
  // the weight, not a call of `lin` (it would print as one, and seem to add the bias).
  bool reads_every_parameter(const LeafRegion& region, const torch::nn::Module& module,
                             const std::string& target) const {
    if (!is_torch_nn(module)) return true;  // a declared leaf: any reads
    std::unordered_set<const jit::Value*> read;
    for (const jit::Node* node : region.nodes) {
      for (const jit::Value* input : node->inputs()) read.insert(updates_.parameter_of(input));
    }
    for (const auto& item : module.named_parameters(true)) {
      if (!item.value().defined()) continue;
      auto it = parameters_by_path_.find(join_path(target, item.key()));
      if (it != parameters_by_path_.end() && !read.count(it->second)) return false;
    }
    return true;
  }

  // The nodes just before call.nodes[first] that belong to the leaf call [first, last] although
  // they read none of its parameters: what it computes from constants alone and uses alone
  // (LSTM's zero initial state, a list of sizes), and the `leading` ops it runs on its input
  // first (ops_before_parameters). Anything else that reads a traced value stays outside,
  // where it is the call's input.
  std::vector<jit::Node*> prelude(const ModuleCall& call, size_t begin, size_t first, size_t last,
                                  int leading) const {
    std::unordered_set<const jit::Node*> members(call.nodes.begin() + static_cast<long>(first),
                                                 call.nodes.begin() + static_cast<long>(last) + 1);
    std::vector<jit::Node*> candidates;  // in reverse program order
    for (size_t i = first; i-- > begin;) {
      jit::Node* node = call.nodes[i];
      if (node->kind() == c10::prim::Constant) continue;  // emits nothing, may be shared
      if (out_.nodes.count(node)) break;
      candidates.push_back(node);
    }
    std::reverse(candidates.begin(), candidates.end());
    // Keep the longest run ending at `first` whose nodes read only constants and each other
    // (but for `leading` of them), and whose results only the call uses.
    for (bool changed = true; changed && !candidates.empty();) {
      changed = false;
      std::unordered_set<const jit::Node*> kept(candidates.begin(), candidates.end());
      int reads_left = leading;
      for (size_t i = candidates.size(); i-- > 0;) {
        const Locality locality = local_to(candidates[i], kept, members);
        if (locality == Locality::kLocal ||
            (locality == Locality::kReadsOutside && reads_left-- > 0)) {
          continue;
        }
        candidates.erase(candidates.begin(), candidates.begin() + static_cast<long>(i) + 1);
        changed = true;
        break;
      }
    }
    return candidates;
  }

  enum class Locality { kLocal, kReadsOutside, kUsedOutside };

  Locality local_to(const jit::Node* node, const std::unordered_set<const jit::Node*>& kept,
                    const std::unordered_set<const jit::Node*>& members) const {
    for (const jit::Value* out : node->outputs()) {
      if (escaping_.count(out)) return Locality::kUsedOutside;
      for (const jit::Use& use : out->uses()) {
        if (!members.count(use.user) && !kept.count(use.user)) return Locality::kUsedOutside;
      }
    }
    for (const jit::Value* input : node->inputs()) {
      if (!is_constant_expression(input) && !kept.count(input->node()))
        return Locality::kReadsOutside;
    }
    return Locality::kLocal;
  }

  // A list or tuple of tensors built just for the call from values outside it, as LSTM's given
  // state `(h, c)` is (`prim::ListConstruct(h, c)`), is part of the call: the call then takes
  // the tensors themselves.
  static void absorb_list_inputs(LeafRegion& region) {
    std::unordered_set<const jit::Node*> members(region.nodes.begin(), region.nodes.end());
    std::vector<jit::Node*> lists;
    for (jit::Node* node : region.nodes) {
      for (jit::Value* input : node->inputs()) {
        jit::Node* list = input->node();
        const auto kind = list->kind();
        if (members.count(list) ||
            (kind != c10::prim::ListConstruct && kind != c10::prim::TupleConstruct)) {
          continue;
        }
        const bool only_here =
            std::all_of(input->uses().begin(), input->uses().end(),
                        [&](const jit::Use& use) { return members.count(use.user) > 0; });
        const bool of_tensors = std::all_of(
            list->inputs().begin(), list->inputs().end(),
            [](const jit::Value* item) { return item->type()->cast<c10::TensorType>(); });
        if (only_here && of_tensors && !list->inputs().empty()) {
          members.insert(list);
          lists.push_back(list);
        }
      }
    }
    if (lists.empty()) return;
    region.nodes.insert(region.nodes.end(), lists.begin(), lists.end());
    std::sort(region.nodes.begin(), region.nodes.end(),
              [](const jit::Node* a, const jit::Node* b) { return a->isBefore(b); });
  }

  // The region's inputs in the order its last op takes them, through the region's own nodes:
  // LSTM's (x, h, c), not the order the recording made them in (h and c's list first).
  static void order_as_called(LeafRegion& region) {
    std::unordered_set<const jit::Node*> members(region.nodes.begin(), region.nodes.end());
    std::vector<jit::Value*> ordered;
    std::unordered_set<const jit::Value*> seen;
    std::function<void(jit::Node*)> visit = [&](jit::Node* node) {
      for (jit::Value* input : node->inputs()) {
        if (!seen.insert(input).second) continue;
        if (std::find(region.inputs.begin(), region.inputs.end(), input) != region.inputs.end()) {
          ordered.push_back(input);
        } else if (members.count(input->node())) {
          visit(input->node());
        }
      }
    };
    visit(region.nodes.back());
    for (jit::Value* input : region.inputs) {
      if (std::find(ordered.begin(), ordered.end(), input) == ordered.end())
        ordered.push_back(input);
    }
    region.inputs = std::move(ordered);
  }

  // The values `region` reads from outside (parameters and constants aside) and those read
  // after it.
  void find_boundary(LeafRegion& region,
                     const std::unordered_set<const jit::Value*>& params) const {
    std::unordered_set<const jit::Value*> defined;
    std::unordered_set<const jit::Node*> members(region.nodes.begin(), region.nodes.end());
    for (const jit::Node* node : region.nodes) {
      for (const jit::Value* out : node->outputs()) defined.insert(out);
    }
    for (jit::Node* node : region.nodes) {
      for (jit::Value* input : node->inputs()) {
        if (defined.count(input) || params.count(input) ||
            params.count(updates_.parameter_of(input)) || is_constant_expression(input)) {
          continue;
        }
        if (std::find(region.inputs.begin(), region.inputs.end(), input) == region.inputs.end()) {
          region.inputs.push_back(input);
        }
      }
      for (jit::Value* out : node->outputs()) {
        // A parameter updated in place is read as the parameter after the call.
        if (updates_.parameter_of(out) != out) continue;
        bool used_outside = escaping_.count(out) > 0;
        for (const jit::Use& use : out->uses()) used_outside |= members.count(use.user) == 0;
        if (used_outside) region.outputs.push_back(out);
      }
    }
  }

  bool add_region(LeafRegion region) {
    for (jit::Node* node : region.nodes) {
      if (out_.nodes.count(node)) return false;  // overlaps an earlier region: keep it inline
    }
    for (jit::Node* node : region.nodes) out_.nodes.insert(node);
    out_.starts[region.nodes.front()] = out_.regions.size();
    out_.regions.push_back(std::move(region));
    return true;
  }

  const Recording& recording_;
  const TraceOptions& options_;
  const ParameterUpdates& updates_;
  /// Values read after the trace or outside their call: the recording's outputs and every
  /// call's outputs. A region's node that gives one is no prelude, and it is an output.
  std::unordered_set<const jit::Value*> escaping_;
  /// Parameter and buffer values by path, sorted so a module's are one range.
  std::map<std::string, const jit::Value*> parameters_by_path_;
  LeafRegions out_;
};

}  // namespace

LeafRegions find_leaf_regions(const Recording& recording, const TraceOptions& options,
                              const ParameterUpdates& updates) {
  return LeafRegionFinder(recording, options, updates).find();
}

}  // namespace tdfx::detail
