// The ONNX converter (converter.h): a program's nodes written one by one as ONNX nodes,
// initializers, graph inputs and outputs, each aten call by its rule (rules/rules.h); and the
// helpers the rules share.

#include "tdfx/onnx/converter.h"

#include <ATen/core/function_schema.h>
#include <fmt/format.h>

#include <algorithm>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/graph/schema_arguments.h"
#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {

int32_t onnx_type(c10::ScalarType dtype, const std::string& where) {
  switch (dtype) {
    case c10::kFloat:
      return TensorProto::FLOAT;
    case c10::kDouble:
      return TensorProto::DOUBLE;
    case c10::kHalf:
      return TensorProto::FLOAT16;
    case c10::kBFloat16:
      return TensorProto::BFLOAT16;
    case c10::kLong:
      return TensorProto::INT64;
    case c10::kInt:
      return TensorProto::INT32;
    case c10::kShort:
      return TensorProto::INT16;
    case c10::kChar:
      return TensorProto::INT8;
    case c10::kByte:
      return TensorProto::UINT8;
    case c10::kBool:
      return TensorProto::BOOL;
    default:
      throw OnnxError(
          fmt::format("{}: dtype {} has no ONNX tensor type", where, c10::toString(dtype)));
  }
}

void set_attr(NodeProto* node, const std::string& name, int64_t value) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(value);
}
void set_attr(NodeProto* node, const std::string& name, double value) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::FLOAT);
  attr->set_f(static_cast<float>(value));
}
void set_attr(NodeProto* node, const std::string& name, const std::vector<int64_t>& values) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) attr->add_ints(v);
}
void set_attr(NodeProto* node, const std::string& name, const std::string& value) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::STRING);
  attr->set_s(value);
}
void set_attr(NodeProto* node, const std::string& name, const std::vector<std::string>& values) {
  auto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(onnx::AttributeProto::STRINGS);
  for (const auto& v : values) attr->add_strings(v);
}

void fill_tensor(TensorProto* proto, const at::Tensor& tensor, const std::string& where) {
  const at::Tensor t = tensor.detach().contiguous().cpu();
  proto->set_data_type(onnx_type(t.scalar_type(), where));
  for (int64_t d : t.sizes()) proto->add_dims(d);
  proto->set_raw_data(std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()));
}

std::string Converter::unique(std::unordered_set<std::string>& used, const std::string& candidate) {
  std::string name = candidate.empty() ? std::string("v") : candidate;
  for (int i = 1; used.count(name); ++i) name = fmt::format("{}_{}", candidate, i);
  used.insert(name);
  return name;
}

const Value& Converter::value_of(const Node* node) const {
  auto it = values_.find(node);
  if (it == values_.end()) {
    throw InternalError(
        fmt::format("onnx export: node '{}' read before it is converted", node->name()));
  }
  return it->second;
}

NodeProto* Converter::emit(const std::string& op, const std::vector<std::string>& inputs,
                           int outputs) {
  NodeProto* proto = graph_->add_node();
  proto->set_op_type(op);
  const int index = graph_->node_size() - 1;
  proto->set_name(fresh_node(index == first_emitted_ ? node_->name() : node_->name() + "/" + op));
  for (const auto& in : inputs) proto->add_input(in);
  for (int i = 0; i < outputs; ++i) {
    proto->add_output(fresh(node_->name() + "/" + op));
    producer_[proto->output(i)] = {index, i};
  }
  if (!doc_.empty()) proto->set_doc_string(doc_);
  return proto;
}

std::string Converter::const_ints(const std::vector<int64_t>& values) {
  const std::string key = fmt::format("i64:{}", fmt::join(values, ","));
  auto it = const_cache_.find(key);
  if (it != const_cache_.end()) return it->second;
  TensorProto* init = graph_->add_initializer();
  init->set_name(fresh("const/ints"));
  init->set_data_type(TensorProto::INT64);
  init->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) init->add_int64_data(v);
  return const_cache_[key] = init->name();
}

