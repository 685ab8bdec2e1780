#include "tdfx/tracer/graph_builder.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/nn/modules/conv.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx {

bool is_builtin_leaf(const torch::nn::Module& module) {
  // Module::name() is the C++ class, `torch::nn::SequentialImpl` behind TORCH_MODULE. A
  // Functional holds user code, which is traced through as a lambda's would be.
  static const std::set<std::string> containers = {
      "torch::nn::SequentialImpl",    "torch::nn::ModuleListImpl",    "torch::nn::ModuleDictImpl",
      "torch::nn::ParameterListImpl", "torch::nn::ParameterDictImpl", "torch::nn::FunctionalImpl"};
  const std::string& name = module.name();
  return name.rfind("torch::nn::", 0) == 0 && containers.count(name) == 0;
}

namespace detail {

namespace {

std::unordered_set<std::string> word_set(const std::string& words) {
  std::unordered_set<std::string> out;
  std::istringstream in(words);
  for (std::string word; in >> word;) out.insert(word);
  return out;
}

}  // namespace

bool prints_as_method(const std::string& op) {
  // What Python has as a Tensor method but not as a torch function (torch 1.13; checked
  // against Python by tests/tracer/test_fx_code.cpp).
  static const auto method_only = word_set(
      "_autocast_to_full_precision _autocast_to_reduced_precision _dimI _dimV _indices "
      "_nested_tensor_layer_norm _nested_tensor_size _nnz _to_dense _values align_as align_to "
      "backward ccol_indices coalesce col_indices contiguous crow_indices dense_dim dim "
      "element_size expand expand_as indices is_coalesced is_contiguous is_pinned is_set_to item "
      "new_empty new_empty_strided new_full new_ones new_zeros pin_memory record_stream "
      "refine_names rename repeat reshape_as resize resize_as retain_grad row_indices size "
      "sparse_dim sparse_mask storage_offset stride sum_to_size to to_dense to_mkldnn "
      "to_padded_tensor to_sparse to_sparse_bsc to_sparse_bsr to_sparse_csc to_sparse_csr "
      "type_as unfold values view view_as");
  // In-place ops that are functions only (torch.dropout_, torch._C._nn.elu_).
  static const auto inplace_functions = word_set(
      "alpha_dropout_ celu_ copy_sparse_to_sparse_ dropout_ elu_ embedding_renorm_ "
      "feature_alpha_dropout_ feature_dropout_ gelu_ hardsigmoid_ hardswish_ hardtanh_ "
      "leaky_relu_ mish_ relu6_ rrelu_ rrelu_with_noise_ selu_ silu_ threshold_");
  if (method_only.count(op)) return true;
  // Every other in-place op is a Tensor method; C++ calls it as one (`x.sub_(1)`), and some
  // (`sub_`) exist only so.
  const bool inplace = op.size() > 1 && op.back() == '_' && (op[0] != '_' || op == "_coalesced_");
  return inplace && !inplace_functions.count(op);
}

namespace {

namespace jit = torch::jit;

// Emulates the name scopes of the tensordict prototype tracer: every
// TensorDictModule's wrapped module is traced on its own (its own namespace),
// then copied level by level into each enclosing sequential's graph (one
// namespace per level), where call_module and get_attr nodes of child i are
// renamed `_{i}_{name}`. Replaying those create_name calls in program order
// gives exactly the names Python prints.
class NameScopes {
 public:
  NameScopes(const Recording& recording)
      : recording_(recording), levels_(static_cast<size_t>(recording.level_count)) {
    for (auto& level : levels_) level.names.reserve("tensordict");
  }

  std::string node_name(size_t call, const std::string& base, OpCode op) {
    std::string name = inner_[call].create_name(base);
    for (const auto& [level, child] : chain(call)) {
      name = levels_[static_cast<size_t>(level)].names.create_name(name);
      if (child >= 0 && (op == OpCode::kCallModule || op == OpCode::kGetAttr)) {
        name = "_" + std::to_string(child) + "_" + name;
      }
    }
    return name;
  }

