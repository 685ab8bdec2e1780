// ONNX rules of activations: ReLU's relatives, ELU, GELU, SiLU, Mish, the shrinks, threshold,
// PReLU, GLU, softmax and log_softmax.

#include <string>
#include <vector>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
namespace {

Value softplus_rule(Converter& c) {
  // softplus(x, beta, threshold) = x where beta * x > threshold, else log1p(exp(beta x)) / beta.
  const c10::ScalarType t = c.out_dtype();
  const double beta = c.double_arg(1), threshold = c.double_arg(2);
  std::string x = c.tensor(0);
  std::string bx = beta == 1.0 ? x : c.op("Mul", {x, c.const_scalar(beta, t)});
  std::string soft = c.op("Softplus", {bx});
  if (beta != 1.0) soft = c.op("Div", {soft, c.const_scalar(beta, t)});
  std::string above = c.op("Greater", {bx, c.const_scalar(threshold, t)});
  return tensor_value(c.op("Where", {above, x, soft}));
}

Value gelu_rule(Converter& c) {
  const c10::ScalarType t = c.out_dtype();
  std::string x = c.tensor(0);
  const std::string approximate = c.arg_count() > 1 ? c.string_arg(1) : "none";
  std::string half_x = c.op("Mul", {x, c.const_scalar(0.5, t)});
  if (approximate == "tanh") {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    std::string cube = c.op("Mul", {c.op("Mul", {x, x}), x});
    std::string inner = c.op("Add", {x, c.op("Mul", {cube, c.const_scalar(0.044715, t)})});
    inner = c.op("Mul", {inner, c.const_scalar(0.7978845608028654, t)});
    std::string one_plus = c.op("Add", {c.op("Tanh", {inner}), c.const_scalar(1.0, t)});
    return tensor_value(c.op("Mul", {half_x, one_plus}));
  }
  if (approximate != "none") c.refuse("unknown approximation '" + approximate + "'");
  std::string erf = c.op("Erf", {c.op("Mul", {x, c.const_scalar(0.7071067811865476, t)})});
  std::string one_plus = c.op("Add", {erf, c.const_scalar(1.0, t)});
  return tensor_value(c.op("Mul", {half_x, one_plus}));
}

Value softmax_rule(Converter& c, const std::string& op) {
  const int64_t axis = c.norm_dim(c.int_arg(1), c.rank_of(0));
  std::string x = c.tensor(0);
  const c10::ScalarType t = c.out_dtype();
  x = c.cast_if(x, c.dtype_of(0), t);
  NodeProto* s = c.emit(op, {x});
  set_attr(s, "axis", axis);
  return tensor_value(s->output(0));
}

/// An activation ONNX has with float attributes `names` taken from arguments 1, 2, ...
Rule activation(std::string op, std::vector<std::string> names) {
  return [op, names](Converter& c) {
    NodeProto* a = c.emit(op, {c.tensor(0)});
    for (size_t i = 0; i < names.size(); ++i) set_attr(a, names[i], c.double_arg(i + 1));
    return tensor_value(a->output(0));
  };
}

Value elu_rule(Converter& c) {
  // elu(x, alpha, scale, input_scale).
  if (c.double_arg(2) != 1.0 || c.double_arg(3) != 1.0) c.refuse("an ELU with scales");
  NodeProto* e = c.emit("Elu", {c.tensor(0)});
  set_attr(e, "alpha", c.double_arg(1));
  return tensor_value(e->output(0));
}

Value silu_rule(Converter& c) {
  std::string x = c.tensor(0);
  return tensor_value(c.op("Mul", {x, c.op("Sigmoid", {x})}));
}

Value mish_rule(Converter& c) {
  std::string x = c.tensor(0);
  return tensor_value(c.op("Mul", {x, c.op("Tanh", {c.op("Softplus", {x})})}));
}

Value log_sigmoid_rule(Converter& c) {
  return tensor_value(c.op("Neg", {c.op("Softplus", {c.op("Neg", {c.tensor(0)})})}));
}

Value hardtanh_rule(Converter& c) { return clip(c, 1, 2); }

Value relu6_rule(Converter& c) {
  const c10::ScalarType t = c.out_dtype();
  return tensor_value(c.op("Clip", {c.tensor(0), c.const_scalar(0, t), c.const_scalar(6, t)}));
}

Value hardsigmoid_rule(Converter& c) {
  NodeProto* h = c.emit("HardSigmoid", {c.tensor(0)});
  set_attr(h, "alpha", 1.0 / 6.0);
  set_attr(h, "beta", 0.5);
  return tensor_value(h->output(0));
}

Value threshold_rule(Converter& c) {
  const c10::ScalarType t = c.out_dtype();
  std::string x = c.tensor(0);
  // ATen: x <= threshold ? value : x, so NaN stays NaN.
  std::string above = c.op("Greater", {x, c.const_scalar(c.double_arg(1), t)});
  if (at::isFloatingType(t)) above = c.op("Or", {above, c.op("IsNaN", {x})});
  return tensor_value(c.op("Where", {above, x, c.const_scalar(c.double_arg(2), t)}));
}

Value shrink_rule(Converter& c, bool soft) {
  std::string x = c.tensor(0);
  NodeProto* s = c.emit("Shrink", {x});
  set_attr(s, "lambd", c.double_arg(1));
  set_attr(s, "bias", soft ? c.double_arg(1) : 0.0);
  // ATen's hardshrink keeps NaN (it zeroes only what lies in [-lambd, lambd]); Shrink zeroes it,
  // as ATen's softshrink does.
  if (soft) return tensor_value(s->output(0));
  return tensor_value(c.op("Where", {c.op("IsNaN", {x}), x, s->output(0)}));
}

Value tanhshrink_rule(Converter& c) {
  std::string x = c.tensor(0);
  return tensor_value(c.op("Sub", {x, c.op("Tanh", {x})}));
}

Value prelu_rule(Converter& c) {
  // The weight applies along dimension 1; PRelu broadcasts from the right.
  std::string slope = c.tensor(1);
  const int64_t rank = c.rank_of(0);
  if (rank > 2 && c.shape_of(1).size() == 1 && c.shape_of(1)[0] != 1) {
    std::vector<int64_t> axes;
    for (int64_t d = 1; d < rank - 1; ++d) axes.push_back(d);
    slope = c.op("Unsqueeze", {slope, c.const_ints(axes)});
  }
  return tensor_value(c.op("PRelu", {c.tensor(0), slope}));
}

Value glu_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0));
  Value halves = split_into(c, chunk_sizes(c, 2, dim), dim);
  return tensor_value(c.op("Mul", {halves.items[0].name, c.op("Sigmoid", {halves.items[1].name})}));
}

}  // namespace