std::string Converter::filled(const std::vector<int64_t>& sizes, double value,
                              c10::ScalarType dtype) {
  double elements = 1;
  for (int64_t size : sizes) {
    if (size < 0) refuse(fmt::format("a tensor of negative size {} to write", size));
    elements *= static_cast<double>(size);
  }
  const double bytes = elements * static_cast<double>(c10::elementSize(dtype));
  if (budget_ > 0 && static_cast<double>(made_) + bytes > static_cast<double>(budget_)) {
    refuse(
        fmt::format("the {} tensor of {} elements it would write takes {}, with {} written "
                    "already; the converter's memory budget (OnnxOptions::memory_budget, "
                    "tdfx onnx --memory-budget) is {}",
                    dtype_name(dtype), elements, bytes_text(static_cast<uint64_t>(bytes)),
                    bytes_text(made_), bytes_text(budget_)));
  }
  made_ += static_cast<uint64_t>(bytes);
  return const_tensor(at::full(sizes, value, at::TensorOptions().dtype(dtype)));
}

std::string Converter::const_scalar(double value, c10::ScalarType dtype) {
  const std::string key = fmt::format("{}:{}", c10::toString(dtype), value);
  auto it = const_cache_.find(key);
  if (it != const_cache_.end()) return it->second;
  // A floating constant past its dtype's range is infinite, as C++'s conversion makes it in
  // ATen's kernels (round's 10^40 in float); an integer one that does not fit is refused.
  at::Tensor scalar;
  if (at::isFloatingType(dtype)) {
    scalar = at::scalar_tensor(value, at::TensorOptions().dtype(at::kDouble)).to(dtype);
  } else {
    try {
      scalar = at::scalar_tensor(value, at::TensorOptions().dtype(dtype));
    } catch (const c10::Error&) {
      refuse(fmt::format("the constant {} does not fit {}", value, c10::toString(dtype)));
    }
  }
  TensorProto* init = graph_->add_initializer();
  init->set_name(fresh("const/" + std::string(c10::toString(dtype))));
  fill_tensor(init, scalar, where());
  return const_cache_[key] = init->name();
}

std::string Converter::const_tensor(const at::Tensor& value) {
  TensorProto* init = graph_->add_initializer();
  init->set_name(fresh("const/tensor"));
  fill_tensor(init, value, where());
  return init->name();
}

std::string Converter::cast(const std::string& value, c10::ScalarType to) {
  NodeProto* proto = emit("Cast", {value});
  set_attr(proto, "to", static_cast<int64_t>(onnx_type(to, where())));
  return proto->output(0);
}

std::string Converter::dim_size(const std::string& value, int64_t dim) {
  NodeProto* proto = emit("Shape", {value});
  set_attr(proto, "start", dim);
  set_attr(proto, "end", dim + 1);
  return proto->output(0);
}

std::string Converter::size_of(const SizeExpr& size, const std::string& batch) {
  std::string out = batch;
  if (size.scale != 1) out = op("Mul", {out, const_ints({size.scale})});
  if (size.divisor != 1) out = floor_div(out, const_ints({size.divisor}));
  if (size.offset != 0) out = op("Add", {out, const_ints({size.offset})});
  return out;
}

std::string Converter::reshape_to_output(const std::string& value, size_t from) {
  const TensorMeta& out = node_->meta().tensor;
  if (!out.shape) refuse("its output has no traced shape");
  const auto& in_meta = arg(from).node()->meta().tensor;
  std::vector<std::string> pieces;
  std::vector<int64_t> constant;
  auto flush = [&] {
    if (!constant.empty()) pieces.push_back(const_ints(constant));
    constant.clear();
  };
  for (size_t d = 0; d < out.shape->size(); ++d) {
    const SizeExpr* derived = out.derived(d);
    if (!out.follows_batch(d) && !derived) {
      constant.push_back((*out.shape)[d]);
      continue;
    }
    // A dimension that follows the batch: the first input dimension that is the batch, or
    // the function of it the dimension is.
    if (in_meta.batch_dims.empty()) refuse("a dimension follows the batch but no input one does");
    flush();
    const std::string batch = dim_size(value, in_meta.batch_dims.front());
    pieces.push_back(derived ? size_of(*derived, batch) : batch);
  }
  flush();
  if (pieces.empty()) return reshape(value, const_ints({}));
  std::string shape_tensor = pieces.front();
  if (pieces.size() > 1) {
    NodeProto* concat = emit("Concat", pieces);
    set_attr(concat, "axis", int64_t{0});
    shape_tensor = concat->output(0);
  }
  return reshape(value, shape_tensor);
}