  std::string read_name(size_t call, const NestedKey& key) {
    std::string name = "getitem";
    for (const auto& [level, child] : chain(call)) {
      Level& scope = levels_[static_cast<size_t>(level)];
      if (!scope.keys.insert(key).second) break;
      name = scope.names.create_name("getitem");
    }
    return name;
  }

  void note_write(size_t call, const NestedKey& key) {
    for (const auto& [level, child] : chain(call))
      levels_[static_cast<size_t>(level)].keys.insert(key);
  }

 private:
  struct Level {
    Namespace names;
    std::set<NestedKey> keys;
  };

  // Enclosing levels, innermost first; a root TensorDictModule has level 0 with no prefix.
  std::vector<std::pair<int, int>> chain(size_t call) const {
    const auto& levels = recording_.calls[call].levels;
    if (levels.empty()) return {{0, -1}};
    return levels;
  }

  const Recording& recording_;
  std::vector<Level> levels_;
  /// One namespace per TensorDictModule call, made on first use: a leaf's
  /// body builder never needs them, and there may be thousands of calls.
  std::unordered_map<size_t, Namespace> inner_;
};

// A run of jit nodes that one leaf module's call recorded.
struct LeafRegion {
  std::vector<jit::Node*> nodes;
  std::string target;
  std::string base_name;
  const torch::nn::Module* module = nullptr;
  size_t call = 0;
  std::vector<jit::Value*> inputs;
  std::vector<jit::Value*> outputs;
  /// For a recurrent layer (aten::lstm, gru, rnn_tanh, rnn_relu as its last op), that op: the
  /// call returns what Python's does, `(output, (h, c))` or `(output, h)`, and its users pick
  /// from it with getitem.
  const jit::Node* recurrent = nullptr;
};

// False when `nodes` lack the op a call of the built-in layer `module` always records: user
// code that reads a layer's weight itself (a language model's head tied to its embedding,
// `h.matmul(emb->weight.t())`) reads parameters as a call does, but is no call.
bool records_its_op(const torch::nn::Module& module, const std::vector<jit::Node*>& nodes) {
  static const std::unordered_map<std::string, std::vector<std::string>> ops = [] {
    std::unordered_map<std::string, std::vector<std::string>> table = {
        {"Linear", {"addmm", "matmul", "mm", "linear"}},
        {"Bilinear", {"bilinear"}},
        {"Embedding", {"embedding"}},
        {"EmbeddingBag", {"embedding_bag", "_embedding_bag"}},
        {"LayerNorm", {"layer_norm"}},
        {"GroupNorm", {"group_norm"}},
        {"PReLU", {"prelu"}},
        {"LSTM", {"lstm"}},
        {"GRU", {"gru"}},
        {"RNN", {"rnn_tanh", "rnn_relu"}},
    };
    for (const char* d : {"1d", "2d", "3d"}) {
      table[std::string("Conv") + d] = {"_convolution", "convolution"};
      table[std::string("ConvTranspose") + d] = {"_convolution", "convolution"};
      table[std::string("BatchNorm") + d] = {"batch_norm"};
      table[std::string("InstanceNorm") + d] = {"instance_norm"};
    }
    return table;
  }();
  const std::string& name = module.name();
  if (name.rfind("torch::nn::", 0) != 0) return true;  // a declared leaf: any ops
  auto it = ops.find(short_type(module));
  if (it == ops.end()) return true;
  for (const jit::Node* node : nodes) {
    const std::string kind = node->kind().toUnqualString();
    if (std::find(it->second.begin(), it->second.end(), kind) != it->second.end()) return true;
  }
  return false;
}

// How many ops a leaf runs on its input before it reads a parameter: a Conv pads its input
// first when its padding mode is not zeros (`_pad_enum`).
int ops_before_parameters(const torch::nn::Module& module) {
  auto pads = [](const auto* conv) {
    return conv && !c10::holds_alternative<torch::enumtype::kZeros>(conv->options.padding_mode());
  };
  const bool padded = pads(dynamic_cast<const torch::nn::Conv1dImpl*>(&module)) ||
                      pads(dynamic_cast<const torch::nn::Conv2dImpl*>(&module)) ||
                      pads(dynamic_cast<const torch::nn::Conv3dImpl*>(&module));
  return padded ? 1 : 0;
}

// Where each output of a recurrent op sits in the layer's result: LSTM returns
// (output, (h, c)), GRU and RNN (output, h), in C++ as in Python.
std::vector<std::vector<int64_t>> recurrent_paths(const jit::Node* op) {
  if (op->kind() == c10::aten::lstm) return {{0}, {1, 0}, {1, 1}};
  return {{0}, {1}};
}

const jit::Node* recurrent_op(const LeafRegion& region) {
  const jit::Node* last = region.nodes.back();
  const auto kind = last->kind();
  const bool recurrent =
      (kind == c10::aten::lstm && last->outputs().size() == 3) ||
      ((kind == c10::aten::gru || kind == c10::aten::rnn_tanh || kind == c10::aten::rnn_relu) &&
       last->outputs().size() == 2);
  if (!recurrent) return nullptr;
  for (const jit::Value* out : region.outputs) {
    if (out->node() != last) return nullptr;
  }
  return last;
}

// A prim::Constant, or a list or tuple built of constants only.
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

class Builder {
 public:
  Builder(const Recording& recording, torch::nn::Module& root, const TraceOptions& options)
      : recording_(recording),
        root_(root),
        options_(options),
        names_(recording),
        method_calls_(options.method_calls && options.outline_leaves) {}