void add_activation_rules(RuleTable& table) {
  const RuleList entries = {
      {"celu", {"Celu", activation("Celu", {"alpha"})}},
      {"elu", {"Elu", elu_rule}},
      {"gelu", {"Erf, Mul, Add (Tanh for approximate='tanh')", gelu_rule}},
      {"glu", {"Split, Sigmoid, Mul", glu_rule}},
      {"hardshrink", {"Shrink", [](Converter& c) { return shrink_rule(c, false); }}},
      {"hardsigmoid", {"HardSigmoid", hardsigmoid_rule}},
      {"hardswish", {"HardSwish", unary("HardSwish")}},
      {"hardtanh", {"Clip", hardtanh_rule}},
      {"leaky_relu", {"LeakyRelu", activation("LeakyRelu", {"alpha"})}},
      {"log_sigmoid", {"Neg, Softplus, Neg", log_sigmoid_rule}},
      {"mish", {"Softplus, Tanh, Mul", mish_rule}},
      {"prelu", {"PRelu (Unsqueeze of the weight)", prelu_rule}},
      {"relu6", {"Clip", relu6_rule}},
      {"selu", {"Selu", unary("Selu")}},
      {"silu", {"Sigmoid, Mul", silu_rule}},
      {"softplus", {"Softplus, Greater, Where (Mul, Div for beta)", softplus_rule}},
      {"softshrink", {"Shrink", [](Converter& c) { return shrink_rule(c, true); }}},
      {"tanhshrink", {"Tanh, Sub", tanhshrink_rule}},
      {"threshold", {"Greater, Where", threshold_rule}},
      {"softmax", {"Softmax", [](Converter& c) { return softmax_rule(c, "Softmax"); }}},
      {"_softmax", {"Softmax", [](Converter& c) { return softmax_rule(c, "Softmax"); }}},
      {"log_softmax", {"LogSoftmax", [](Converter& c) { return softmax_rule(c, "LogSoftmax"); }}},
      {"_log_softmax", {"LogSoftmax", [](Converter& c) { return softmax_rule(c, "LogSoftmax"); }}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