std::string Converter::tensor(size_t i, std::optional<c10::ScalarType> dtype_for_numbers) {
  const Argument& a = arg(i);
  if (const Node* n = a.node()) {
    if (is_sequence(n)) {
      refuse(fmt::format("argument {} is a {}, not a tensor", i, types_.of(n).str()));
    }
    const Value& v = value_of(n);
    if (v.name.empty()) refuse(fmt::format("argument {} ('{}') has no ONNX value", i, n->name()));
    if (is_int(n)) {
      // A size used as a tensor: a 0-d int64.
      NodeProto* squeeze = emit("Squeeze", {v.name, const_ints({0})});
      return squeeze->output(0);
    }
    return v.name;
  }
  const c10::ScalarType dtype = dtype_for_numbers.value_or(out_dtype());
  if (a.is<double>()) return const_scalar(a.as<double>(), dtype);
  if (a.is<int64_t>()) return const_scalar(static_cast<double>(a.as<int64_t>()), dtype);
  if (a.is<bool>()) return const_scalar(a.as<bool>() ? 1.0 : 0.0, dtype);
  refuse(fmt::format("argument {} is neither a tensor nor a number", i));
}

std::vector<std::string> Converter::tensors(size_t i) {
  const Argument& a = arg(i);
  std::vector<std::string> out;
  if (const Node* n = a.node()) {
    if (!is_sequence(n)) refuse(fmt::format("argument {} is not a list", i));
    for (const Value& item : value_of(n).items) out.push_back(item.name);
    return out;
  }
  if (!a.is<ArgumentList>()) refuse(fmt::format("argument {} is not a list of tensors", i));
  for (const Argument& item : a.as<ArgumentList>().items) {
    const Node* n = item.node();
    if (!n) refuse(fmt::format("argument {} holds something other than tensors", i));
    if (types_.of(n).kind != ValueType::Kind::kTensor || value_of(n).name.empty()) {
      refuse(fmt::format("argument {} holds a non-tensor", i));
    }
    out.push_back(value_of(n).name);
  }
  return out;
}

int64_t Converter::int_arg(size_t i) const {
  const Argument& a = arg(i);
  if (a.is<int64_t>()) return a.as<int64_t>();
  if (a.is<bool>()) return a.as<bool>();
  refuse(fmt::format("argument {} must be a constant int", i));
}

double Converter::double_arg(size_t i) const {
  const Argument& a = arg(i);
  if (a.is<double>()) return a.as<double>();
  if (a.is<int64_t>()) return static_cast<double>(a.as<int64_t>());
  if (a.is<bool>()) return a.as<bool>();
  refuse(fmt::format("argument {} must be a constant number", i));
}

bool Converter::bool_arg(size_t i) const {
  const Argument& a = arg(i);
  if (a.is<bool>()) return a.as<bool>();
  if (a.is<int64_t>()) return a.as<int64_t>() != 0;
  refuse(fmt::format("argument {} must be a constant bool", i));
}

std::string Converter::string_arg(size_t i) const {
  const Argument& a = arg(i);
  if (a.is<std::string>()) return a.as<std::string>();
  refuse(fmt::format("argument {} must be a string", i));
}

bool Converter::ints_constant(size_t i) const {
  const Argument& a = arg(i);
  if (a.is<int64_t>()) return true;
  if (!a.is<ArgumentList>()) return false;
  for (const Argument& item : a.as<ArgumentList>().items) {
    if (!item.is<int64_t>()) return false;
  }
  return true;
}

std::vector<int64_t> Converter::ints_arg(size_t i) const {
  const Argument& a = arg(i);
  if (a.is<int64_t>()) return {a.as<int64_t>()};
  if (!a.is<ArgumentList>() || !ints_constant(i)) {
    refuse(fmt::format("argument {} must be a list of constant ints", i));
  }
  std::vector<int64_t> out;
  for (const Argument& item : a.as<ArgumentList>().items) out.push_back(item.as<int64_t>());
  return out;
}

std::string Converter::ints_tensor(size_t i) {
  if (ints_constant(i)) return const_ints(ints_arg(i));
  const Argument& a = arg(i);
  if (!a.is<ArgumentList>()) refuse(fmt::format("argument {} must be a list of ints", i));
  std::vector<std::string> pieces;
  std::vector<int64_t> constant;
  for (const Argument& item : a.as<ArgumentList>().items) {
    if (item.is<int64_t>()) {
      constant.push_back(item.as<int64_t>());
      continue;
    }
    const Node* n = item.node();
    if (!n || !is_int(n)) {
      refuse(fmt::format("argument {} holds something other than ints and sizes", i));
    }
    if (!constant.empty()) pieces.push_back(const_ints(constant));
    constant.clear();
    pieces.push_back(value_of(n).name);
  }
  if (!constant.empty()) pieces.push_back(const_ints(constant));
  NodeProto* concat = emit("Concat", pieces);
  set_attr(concat, "axis", int64_t{0});
  return concat->output(0);
}