  BuiltGraph build() {
    for (const auto& [value, paths] : recording_.parameter_paths) {
      for (const std::string& path : paths) parameters_by_path_[path] = value;
    }
    for (const auto& [key, value] : recording_.outputs) {
      escaping_.insert(value);
      needed_.insert(value);
    }
    for (const auto& call : recording_.calls) {
      for (jit::Value* v : call.outputs) escaping_.insert(v);
    }
    find_parameter_updates();
    if (options_.outline_leaves) find_leaf_regions();
    if (options_.key_style == KeyStyle::kGetItem)
      tensordict_ = out_.graph.placeholder("tensordict");
    for (jit::Node* node : recording_.graph->nodes()) {
      if (region_nodes_.count(node)) {
        auto it = region_starts_.find(node);
        if (it != region_starts_.end()) emit_region(regions_[it->second]);
        continue;
      }
      emit(node);
    }
    std::vector<Argument> results;
    for (const auto& [key, value] : recording_.outputs) {
      results.push_back(lookup(value));
      out_.output_keys.push_back(key);
    }
    out_.graph.output(tuple(std::move(results)));
    out_.graph.lint();
    return std::move(out_);
  }

 private:
  // The results of in-place ops on parameters and buffers (`num_batches_tracked.add_(1)`):
  // the jit trace gives them new values, but they are the parameter, updated.
  void find_parameter_updates() {
    for (const jit::Node* node : recording_.graph->nodes()) {
      const c10::FunctionSchema* schema = node->maybeSchema();
      if (!schema || node->inputs().empty() || node->outputs().size() != 1) continue;
      const auto& self = schema->arguments();
      if (self.empty() || !self[0].alias_info() || !self[0].alias_info()->isWrite()) continue;
      const jit::Value* root = parameter_of(node->input(0));
      if (recording_.parameters.count(root)) parameter_updates_[node->output()] = root;
    }
  }

  // The parameter or buffer `value` is after in-place updates, else `value`.
  const jit::Value* parameter_of(const jit::Value* value) const {
    auto it = parameter_updates_.find(value);
    return it == parameter_updates_.end() ? value : it->second;
  }

