// ONNX rules of the operators that make a tensor: zeros, ones and full (and their _like forms),
// arange.

#include <optional>
#include <string>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
namespace {

/// A tensor of shape `shape` (a 1-D int64 tensor) filled with `value` of the output's dtype.
Value constant_of_shape(Converter& c, const std::string& shape, double value) {
  NodeProto* k = c.emit("ConstantOfShape", {shape});
  auto* attr = k->add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  fill_tensor(attr->mutable_t(), at::full({1}, value, at::TensorOptions().dtype(c.out_dtype())),
              c.where());
  return tensor_value(k->output(0));
}

/// zeros/ones/full(size, [fill,] dtype, ...): ConstantOfShape of the output's dtype.
Value filled_rule(Converter& c, std::optional<double> fill) {
  return constant_of_shape(c, c.ints_tensor(0), fill ? *fill : c.double_arg(1));
}

/// zeros_like/ones_like/full_like(x, [fill,] ...): ConstantOfShape of x's shape.
Value filled_like_rule(Converter& c, std::optional<double> fill) {
  return constant_of_shape(c, c.shape(c.tensor(0)), fill ? *fill : c.double_arg(1));
}

Value arange_rule(Converter& c) {
  // arange(end, ...), arange.start(start, end, ...), arange.start_step(start, end, step, ...).
  const std::string& overload = c.node().target().overload();
  const c10::ScalarType t = c.out_dtype();
  double start = 0, end, step = 1;
  if (overload.empty()) {
    end = c.double_arg(0);
  } else {
    start = c.double_arg(0);
    end = c.double_arg(1);
    if (overload == "start_step") step = c.double_arg(2);
  }
  return tensor_value(
      c.op("Range", {c.const_scalar(start, t), c.const_scalar(end, t), c.const_scalar(step, t)}));
}

}  // namespace

void add_creation_rules(RuleTable& table) {
  const RuleList entries = {
      {"zeros", {"ConstantOfShape", [](Converter& c) { return filled_rule(c, 0.0); }}},
      {"ones", {"ConstantOfShape", [](Converter& c) { return filled_rule(c, 1.0); }}},
      {"full", {"ConstantOfShape", [](Converter& c) { return filled_rule(c, std::nullopt); }}},
      {"zeros_like",
       {"Shape, ConstantOfShape", [](Converter& c) { return filled_like_rule(c, 0.0); }}},
      {"ones_like",
       {"Shape, ConstantOfShape", [](Converter& c) { return filled_like_rule(c, 1.0); }}},
      {"full_like",
       {"Shape, ConstantOfShape", [](Converter& c) { return filled_like_rule(c, std::nullopt); }}},
      {"arange", {"Range", arange_rule}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