c10::ScalarType Converter::dtype_of(size_t i) const {
  const Argument& a = arg(i);
  if (const Node* n = a.node()) {
    if (is_int(n)) return c10::kLong;
    if (!n->meta().tensor.dtype) {
      refuse(fmt::format("the dtype of argument {} ('{}') is not known", i, n->name()));
    }
    return *n->meta().tensor.dtype;
  }
  if (a.is<double>()) return c10::kDouble;
  if (a.is<int64_t>()) return c10::kLong;
  if (a.is<bool>()) return c10::kBool;
  refuse(fmt::format("argument {} has no dtype", i));
}

c10::ScalarType Converter::out_dtype() const {
  if (!node_->meta().tensor.dtype) refuse("its output's dtype is not known");
  return *node_->meta().tensor.dtype;
}

const std::vector<int64_t>& Converter::shape_of(size_t i) const {
  const Node* n = arg(i).node();
  if (!n || !n->meta().tensor.shape) {
    refuse(fmt::format("the shape of argument {} is not known", i));
  }
  return *n->meta().tensor.shape;
}

int64_t Converter::norm_dim(int64_t dim, int64_t rank) const {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    refuse(fmt::format("dimension {} is out of range for rank {}", dim, rank));
  return dim < 0 ? dim + r : dim;
}

bool Converter::follows_batch(size_t i, int64_t dim) const {
  const Node* n = arg(i).node();
  if (!n) return false;
  const TensorMeta& meta = n->meta().tensor;
  return meta.follows_batch(static_cast<size_t>(dim)) || meta.derived(static_cast<size_t>(dim));
}

void Converter::value_info(onnx::ValueInfoProto* info, const std::string& name, const Node& node) {
  info->set_name(name);
  const TensorMeta& meta = node.meta().tensor;
  const std::string who = fmt::format("node '{}'", node.name());
  if (!meta.dtype)
    throw OnnxError(fmt::format("cannot write {} as ONNX: its dtype is not known", who));
  auto* type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx_type(*meta.dtype, who));
  if (meta.shape) {
    auto* shape = type->mutable_shape();
    for (size_t d = 0; d < meta.shape->size(); ++d) {
      auto* dim = shape->add_dim();
      if (meta.follows_batch(d)) {
        dim->set_dim_param("s0");
      } else if (const SizeExpr* size = meta.derived(d)) {
        dim->set_dim_param(size->str());
      } else {
        dim->set_dim_value((*meta.shape)[d]);
      }
    }
  }
}