  bool is_leaf(const torch::nn::Module& module, const std::string& path) const {
    if (is_builtin_leaf(module)) return true;
    return options_.is_leaf_module && options_.is_leaf_module(module, path);
  }

  void find_leaf_regions() {
    for (size_t c = 0; c < recording_.calls.size(); ++c) {
      const ModuleCall& call = recording_.calls[c];
      const torch::nn::Module& inner = *call.module->inner_ptr();
      if (is_leaf(inner, call.inner_path) && !call.nodes.empty()) {
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
        if (inside_chosen || !is_leaf(*item.value(), join_path(call.inner_path, sub))) continue;
        bool found = false;
        for (LeafRegion& region : regions_from_parameters(call, c, sub, *item.value())) {
          found |= add_region(std::move(region));
        }
        // A leaf that outlines hides its children; one that does not shows theirs.
        if (found) chosen.push_back(sub);
      }
    }
  }

  // The calls of the leaf `sub` of `call`, found from the nodes that read its parameters: each
  // call is a contiguous run of them, and a parameter read again starts the next call (C++
  // runs a call's ops one after another, and no built-in layer reads a parameter twice). A
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
    std::unordered_set<const jit::Value*> derived, read;
    for (size_t i = 0; i < call.nodes.size(); ++i) {
      const jit::Node* node = call.nodes[i];
      bool reads = false, again = false, only_parameters = true;
      for (const jit::Value* input : node->inputs()) {
        const bool parameter = params.count(parameter_of(input)) > 0;
        reads |= parameter || derived.count(input);
        again |= parameter && read.count(parameter_of(input));
        only_parameters &= parameter || derived.count(input) || is_constant_expression(input);
      }
      if (!reads) continue;
      if (runs.empty() || again) {
        runs.emplace_back(i, i);
        read.clear();
      }
      runs.back().second = i;
      for (const jit::Value* input : node->inputs()) {
        if (params.count(parameter_of(input))) read.insert(parameter_of(input));
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
      find_boundary(region, params);
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
    if (module.name().rfind("torch::nn::", 0) != 0) return true;  // a declared leaf: any reads
    std::unordered_set<const jit::Value*> read;
    for (const jit::Node* node : region.nodes) {
      for (const jit::Value* input : node->inputs()) read.insert(parameter_of(input));
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
      if (region_nodes_.count(node)) break;
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
        if (defined.count(input) || params.count(input) || params.count(parameter_of(input)) ||
            is_constant_expression(input)) {
          continue;
        }
        if (std::find(region.inputs.begin(), region.inputs.end(), input) == region.inputs.end()) {
          region.inputs.push_back(input);
        }
      }
      for (jit::Value* out : node->outputs()) {
        // A parameter updated in place is read as the parameter after the call.
        if (parameter_of(out) != out) continue;
        bool used_outside = escaping_.count(out) > 0;
        for (const jit::Use& use : out->uses()) used_outside |= members.count(use.user) == 0;
        if (used_outside) region.outputs.push_back(out);
      }
    }
  }

  bool add_region(LeafRegion region) {
    for (jit::Node* node : region.nodes) {
      if (region_nodes_.count(node)) return false;  // overlaps an earlier region: keep it inline
    }
    for (jit::Node* node : region.nodes) region_nodes_.insert(node);
    region_starts_[region.nodes.front()] = regions_.size();
    regions_.push_back(std::move(region));
    return true;
  }

  // --- emission --------------------------------------------------------------

