// ONNX rules of linear algebra: linear, addmm, the matrix products and bilinear.

#include <string>
#include <vector>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
namespace {

Value linear_rule(Converter& c) {
  std::string x = c.tensor(0), w = c.tensor(1);
  const bool bias = !c.is_none(2);
  if (c.rank_of(0) == 2) {
    NodeProto* gemm = c.emit("Gemm", bias ? std::vector<std::string>{x, w, c.tensor(2)}
                                          : std::vector<std::string>{x, w});
    set_attr(gemm, "transB", int64_t{1});
    return tensor_value(gemm->output(0));
  }
  NodeProto* t = c.emit("Transpose", {w});
  set_attr(t, "perm", std::vector<int64_t>{1, 0});
  std::string y = c.op("MatMul", {x, t->output(0)});
  if (bias) y = c.op("Add", {y, c.tensor(2)});
  return tensor_value(y);
}

Value addmm_rule(Converter& c) {
  // addmm(bias, a, b, beta, alpha) = beta bias + alpha (a @ b).
  NodeProto* gemm = c.emit("Gemm", {c.tensor(1), c.tensor(2), c.tensor(0)});
  set_attr(gemm, "beta", c.double_arg(3));
  set_attr(gemm, "alpha", c.double_arg(4));
  return tensor_value(gemm->output(0));
}

Value matmul_rule(Converter& c) { return tensor_value(c.op("MatMul", {c.tensor(0), c.tensor(1)})); }

Value bilinear_rule(Converter& c) {
  // bilinear(x1, x2, weight [out, in1, in2], bias): einsum("...i,oij,...j->...o") + bias.
  NodeProto* e = c.emit("Einsum", {c.tensor(0), c.tensor(2), c.tensor(1)});
  set_attr(e, "equation", std::string("...i,oij,...j->...o"));
  std::string y = e->output(0);
  if (!c.is_none(3)) y = c.op("Add", {y, c.tensor(3)});
  return tensor_value(y);
}

}  // namespace

void add_linear_algebra_rules(RuleTable& table) {
  const RuleList entries = {
      {"linear", {"Gemm (2-D input), else Transpose, MatMul, Add", linear_rule}},
      {"addmm", {"Gemm", addmm_rule}},
      {"mm", {"MatMul", matmul_rule}},
      {"bmm", {"MatMul", matmul_rule}},
      {"matmul", {"MatMul", matmul_rule}},
      {"bilinear", {"Einsum (Add for the bias)", bilinear_rule}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