void Converter::convert() {
  // A node that takes a value of a type it cannot (an item of a tensor, arithmetic on one) is
  // refused by name before anything is written.
  try {
    check_value_types(program_.graph(), types_);
  } catch (const GraphError& e) {
    throw OnnxError(fmt::format("cannot write the program as ONNX: {}", e.what()));
  }
  const GraphSignature& signature = program_.graph_signature();
  std::unordered_map<std::string, const InputSpec*> input_of;
  for (const InputSpec& in : signature.inputs) input_of[in.name] = &in;
  // Names the model gives: graph inputs (the user's keys, as spelled), then initializers (a
  // weight's placeholder name, made fresh where a key took it: a program whose input `w` and
  // parameter `w` were one ONNX name would read the weight for both), then output keys.
  for (const InputSpec& in : signature.inputs) {
    if (in.kind == InputKind::kUserInput) names_.insert(in.target);
  }
  std::unordered_map<std::string, std::string> initializer_names;
  for (const InputSpec& in : signature.inputs) {
    if (in.kind != InputKind::kUserInput) initializer_names[in.name] = fresh(in.name);
  }
  std::vector<std::string> output_names;
  for (const OutputSpec& out : signature.outputs) {
    std::string name = out.key.joined("_");
    if (names_.count(name)) name = fresh(name + "_out");
    names_.insert(name);
    output_names.push_back(name);
  }
  for (const Node* n : program_.graph().nodes()) {
    node_ = n;
    first_emitted_ = graph_->node_size();
    doc_ = n->meta().module_path.empty()
               ? n->meta().module_type
               : n->meta().module_path +
                     (n->meta().module_type.empty() ? "" : " (" + n->meta().module_type + ")");
    switch (n->op()) {
      case OpCode::kPlaceholder: {
        auto it = input_of.find(n->name());
        if (it == input_of.end()) {
          throw OnnxError(
              fmt::format("cannot write placeholder '{}' as ONNX: it is not in the "
                          "program's signature",
                          n->name()));
        }
        const InputSpec& spec = *it->second;
        if (spec.kind == InputKind::kUserInput) {
          value_info(graph_->add_input(), spec.target, *n);
          values_[n] = {spec.target, {}};
        } else {
          auto state = program_.state().find(spec.name);
          if (state == program_.state().end()) {
            throw OnnxError(
                fmt::format("cannot write placeholder '{}' as ONNX: no tensor for it", spec.name));
          }
          TensorProto* init = graph_->add_initializer();
          init->set_name(initializer_names.at(spec.name));
          fill_tensor(init, state->second, fmt::format("placeholder '{}'", spec.name));
          values_[n] = {init->name(), {}};
        }
        break;
      }
      case OpCode::kOutput: {
        const auto& results = n->args().at(0).as<ArgumentList>().items;
        if (results.size() != output_names.size()) {
          throw InternalError("onnx export: the output node and the signature disagree");
        }
        for (size_t i = 0; i < results.size(); ++i) {
          const Node* result = results[i].node();
          if (!result || types_.of(result).kind != ValueType::Kind::kTensor ||
              value_of(result).name.empty()) {
            throw OnnxError(fmt::format("cannot write output '{}' as ONNX: it is not a tensor",
                                        output_names[i]));
          }
          emit("Identity", {value_of(result).name})->set_output(0, output_names[i]);
          graph_->mutable_node(graph_->node_size() - 1)
              ->set_name(fresh_node("output/" + output_names[i]));
          value_info(graph_->add_output(), output_names[i], *result);
        }
        break;
      }
      case OpCode::kCallFunction:
      case OpCode::kCallMethod: {
        Value v = convert_node();
        adopt_name(v, *n);
        if (n->target().is_getitem()) {
          // The list's item takes the getitem's name too (`getitem_1`, not `chunk/Split_1`).
          const Node* list = n->args()[0].node();
          const size_t count = values_[list].items.size();
          int64_t index = n->args()[1].as<int64_t>();
          if (index < 0) index += static_cast<int64_t>(count);
          values_[list].items[static_cast<size_t>(index)].name = v.name;
        }
        values_[n] = std::move(v);
        break;
      }
      default:
        throw OnnxError(
            fmt::format("cannot write node '{}' ({}) as ONNX: only aten calls, "
                        "getitem and placeholders have an ONNX form",
                        n->name(), to_string(n->op())));
    }
  }
}

void Converter::adopt_name(Value& value, const Node& node) {
  if (types_.of(&node).kind != ValueType::Kind::kTensor ||
      value.name.find('/') == std::string::npos) {
    return;
  }
  auto it = producer_.find(value.name);
  if (it == producer_.end()) return;  // an initializer
  const auto [index, slot] = it->second;
  producer_.erase(it);
  names_.erase(value.name);
  value.name = fresh(node.name());
  graph_->mutable_node(index)->set_output(slot, value.name);
  producer_[value.name] = {index, slot};
}

namespace {

/// True when `node` (a call_function) gives a tensor of its own, not a view of an argument:
/// an operator whose schema's results alias nothing, or an item of such a result.
bool computes_own_tensor(const Node& node) {
  if (node.target().is_getitem()) {
    const Node* from = node.args().empty() ? nullptr : node.args()[0].node();
    return from && from->op() == OpCode::kCallFunction && computes_own_tensor(*from);
  }
  if (!node.target().has_operator()) return false;
  for (const auto& result : node.target().schema().returns()) {
    if (result.alias_info()) return false;
  }
  return true;
}

}  // namespace