  Argument lookup(const jit::Value* value) {
    auto it = env_.find(value);
    if (it != env_.end()) return it->second;
    if (auto constant = jit::toIValue(value)) return constant_argument(*constant, nullptr, value);
    const auto kind = value->node()->kind();
    if ((kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct) &&
        is_constant_expression(value)) {
      // A list of sizes built outside a leaf's region, which the region reads.
      std::vector<Argument> items;
      for (const jit::Value* item : value->node()->inputs()) items.push_back(lookup(item));
      return ArgumentList{std::move(items), kind == c10::prim::TupleConstruct};
    }
    if (parameter_of(value) != value) return lookup(parameter_of(value));
    auto param = recording_.parameters.find(value);
    if (param != recording_.parameters.end()) {
      // A parameter read outside a leaf: a get_attr at its first use.
      const size_t call = current_call_;
      std::string path = path_within(value, param->second, call);
      if (!param_prefix_.empty() && path.rfind(param_prefix_, 0) == 0) {
        path = path.substr(param_prefix_.size());  // inside a leaf's body
      }
      Node* node = create(OpCode::kGetAttr, Target(path), {}, call, relative_to_call(path, call));
      set_meta(node, value, call);
      env_[value] = node;
      return node;
    }
    fail<TraceError>(
        "{}: a value of the trace ({}) comes from outside the module; capture "
        "tensors as parameters or buffers",
        describe_call(current_call_), value->debugName());
  }

  // The path of a shared parameter (a layer in two TensorDictModules) that lies in the leaf
  // body or the call being built, so that it is named relative to them; else `first`.
  std::string path_within(const jit::Value* value, const std::string& first, size_t call) const {
    auto paths = recording_.parameter_paths.find(value);
    if (paths == recording_.parameter_paths.end()) return first;
    std::string scope = param_prefix_;
    if (scope.empty() && call < recording_.calls.size()) {
      scope = recording_.calls[call].inner_path;
      if (!scope.empty()) scope += ".";
    }
    for (const std::string& path : paths->second) {
      if (path.rfind(scope, 0) == 0) return path;
    }
    return first;
  }

  std::string relative_to_call(const std::string& path, size_t call) const {
    const std::string& inner = recording_.calls[call].inner_path;
    if (inner.empty()) return path;
    if (path.rfind(inner + ".", 0) == 0) return path.substr(inner.size() + 1);
    return path;
  }

  std::string describe_call(size_t call) const {
    if (call >= recording_.calls.size()) return "the traced module";
    return recording_.calls[call].module->describe();
  }

  Argument constant_argument(const c10::IValue& value, const c10::TypePtr& type,
                             const jit::Value* source) {
    if (value.isNone()) return None{};
    if (value.isBool()) return value.toBool();
    // A dtype, memory format or layout is an int in the trace; the schema says which.
    if (value.isInt()) return enum_or_int(value.toInt(), type);
    if (value.isDouble()) return value.toDouble();
    if (value.isString()) return value.toStringRef();
    if (value.isDevice()) return value.toDevice();
    if (value.isIntList()) {
      std::vector<Argument> items;
      for (int64_t v : value.toIntVector()) items.push_back(v);
      return list(std::move(items));
    }
    if (value.isDoubleList()) {
      std::vector<Argument> items;
      for (double v : value.toDoubleVector()) items.push_back(v);
      return list(std::move(items));
    }
    if (value.isBoolList()) {
      std::vector<Argument> items;
      for (bool v : value.toBoolList()) items.push_back(v);
      return list(std::move(items));
    }
    if (value.isTensor()) {
      fail<TraceError>(
          "{}: the module uses a tensor constant {}; register it as a buffer so the "
          "graph can name it",
          describe_call(current_call_), source ? source->debugName() : "");
    }
    fail<TraceError>("{}: cannot record a constant of kind {}", describe_call(current_call_),
                     value.tagKind());
  }

  Node* create(OpCode op, Target target, Args args, size_t call, const std::string& base,
               Kwargs kwargs = {}) {
    // A body has its own names (`weight`, `t`, `addmm`), not those of the graph around it.
    const std::string name =
        !body_ && call < recording_.calls.size() ? names_.node_name(call, base, op) : base;
    Node* node =
        out_.graph.create_node(op, std::move(target), std::move(args), std::move(kwargs), name);
    if (!first_op_) first_op_ = node;
    return node;
  }

