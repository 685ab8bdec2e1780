#include "tdfx/tracer/graph_builder.h"

#include <fmt/format.h>
#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/tracer/builtin_layers.h"
#include "tdfx/tracer/leaf_regions.h"
#include "tdfx/tracer/method_calls.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/name_scopes.h"

namespace tdfx::detail {
namespace {

namespace jit = torch::jit;

// Emits a recording's graph node by node in program order: the ops of a leaf region become
// one call_module node whose body a builder of its own emits, the others are emitted as the
// ops they are. `env_` holds what each jit value became.
class Builder {
 public:
  Builder(const Recording& recording, const TraceOptions& options, const ParameterUpdates& updates)
      : recording_(recording),
        options_(options),
        updates_(updates),
        names_(recording),
        method_calls_(options.method_calls && options.outline_leaves) {
    const bool flat =
        options.key_style == KeyStyle::kPlaceholder && !options.outline_leaves && !method_calls_;
    if (!flat) program_names_ = std::make_shared<ProgramNames>(recording);
  }

  BuiltGraph build() {
    refuse_uninitialised_reads();
    for (const auto& [key, value] : recording_.outputs) needed_.insert(value);
    LeafRegions regions;
    if (options_.outline_leaves) regions = find_leaf_regions(recording_, options_, updates_);
    if (options_.key_style == KeyStyle::kGetItem)
      tensordict_ = out_.graph.placeholder("tensordict");
    for (jit::Node* node : recording_.graph->nodes()) {
      if (regions.nodes.count(node)) {
        auto it = regions.starts.find(node);
        if (it != regions.starts.end()) emit_region(regions.regions[it->second]);
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
    if (updates_.parameter_of(value) != value) return lookup(updates_.parameter_of(value));
    auto param = recording_.parameters.find(value);
    if (param != recording_.parameters.end()) {
      // A parameter read outside a leaf: a get_attr at its first use.
      const size_t call = current_call_;
      std::string path = path_within(value, param->second, call);
      const std::string full_path = path;
      if (!param_prefix_.empty() && path.rfind(param_prefix_, 0) == 0) {
        path = path.substr(param_prefix_.size());  // inside a leaf's body
      }
      Node* node = create(OpCode::kGetAttr, Target(path), {}, call, relative_to_call(path, call));
      set_meta(node, value, call);
      // The program reads a tensor once, however many bodies read it (a shared layer).
      if (program_names_ && program_names_->attributes.insert(value).second) {
        name_in_program(node, OpCode::kGetAttr, relative_to_call(full_path, program_call()),
                        program_call());
      }
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

  // A tensor the trace saw allocated (aten::empty and kin) and no recorded op wrote: its
  // values were written outside the dispatcher, as at::tensor({...}) copies its literal into
  // an empty tensor, and the program would read uninitialised memory. An allocation counts
  // as written once an op writes into it or into a view of it (fill_, copy_ into a slice,
  // an `out=` argument); whether those writes cover it whole is not checked.
  void refuse_uninitialised_reads() const {
    static const std::unordered_set<c10::Symbol> allocations = {
        c10::aten::empty, c10::aten::empty_like, c10::aten::new_empty, c10::aten::empty_strided,
        c10::aten::new_empty_strided};
    // Each allocation or view of one not yet written, and the allocation it belongs to.
    std::unordered_map<const jit::Value*, const jit::Value*> unwritten;
    std::unordered_set<const jit::Value*> written;
    auto refuse = [&](const jit::Value* root, const std::string& reader, size_t call) {
      fail<TraceError>(
          "{}: {} reads a tensor the trace saw only allocated ({}), never written by a "
          "recorded op, so the program would read uninitialised memory; a tensor literal "
          "(at::tensor({{...}})) is written outside the recorded ops: make it a buffer "
          "(register_buffer) or build it with a recorded factory (at::arange, at::full)",
          describe_call(call), reader, root->node()->kind().toQualString());
    };
    auto writes = [](const c10::FunctionSchema* schema, size_t i) {
      if (!schema || i >= schema->arguments().size()) return false;
      const c10::AliasInfo* alias = schema->arguments()[i].alias_info();
      return alias && alias->isWrite();
    };
    auto is_view = [](const c10::FunctionSchema* schema) {
      if (!schema || schema->arguments().empty() || schema->returns().size() != 1) return false;
      const c10::AliasInfo* in = schema->arguments()[0].alias_info();
      const c10::AliasInfo* out = schema->returns()[0].alias_info();
      return in && out && !in->isWrite() && !out->isWrite();
    };
    for (const jit::Node* node : recording_.graph->nodes()) {
      const c10::FunctionSchema* schema = node->maybeSchema();
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        auto it = unwritten.find(node->inputs()[i]);
        if (it == unwritten.end() || written.count(it->second)) continue;
        const jit::Value* root = it->second;
        if (writes(schema, i)) {
          written.insert(root);
        } else if (i == 0 && is_view(schema) && node->outputs().size() == 1) {
          unwritten[node->output()] = root;
        } else {
          refuse(root, node->kind().toQualString(), call_of(node));
        }
      }
      if (allocations.count(node->kind()) && node->outputs().size() == 1) {
        unwritten[node->output()] = node->output();
      }
    }
    for (const auto& [key, value] : recording_.outputs) {
      auto it = unwritten.find(value);
      if (it != unwritten.end() && !written.count(it->second)) {
        refuse(it->second, "output " + key.repr(), recording_.calls.size());
      }
    }
  }

  std::string describe_call(size_t call) const {
    if (call >= recording_.calls.size()) return "the traced module";
    return recording_.calls[call].module->describe();
  }

  Argument constant_argument(const c10::IValue& value, const c10::TypePtr& type,
                             const jit::Value* /*source*/) {
    // A dtype, memory format or layout is an int in the trace; the schema says which.
    if (auto constant = tdfx::constant_argument(value, type)) return *constant;
    if (value.isTensor()) {
      const at::Tensor& tensor = value.toTensor();
      fail<TraceError>(
          "{}: the module uses a tensor the trace does not follow ({} {}, not a parameter, a "
          "buffer or computed from its inputs: a tensor a lambda captured, say); register it "
          "as a buffer so the graph can name it",
          describe_call(current_call_), dtype_name(tensor.scalar_type()),
          fmt::format("[{}]", fmt::join(tensor.sizes(), ", ")));
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

  // `value` may be null: a node without a result.
  void set_meta(Node* node, const jit::Value* value, size_t call,
                const jit::Node* recorded = nullptr) {
    if (auto type = value ? value->type()->cast<c10::TensorType>() : nullptr) {
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
      node->meta().module_type = c.module_type;
      if (!recorded && value) recorded = value->node();
      auto child = recorded ? recording_.node_child.find(recorded) : recording_.node_child.end();
      if (child != recording_.node_child.end()) {
        node->meta().module_path = recording_.children[child->second].path;
        node->meta().module_type = recording_.children[child->second].type;
      }
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
    const std::string base = fx_name(target, args, {});
    Node* created = method_calls_ && prints_as_method(target.op_name())
                        ? create_method(target, args)
                        : create(OpCode::kCallFunction, target, args, current_call_, base);
    if (!body_) out_.origin[node] = created;
    name_in_program(created, OpCode::kCallFunction, base, program_call());
    if (node->outputs().empty()) {
      // Called for its effect (a guard's `_assert_async`): no value, no tensor metadata.
      set_meta(created, nullptr, current_call_, node);
    } else if (node->outputs().size() == 1) {
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
    return create(OpCode::kCallMethod, Target::method(target),
                  Args(args.begin(), args.begin() + static_cast<long>(kept)), current_call_,
                  target.op_name(), std::move(kwargs));
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
      if (source->op() != OpCode::kCallModule) {
        name_in_program(item, OpCode::kCallFunction, "getitem", body_ ? body_call_ : call);
      }
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
    if (program_names_) {
      created->meta().program_name =
          program_names_->graph.create_name(parameter_name(read.key.joined("_")));
    }
    out_.origin[node] = created;
    out_.input_keys.push_back(read.key);
    env_[node->output()] = created;
  }

  void emit_region(const LeafRegion& region) {
    current_call_ = region.call;
    // The body: the leaf's ops on its own placeholders and parameters.
    auto body = std::make_shared<Graph>();
    {
      Builder sub(recording_, options_, updates_);
      sub.current_call_ = recording_.calls.size();
      sub.body_ = true;
      sub.body_call_ = region.call;
      sub.program_names_ = program_names_;
      sub.method_calls_ = false;
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
    const auto paths = recurrent_paths(region.recurrent->kind().toUnqualString());
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
  const TraceOptions& options_;
  const ParameterUpdates& updates_;
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
  /// Values that must get a node even when no jit node reads them: the graph's outputs.
  std::unordered_set<const jit::Value*> needed_;
  /// For a leaf's body builder, the region's nodes: reads by other nodes are not its own.
  const std::unordered_set<const jit::Node*>* scope_ = nullptr;
  /// The names the nodes take in the program graph (NodeMeta::program_name), given as a
  /// build with every op inline and each key a placeholder would name them; shared with the
  /// body builders. Null when the graph built is flat already.
  struct ProgramNames {
    explicit ProgramNames(const Recording& recording) : scopes(recording) {}
    NameScopes scopes;
    Namespace graph;  // the program graph's own: placeholders and ops share it
    std::unordered_set<const jit::Value*> attributes;  // parameters named so far
  };
  std::shared_ptr<ProgramNames> program_names_;
  /// For a leaf's body builder, the TensorDictModule call its ops belong to in the program.
  size_t body_call_ = 0;

  // Names `node` as the program graph will: an op of `call` made from `base`.
  void name_in_program(Node* node, OpCode op, const std::string& base, size_t call) {
    if (!program_names_) return;
    const std::string scoped =
        call < recording_.calls.size() ? program_names_->scopes.node_name(call, base, op) : base;
    node->meta().program_name = program_names_->graph.create_name(scoped);
  }
  size_t program_call() const { return body_ ? body_call_ : current_call_; }
};

}  // namespace

BuiltGraph build_graph(const Recording& recording, const TraceOptions& options) {
  const ParameterUpdates updates(recording);
  return Builder(recording, options, updates).build();
}

}  // namespace tdfx::detail