Value Converter::size_arith() {
  args_ = node_->args();
  if (arg_count() != 2) refuse("size arithmetic takes two ints");
  std::string operands[2];
  for (size_t i = 0; i < 2; ++i) {
    if (const Node* from = arg(i).node()) {
      if (!is_int(from)) refuse("size arithmetic takes ints");
      operands[i] = value_of(from).name;
    } else if (arg(i).is<int64_t>()) {
      operands[i] = const_ints({arg(i).as<int64_t>()});
    } else {
      refuse("size arithmetic takes ints");
    }
  }
  std::string out;
  switch (node_->target().arith()) {
    case Target::SizeArith::kAdd:
      out = op("Add", {operands[0], operands[1]});
      break;
    case Target::SizeArith::kSub:
      out = op("Sub", {operands[0], operands[1]});
      break;
    case Target::SizeArith::kMul:
      out = op("Mul", {operands[0], operands[1]});
      break;
    case Target::SizeArith::kFloorDiv:
      // A divisor that is a size could be 0 where ONNX Runtime's integer Div has no error.
      if (!arg(1).is<int64_t>() || arg(1).as<int64_t>() == 0) {
        refuse("a floor division by a size, or by 0; only by a constant other than 0");
      }
      out = floor_div(operands[0], operands[1]);
      break;
  }
  return {out, {}};
}

namespace {

/// `node` when it is a call_function of the aten operator `op`, else null.
const Node* aten_call_of(const Node* node, const char* op) {
  return node && node->op() == OpCode::kCallFunction && node->target().is_aten() &&
                 node->target().op_name() == op
             ? node
             : nullptr;
}

/// True for the guard a trace records where LibTorch's attention picks its path by
/// `at::equal(a, b)` (dispatch_trace.cpp): `_assert_async(all(eq(a, b)))`, or of its
/// `logical_not`. Either path computes the same projections (fused or one by one), equal
/// within rounding, so ONNX, which has no assertion, computes the recorded one without it.
bool is_attention_path_guard(const Node& node) {
  if (!aten_call_of(&node, "_assert_async") || node.args().size() != 1) return false;
  const Node* cond = node.args()[0].node();
  if (const Node* negated = aten_call_of(cond, "logical_not")) {
    cond = negated->args().size() == 1 ? negated->args()[0].node() : nullptr;
  }
  const Node* all = aten_call_of(cond, "all");
  const Node* eq = all && all->args().size() == 1 ? all->args()[0].node() : nullptr;
  return aten_call_of(eq, "eq") && eq->target().overload() == "Tensor";
}

/// True for the `eq`, `all` and `logical_not` nodes that only an attention path guard reads.
bool only_feeds_attention_path_guard(const Node& node) {
  if (!aten_call_of(&node, "eq") && !aten_call_of(&node, "all") &&
      !aten_call_of(&node, "logical_not")) {
    return false;
  }
  if (node.users().size() == 0) return false;
  for (const Node* user : node.users()) {
    if (!is_attention_path_guard(*user) && !only_feeds_attention_path_guard(*user)) return false;
  }
  return true;
}

}  // namespace

Value Converter::convert_node() {
  const Node& n = *node_;
  if (n.target().is_size_arith()) return size_arith();
  // The guard and what only it reads have no ONNX node (is_attention_path_guard).
  if (is_attention_path_guard(n) || only_feeds_attention_path_guard(n)) {
    return {};
  }
  if (n.target().is_getitem()) {
    args_ = n.args();
    const Node* from = arg(0).node();
    if (!from || !is_sequence(from) || !arg(1).is<int64_t>()) {
      refuse("getitem reads an item of a list by a constant index only");
    }
    const auto& items = value_of(from).items;
    int64_t index = arg(1).as<int64_t>();
    if (index < 0) index += static_cast<int64_t>(items.size());
    if (index < 0 || index >= static_cast<int64_t>(items.size())) refuse("index out of range");
    return items[static_cast<size_t>(index)];
  }
  if (!n.target().has_operator()) refuse("its target is no aten operator");
  const Target target = n.target().as_function();
  args_ = schema_arguments(n);
  const auto& table = rules();
  const std::string full =
      target.overload().empty() ? target.op_name() : target.op_name() + "." + target.overload();
  std::string op_name = target.op_name();
  const bool in_place = !op_name.empty() && op_name.back() == '_';
  if (in_place) {
    // An update of a tensor the node computed itself (the RNN cells' `add_` on a Linear's
    // result) is the functional op, whose value later readers see. An update of an input or a
    // buffer, or of a view into another tensor, cannot be written.
    const Node* self = args_.empty() ? nullptr : arg(0).node();
    if (!self || self->op() != OpCode::kCallFunction || !computes_own_tensor(*self)) {
      refuse(
          "it updates its input in place, which an ONNX model cannot: a buffer (BatchNorm's "
          "statistics in training mode: export the pipeline in eval mode; a counter of the "
          "module's own: keep it out of the exported pipeline), or a view of another tensor "
          "(write the op out of place: `y = x.sigmoid()`, not `x.sigmoid_()`)");
    }
    op_name.pop_back();
  }
  const std::string functional =
      target.overload().empty() ? op_name : op_name + "." + target.overload();
  auto it = table.find(in_place ? functional : full);
  if (it == table.end()) it = table.find(op_name);
  if (in_place && it != table.end()) {
    Value updated = it->second.rule(*this);
    values_[arg(0).node()] = updated;
    return updated;
  }
  if (it == table.end()) {
    refuse(fmt::format("aten::{} has no ONNX form at opset {} (see onnx_operators())",
                       target.op_name(), kOnnxOpset));
  }
  return it->second.rule(*this);
}