  void set_meta(Node* node, const jit::Value* value, size_t call) {
    if (auto type = value->type()->cast<c10::TensorType>()) {
      if (auto dtype = type->scalarType()) node->meta().tensor.dtype = *dtype;
      if (auto shape = type->sizes().concrete_sizes()) node->meta().tensor.shape = *shape;
      if (auto device = type->device()) node->meta().tensor.device = *device;
      auto dims = recording_.batch_dims.find(value);
      if (dims != recording_.batch_dims.end()) node->meta().tensor.batch_dims = dims->second;
    }
    if (call < recording_.calls.size()) {
      const ModuleCall& c = recording_.calls[call];
      node->meta().td_module = c.td_path;
      node->meta().module_path = c.inner_path;
      node->meta().module_type = describe_module(*c.module->inner_ptr());
    }
  }

  size_t call_of(const jit::Node* node) const {
    auto it = recording_.node_call.find(node);
    return it == recording_.node_call.end() ? recording_.calls.size() : it->second;
  }

  void emit(jit::Node* node) {
    auto read = recording_.reads.find(node);
    if (read != recording_.reads.end()) {
      emit_read(node, read->second);
      return;
    }
    current_call_ = call_of(node);
    const auto kind = node->kind();
    if (kind == c10::prim::Constant) return;  // folded into its users' arguments
    if (kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct) {
      std::vector<Argument> items;
      for (jit::Value* input : node->inputs()) items.push_back(lookup(input));
      env_[node->output()] = ArgumentList{std::move(items), kind == c10::prim::TupleConstruct};
      return;
    }
    if (kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack) {
      Node* source = lookup(node->input()).node();
      if (!source)
        fail<TraceError>("{}: cannot unpack a constant list", describe_call(current_call_));
      emit_items(source, node->outputs(), current_call_);
      return;
    }
    const c10::FunctionSchema* schema = node->maybeSchema();
    if (!schema || kind.ns() != c10::namespaces::aten) {
      fail<TraceError>("{}: the op {} cannot be recorded (tdfx records aten operators)",
                       describe_call(current_call_), kind.toQualString());
    }
    Args args;
    const auto& formals = schema->arguments();
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      jit::Value* input = node->inputs()[i];
      if (is_constant_expression(input) && !env_.count(input) &&
          input->node()->kind() == c10::prim::Constant) {
        args.push_back(constant_argument(
            *jit::toIValue(input), i < formals.size() ? formals[i].real_type() : nullptr, input));
      } else {
        args.push_back(lookup(input));
      }
    }
    const std::string qualified =
        schema->name() + (schema->overload_name().empty() ? "" : "." + schema->overload_name());
    Target target = Target::aten(qualified);
    Node* created =
        method_calls_ && prints_as_method(target.op_name())
            ? create_method(target, args)
            : create(OpCode::kCallFunction, target, args, current_call_, fx_name(target, args, {}));
    if (!body_) out_.origin[node] = created;
    if (node->outputs().size() == 1) {
      set_meta(created, node->output(), current_call_);
      env_[node->output()] = created;
    } else {
      set_meta(created, node->outputs()[0], current_call_);
      created->meta().tensor = {};
      emit_items(created, node->outputs(), current_call_);
    }
  }

  // A call of `target` as torch.fx records `x.view(...)`: self first, then the positional
  // arguments up to the last that differs from its default, then keyword-only ones that
  // differ, by name (`x.add_(y, alpha = 2)`).
  Node* create_method(const Target& target, const Args& args) {
    const auto& formals = target.schema().arguments();
    auto is_default = [&](size_t i) {
      return formals[i].default_value() && equals_default(args[i], *formals[i].default_value());
    };
    size_t positional = 0;
    while (positional < args.size() && !formals[positional].kwarg_only()) ++positional;
    size_t kept = positional;
    while (kept > 1 && is_default(kept - 1)) --kept;
    Kwargs kwargs;
    for (size_t i = positional; i < args.size(); ++i) {
      if (!is_default(i)) kwargs.emplace_back(formals[i].name(), args[i]);
    }
    Node* node = create(OpCode::kCallMethod, Target(target.op_name()),
                        Args(args.begin(), args.begin() + static_cast<long>(kept)), current_call_,
                        target.op_name(), std::move(kwargs));
    node->meta().method_op = target;
    return node;
  }

  // `getitem(source, i)` for each of `values` that something reads: an unused item would be a
  // node without users (`loc, scale = x.chunk(2)` with only `loc` selected).
  template <typename Values>
  void emit_items(Node* source, const Values& values, size_t call) {
    for (size_t i = 0; i < values.size(); ++i) {
      jit::Value* value = values[i];
      if (!needed_.count(value) && !read_outside(value)) continue;
      Node* item = create(OpCode::kCallFunction, Target::getitem(),
                          {source, static_cast<int64_t>(i)}, call, "getitem");
      set_meta(item, value, call);
      env_[value] = item;
    }
  }

  // True when a node this builder emits reads `value` (a leaf body sees its own nodes only).
  bool read_outside(const jit::Value* value) const {
    for (const jit::Use& use : value->uses()) {
      if (!scope_ || scope_->count(use.user)) return true;
    }
    return false;
  }

  void emit_read(jit::Node* node, const KeyRead& read) {
    Node* created;
    if (options_.key_style == KeyStyle::kGetItem) {
      created =
          out_.graph.create_node(OpCode::kCallFunction, Target::getitem(), {tensordict_, read.key},
                                 {}, names_.read_name(read.call, read.key));
    } else {
      // Placeholders come first, before any computation.
      auto guard = first_op_ ? out_.graph.inserting_before(first_op_)
                             : Graph::InsertGuard(out_.graph, nullptr);
      created = out_.graph.placeholder(parameter_name(read.key.joined("_")));
    }
    set_meta(created, node->output(), recording_.calls.size());
    created->meta().td_module = recording_.calls[read.call].td_path;
    out_.origin[node] = created;
    out_.input_keys.push_back(read.key);
    env_[node->output()] = created;
  }

  void emit_region(const LeafRegion& region) {
    current_call_ = region.call;
    // The body: the leaf's ops on its own placeholders and parameters.
    auto body = std::make_shared<Graph>();
    {
      Builder sub(recording_, root_, options_);
      sub.current_call_ = recording_.calls.size();
      sub.body_ = true;
      sub.method_calls_ = false;
      sub.parameter_updates_ = parameter_updates_;
      for (size_t i = 0; i < region.inputs.size(); ++i) {
        sub.env_[region.inputs[i]] = sub.out_.graph.placeholder("input");
      }
      sub.param_prefix_ = region.target + ".";
      const std::unordered_set<const jit::Node*> members(region.nodes.begin(), region.nodes.end());
      sub.scope_ = &members;
      sub.needed_.insert(region.outputs.begin(), region.outputs.end());
      if (region.recurrent) {
        sub.needed_.insert(region.recurrent->outputs().begin(), region.recurrent->outputs().end());
      }
      for (jit::Node* node : region.nodes) sub.emit(node);
      sub.out_.graph.output(region.recurrent ? sub.recurrent_result(region.recurrent)
                                             : sub.flat_result(region.outputs));
      sub.out_.graph.lint();
      *body = std::move(sub.out_.graph);
    }
    Args args;
    for (jit::Value* input : region.inputs) args.push_back(lookup(input));
    Node* node = create(OpCode::kCallModule, Target(region.target), std::move(args), region.call,
                        region.base_name);
    node->set_body(body);
    for (const jit::Node* member : region.nodes) out_.origin[member] = node;
    set_meta(node, region.outputs.front(), region.call);
    node->meta().module_path = region.target;
    node->meta().module_type = describe_module(*region.module);
    if (region.recurrent) {
      node->meta().tensor = {};
      emit_recurrent_items(node, region);
    } else if (region.outputs.size() == 1) {
      env_[region.outputs[0]] = node;
    } else {
      node->meta().tensor = {};
      emit_items(node, region.outputs, region.call);
    }
  }