// --------------------------------------------------------------------------------------
// The helpers the rules share (converter.h).

Value tensor_value(std::string name) { return {std::move(name), {}}; }

c10::ScalarType operand_dtype(Converter& c, size_t a, size_t b) {
  const bool a_tensor = c.arg(a).node() != nullptr, b_tensor = c.arg(b).node() != nullptr;
  const c10::ScalarType ta = c.dtype_of(a), tb = c.dtype_of(b);
  if (a_tensor && b_tensor) return c10::promoteTypes(ta, tb);
  const c10::ScalarType tensor_type = a_tensor ? ta : tb, number_type = a_tensor ? tb : ta;
  if (!a_tensor && !b_tensor) return c10::promoteTypes(ta, tb);
  if (c10::isFloatingType(number_type) && !c10::isFloatingType(tensor_type)) return c10::kFloat;
  if (number_type == c10::kLong && tensor_type == c10::kBool) return c10::kLong;
  return tensor_type;
}

std::pair<std::string, std::string> operands(Converter& c, size_t a, size_t b) {
  const c10::ScalarType t = operand_dtype(c, a, b);
  std::string x = c.tensor(a, t), y = c.tensor(b, t);
  if (c.arg(a).node()) x = c.cast_if(x, c.dtype_of(a), t);
  if (c.arg(b).node()) y = c.cast_if(y, c.dtype_of(b), t);
  return {x, y};
}

Value clip(Converter& c, std::optional<size_t> lo, std::optional<size_t> hi) {
  const c10::ScalarType t = c.out_dtype();
  std::string x = c.tensor(0);
  auto bound = [&](std::optional<size_t> i) -> std::string {
    if (!i || c.is_none(*i)) return "";
    if (c.arg(*i).node()) c.refuse("a tensor bound");
    return c.const_scalar(c.double_arg(*i), t);
  };
  const std::string low = bound(lo), high = bound(hi);
  if (high.empty()) return tensor_value(c.op("Clip", {x, low}));
  return tensor_value(c.op("Clip", {x, low, high}));
}

std::vector<int64_t> piece_sizes(Converter& c, int64_t each, int64_t dim) {
  if (c.follows_batch(0, dim)) c.refuse("splits a dimension that follows the batch");
  if (each <= 0) c.refuse(fmt::format("pieces of {} elements", each));
  const int64_t size = c.shape_of(0)[static_cast<size_t>(dim)];
  std::vector<int64_t> sizes;
  for (int64_t left = size; left > 0; left -= each) sizes.push_back(std::min(each, left));
  if (sizes.empty()) sizes.push_back(0);
  return sizes;
}

std::vector<int64_t> chunk_sizes(Converter& c, int64_t chunks, int64_t dim) {
  if (chunks <= 0) c.refuse(fmt::format("{} chunks", chunks));
  const int64_t size = c.shape_of(0)[static_cast<size_t>(dim)];
  return piece_sizes(c, std::max<int64_t>((size + chunks - 1) / chunks, 1), dim);
}

Value split_into(Converter& c, const std::vector<int64_t>& sizes, int64_t dim) {
  NodeProto* s =
      c.emit("Split", {c.tensor(0), c.const_ints(sizes)}, static_cast<int>(sizes.size()));
  set_attr(s, "axis", dim);
  Value list;
  for (int i = 0; i < s->output_size(); ++i) list.items.push_back(tensor_value(s->output(i)));
  return list;
}

}  // namespace tdfx::onnx_detail