  Argument flat_result(const std::vector<jit::Value*>& outputs) const {
    std::vector<Argument> items;
    for (jit::Value* v : outputs) items.push_back(env_.at(v));
    return items.size() == 1 ? items[0] : tuple(std::move(items));
  }

  // The nested tuple a recurrent layer returns (see recurrent_paths).
  Argument recurrent_result(const jit::Node* op) const {
    auto item = [&](size_t i) { return env_.at(op->outputs()[i]); };
    if (op->kind() == c10::aten::lstm) return tuple({item(0), tuple({item(1), item(2)})});
    return tuple({item(0), item(1)});
  }

  // getitem chains from a recurrent layer's call to each output something reads, in output
  // order, sharing the inner tuple (`getitem_1 = lstm[1]; getitem_2 = getitem_1[0]`).
  void emit_recurrent_items(Node* call, const LeafRegion& region) {
    const auto paths = recurrent_paths(region.recurrent);
    std::map<int64_t, Node*> inner;
    for (size_t i = 0; i < paths.size(); ++i) {
      const jit::Value* value = region.recurrent->outputs()[i];
      if (std::find(region.outputs.begin(), region.outputs.end(), value) == region.outputs.end()) {
        continue;
      }
      if (!needed_.count(value) && !read_outside(value)) continue;
      Node* source = call;
      if (paths[i].size() == 2) {
        Node*& tuple_node = inner[paths[i][0]];
        if (!tuple_node) {
          tuple_node = create(OpCode::kCallFunction, Target::getitem(), {call, paths[i][0]},
                              region.call, "getitem");
          set_meta(tuple_node, value, region.call);
          tuple_node->meta().tensor = {};
        }
        source = tuple_node;
      }
      Node* item = create(OpCode::kCallFunction, Target::getitem(), {source, paths[i].back()},
                          region.call, "getitem");
      set_meta(item, value, region.call);
      env_[value] = item;
    }
  }

  const Recording& recording_;
  torch::nn::Module& root_;
  const TraceOptions& options_;
  NameScopes names_;
  BuiltGraph out_;
  Node* tensordict_ = nullptr;
  Node* first_op_ = nullptr;
  size_t current_call_ = 0;
  std::string param_prefix_;
  /// Set for the builder of a leaf's body.
  bool body_ = false;
  /// Method faces for method-only ops; leaf bodies stay aten calls, which run.
  bool method_calls_ = false;
  std::unordered_map<const jit::Value*, Argument> env_;
  std::unordered_set<const jit::Value*> escaping_;
  /// Values that must get a node even when no jit node reads them: the graph's outputs.
  std::unordered_set<const jit::Value*> needed_;
  /// For a leaf's body builder, the region's nodes: reads by other nodes are not its own.
  const std::unordered_set<const jit::Node*>* scope_ = nullptr;
  /// In-place results on parameters and buffers, to the parameter's own value.
  std::unordered_map<const jit::Value*, const jit::Value*> parameter_updates_;
  /// Parameter and buffer values by path, sorted so a module's are one range.
  std::map<std::string, const jit::Value*> parameters_by_path_;
  std::vector<LeafRegion> regions_;
  std::unordered_set<const jit::Node*> region_nodes_;
  std::unordered_map<const jit::Node*, size_t> region_starts_;
};

}  // namespace

BuiltGraph build_graph(const Recording& recording, torch::nn::Module& root,
                       const TraceOptions& options) {
  return Builder(recording, root, options).build();
}

}  // namespace detail
}  // namespace tdfx
