// ONNX rules of the losses, and of the distances some of them build on (cosine_similarity,
// pairwise_distance).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
namespace {

/// The loss reductions of ATen: 0 none, 1 mean, 2 sum.
std::string reduce_loss(Converter& c, const std::string& loss, int64_t reduction) {
  if (reduction < 0 || reduction > 2) c.refuse(fmt::format("an unknown reduction {}", reduction));
  if (reduction == 0) return loss;
  NodeProto* r = c.emit(reduction == 1 ? "ReduceMean" : "ReduceSum", {loss});
  set_attr(r, "keepdims", int64_t{0});
  return r->output(0);
}

Value mse_loss_rule(Converter& c) {
  auto [x, y] = operands(c, 0, 1);
  std::string d = c.op("Sub", {x, y});
  return tensor_value(reduce_loss(c, c.op("Mul", {d, d}), c.int_arg(2)));
}

Value l1_loss_rule(Converter& c) {
  auto [x, y] = operands(c, 0, 1);
  return tensor_value(reduce_loss(c, c.op("Abs", {c.op("Sub", {x, y})}), c.int_arg(2)));
}

/// smooth_l1 (x, y, reduction, beta) and huber (x, y, reduction, delta).
Value smooth_l1_rule(Converter& c, bool huber) {
  const c10::ScalarType t = c.out_dtype();
  auto [x, y] = operands(c, 0, 1);
  const double k = c.double_arg(3);
  std::string d = c.op("Abs", {c.op("Sub", {x, y})});
  std::string small = c.op("Less", {d, c.const_scalar(k, t)});
  std::string square = c.op("Mul", {c.op("Mul", {d, d}), c.const_scalar(0.5, t)});
  std::string in = huber ? square : c.op("Div", {square, c.const_scalar(k, t)});
  std::string out =
      huber ? c.op("Mul", {c.op("Sub", {d, c.const_scalar(0.5 * k, t)}), c.const_scalar(k, t)})
            : c.op("Sub", {d, c.const_scalar(0.5 * k, t)});
  return tensor_value(reduce_loss(c, c.op("Where", {small, in, out}), c.int_arg(2)));
}

Value bce_rule(Converter& c) {
  // binary_cross_entropy(p, y, weight, reduction): -(y log p + (1 - y) log(1 - p)), logs >= -100.
  const c10::ScalarType t = c.out_dtype();
  std::string p = c.tensor(0), y = c.tensor(1);
  auto clamped_log = [&](const std::string& v) {
    return c.op("Max", {c.op("Log", {v}), c.const_scalar(-100.0, t)});
  };
  std::string one = c.const_scalar(1.0, t);
  std::string loss = c.op(
      "Neg",
      {c.op("Add", {c.op("Mul", {y, clamped_log(p)}),
                    c.op("Mul", {c.op("Sub", {one, y}), clamped_log(c.op("Sub", {one, p}))})})});
  if (!c.is_none(2)) loss = c.op("Mul", {loss, c.tensor(2)});
  return tensor_value(reduce_loss(c, loss, c.int_arg(3)));
}

Value bce_logits_rule(Converter& c) {
  // (x, y, weight, pos_weight, reduction): (1 - y) x + (1 + (pw - 1) y) softplus(-x).
  const c10::ScalarType t = c.out_dtype();
  std::string x = c.tensor(0), y = c.tensor(1);
  std::string one = c.const_scalar(1.0, t);
  std::string log_term = c.op("Softplus", {c.op("Neg", {x})});
  if (!c.is_none(3)) {
    std::string coef = c.op("Add", {one, c.op("Mul", {c.op("Sub", {c.tensor(3), one}), y})});
    log_term = c.op("Mul", {coef, log_term});
  }
  std::string loss = c.op("Add", {c.op("Mul", {c.op("Sub", {one, y}), x}), log_term});
  if (!c.is_none(2)) loss = c.op("Mul", {loss, c.tensor(2)});
  return tensor_value(reduce_loss(c, loss, c.int_arg(4)));
}

const char* kReductions[] = {"none", "mean", "sum"};

// A loss over class indices, as ONNX's `op` computes it: inputs (x, target, weight?) and the
// attributes reduction (argument 3) and ignore_index (argument 4).
Value class_loss(Converter& c, const char* op) {
  std::vector<std::string> inputs{c.tensor(0), c.tensor(1)};
  if (!c.is_none(2)) inputs.push_back(c.tensor(2));
  NodeProto* n = c.emit(op, inputs);
  const int64_t reduction = c.int_arg(3);
  if (reduction < 0 || reduction > 2) c.refuse("an unknown reduction");
  set_attr(n, "reduction", std::string(kReductions[reduction]));
  set_attr(n, "ignore_index", c.int_arg(4));
  return tensor_value(n->output(0));
}

Value nll_loss_rule(Converter& c) {
  // nll_loss(x, target, weight, reduction, ignore_index).
  return class_loss(c, "NegativeLogLikelihoodLoss");
}

Value cross_entropy_rule(Converter& c) {
  // cross_entropy_loss(x, target, weight, reduction, ignore_index, label_smoothing).
  if (c.double_arg(5) != 0.0) c.refuse("label smoothing");
  if (c.dtype_of(1) != c10::kLong) c.refuse("class probabilities as targets");
  return class_loss(c, "SoftmaxCrossEntropyLoss");
}

Value cosine_similarity_rule(Converter& c) {
  // (x, y, dim, eps): sum(x y) / sqrt(max(sum(x x) sum(y y), eps^2)), as ATen 1.13 computes it.
  const c10::ScalarType t = c.out_dtype();
  auto [x, y] = operands(c, 0, 1);
  const int64_t rank = std::max(c.rank_of(0), c.rank_of(1));
  const std::vector<int64_t> axes{c.norm_dim(c.int_arg(2), rank)};
  auto sum = [&](const std::string& v) {
    NodeProto* r = c.emit("ReduceSum", {v, c.const_ints(axes)});
    set_attr(r, "keepdims", int64_t{0});
    return r->output(0);
  };
  const double eps = c.double_arg(3);
  std::string norms = c.op("Mul", {sum(c.op("Mul", {x, x})), sum(c.op("Mul", {y, y}))});
  std::string denominator = c.op("Sqrt", {c.op("Max", {norms, c.const_scalar(eps * eps, t)})});
  return tensor_value(c.op("Div", {sum(c.op("Mul", {x, y})), denominator}));
}

/// The p-norm (p 1 or 2) of x - y + eps over the last of `rank` dimensions: pairwise_distance.
std::string p_distance(Converter& c, const std::string& x, const std::string& y, double p,
                       double eps, bool keepdim, int64_t rank) {
  std::string d = c.op("Add", {c.op("Sub", {x, y}), c.const_scalar(eps, c.out_dtype())});
  std::string op;
  if (p == 2.0) {
    op = "ReduceL2";
  } else if (p == 1.0) {
    op = "ReduceL1";
  } else {
    c.refuse(fmt::format("a {}-norm", p));
  }
  NodeProto* r = c.emit(op, {d});
  set_attr(r, "axes", std::vector<int64_t>{rank - 1});
  set_attr(r, "keepdims", int64_t{keepdim});
  return r->output(0);
}

Value pairwise_distance_rule(Converter& c) {
  // (x, y, p, eps, keepdim).
  auto [x, y] = operands(c, 0, 1);
  return tensor_value(p_distance(c, x, y, c.double_arg(2), c.double_arg(3), c.bool_arg(4),
                                 std::max(c.rank_of(0), c.rank_of(1))));
}

/// `value` where `cond`, else 0.
std::string where_else_zero(Converter& c, const std::string& cond, const std::string& value) {
  return c.op("Where", {cond, value, c.const_scalar(0.0, c.out_dtype())});
}

/// max(value, 0).
std::string relu_of(Converter& c, const std::string& value) { return c.op("Relu", {value}); }

/// target == `v` for the target argument `i`.
std::string target_is(Converter& c, size_t i, double v) {
  return c.op("Equal", {c.tensor(i), c.const_scalar(v, c.dtype_of(i))});
}

Value soft_margin_loss_rule(Converter& c) {
  // (x, y, reduction): log(1 + exp(-x y)).
  // ATen computes log1p(exp(-x y)), which is inf where exp overflows; Softplus stays finite.
  auto [x, y] = operands(c, 0, 1);
  const std::string z = c.op("Neg", {c.op("Mul", {x, y})});
  const std::string e = c.op("Exp", {z});
  std::string loss = c.op("Where", {c.op("IsInf", {e}), e, c.op("Softplus", {z})});
  return tensor_value(reduce_loss(c, loss, c.int_arg(2)));
}

Value hinge_embedding_loss_rule(Converter& c) {
  // (x, y, margin, reduction): max(margin - x, 0) where y != 1, plus x where y != -1.
  const c10::ScalarType t = c.out_dtype();
  std::string x = c.tensor(0);
  std::string margin = relu_of(c, c.op("Sub", {c.const_scalar(c.double_arg(2), t), x}));
  std::string loss = c.op("Add", {where_else_zero(c, c.op("Not", {target_is(c, 1, 1.0)}), margin),
                                  where_else_zero(c, c.op("Not", {target_is(c, 1, -1.0)}), x)});
  return tensor_value(reduce_loss(c, loss, c.int_arg(3)));
}

Value margin_ranking_loss_rule(Converter& c) {
  // (x1, x2, y, margin, reduction): max(-y (x1 - x2) + margin, 0).
  auto [x1, x2] = operands(c, 0, 1);
  std::string d = c.op("Mul", {c.op("Neg", {c.tensor(2)}), c.op("Sub", {x1, x2})});
  std::string loss = relu_of(c, c.op("Add", {d, c.const_scalar(c.double_arg(3), c.out_dtype())}));
  return tensor_value(reduce_loss(c, loss, c.int_arg(4)));
}

Value kl_div_rule(Converter& c) {
  // (x, t, reduction, log_target): exp(t) (t - x), or xlogy(t, t) - t x (0 where t is 0).
  auto [x, t] = operands(c, 0, 1);
  std::string loss;
  if (c.bool_arg(3)) {
    loss = c.op("Mul", {c.op("Exp", {t}), c.op("Sub", {t, x})});
  } else {
    std::string zero = c.const_scalar(0.0, c.out_dtype());
    std::string t_log_t =
        c.op("Where", {c.op("Equal", {t, zero}), zero, c.op("Mul", {t, c.op("Log", {t})})});
    loss = c.op("Sub", {t_log_t, c.op("Mul", {t, x})});
  }
  return tensor_value(reduce_loss(c, loss, c.int_arg(2)));
}

Value poisson_nll_loss_rule(Converter& c) {
  // (x, t, log_input, full, eps, reduction): exp(x) - t x, or x - t log(x + eps); with full,
  // plus t log t - t + log(2 pi t) / 2 where t > 1.
  const c10::ScalarType type = c.out_dtype();
  auto [x, t] = operands(c, 0, 1);
  std::string loss =
      c.bool_arg(2)
          ? c.op("Sub", {c.op("Exp", {x}), c.op("Mul", {t, x})})
          : c.op("Sub",
                 {x, c.op("Mul", {t, c.op("Log", {c.op("Add", {x, c.const_scalar(c.double_arg(4),
                                                                                 type)})})})});
  if (c.bool_arg(3)) {
    std::string stirling = c.op(
        "Add", {c.op("Sub", {c.op("Mul", {t, c.op("Log", {t})}), t}),
                c.op("Mul", {c.const_scalar(0.5, type),
                             c.op("Log", {c.op("Mul", {c.const_scalar(2 * M_PI, type), t})})})});
    std::string above_one = c.op("Greater", {t, c.const_scalar(1.0, type)});
    loss = c.op("Add", {loss, where_else_zero(c, above_one, stirling)});
  }
  return tensor_value(reduce_loss(c, loss, c.int_arg(5)));
}

Value cosine_embedding_loss_rule(Converter& c) {
  // (x1, x2, y, margin, reduction): cos = <x1, x2> / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12))
  // over y's rank; 1 - cos where y is 1, max(cos - margin, 0) where y is -1.
  const c10::ScalarType t = c.out_dtype();
  auto [x1, x2] = operands(c, 0, 1);
  const int64_t dim = c.rank_of(2);
  auto sum = [&](const std::string& v) {
    NodeProto* r = c.emit("ReduceSum", {v, c.const_ints({dim})});
    set_attr(r, "keepdims", int64_t{0});
    return r->output(0);
  };
  std::string eps = c.const_scalar(1e-12, t);
  std::string m1 = c.op("Add", {sum(c.op("Mul", {x1, x1})), eps});
  std::string m2 = c.op("Add", {sum(c.op("Mul", {x2, x2})), eps});
  std::string cos =
      c.op("Div", {sum(c.op("Mul", {x1, x2})), c.op("Sqrt", {c.op("Mul", {m1, m2})})});
  std::string pos = c.op("Sub", {c.const_scalar(1.0, t), cos});
  std::string neg = relu_of(c, c.op("Sub", {cos, c.const_scalar(c.double_arg(3), t)}));
  std::string loss = c.op("Add", {where_else_zero(c, target_is(c, 2, 1.0), pos),
                                  where_else_zero(c, target_is(c, 2, -1.0), neg)});
  return tensor_value(reduce_loss(c, loss, c.int_arg(4)));
}

Value triplet_margin_loss_rule(Converter& c) {
  // (anchor, positive, negative, margin, p, eps, swap, reduction):
  // max(margin + d(a, p) - d(a, n), 0), d(a, n) the smaller of it and d(p, n) with swap.
  const double p = c.double_arg(4), eps = c.double_arg(5);
  const int64_t rank = std::max({c.rank_of(0), c.rank_of(1), c.rank_of(2)});
  std::string a = c.tensor(0), pos = c.tensor(1), neg = c.tensor(2);
  std::string d_pos = p_distance(c, a, pos, p, eps, false, rank);
  std::string d_neg = p_distance(c, a, neg, p, eps, false, rank);
  if (c.bool_arg(6)) d_neg = c.op("Min", {d_neg, p_distance(c, pos, neg, p, eps, false, rank)});
  std::string loss = relu_of(
      c,
      c.op("Sub", {c.op("Add", {c.const_scalar(c.double_arg(3), c.out_dtype()), d_pos}), d_neg}));
  return tensor_value(reduce_loss(c, loss, c.int_arg(7)));
}

}  // namespace

void add_loss_rules(RuleTable& table) {
  const RuleList entries = {
      // Losses.
      {"mse_loss", {"Sub, Mul, ReduceMean/ReduceSum", mse_loss_rule}},
      {"l1_loss", {"Sub, Abs, ReduceMean/ReduceSum", l1_loss_rule}},
      {"smooth_l1_loss",
       {"Sub, Abs, Less, Where, ...", [](Converter& c) { return smooth_l1_rule(c, false); }}},
      {"huber_loss",
       {"Sub, Abs, Less, Where, ...", [](Converter& c) { return smooth_l1_rule(c, true); }}},
      {"binary_cross_entropy", {"Log, Max, Mul, Add, Neg, ReduceMean/ReduceSum", bce_rule}},
      {"binary_cross_entropy_with_logits",
       {"Softplus, Neg, Mul, Add, ReduceMean/ReduceSum", bce_logits_rule}},
      {"soft_margin_loss", {"Mul, Neg, Softplus, ReduceMean/ReduceSum", soft_margin_loss_rule}},
      {"hinge_embedding_loss",
       {"Sub, Relu, Equal, Not, Where, Add, ReduceMean/ReduceSum", hinge_embedding_loss_rule}},
      {"margin_ranking_loss",
       {"Sub, Neg, Mul, Add, Relu, ReduceMean/ReduceSum", margin_ranking_loss_rule}},
      {"kl_div",
       {"Log, Mul, Equal, Where, Sub (Exp with log_target), ReduceMean/ReduceSum", kl_div_rule}},
      {"poisson_nll_loss",
       {"Exp or Log, Mul, Sub (full: Greater, Where, Add), ReduceMean/ReduceSum",
        poisson_nll_loss_rule}},
      {"cosine_embedding_loss",
       {"Mul, ReduceSum, Add, Sqrt, Div, Sub, Relu, Equal, Where, ReduceMean/ReduceSum",
        cosine_embedding_loss_rule}},
      {"triplet_margin_loss",
       {"Sub, Add, ReduceL2/ReduceL1, Min (swap), Relu, ReduceMean/ReduceSum",
        triplet_margin_loss_rule}},
      {"nll_loss", {"NegativeLogLikelihoodLoss", nll_loss_rule}},
      {"nll_loss_nd", {"NegativeLogLikelihoodLoss", nll_loss_rule}},
      {"cross_entropy_loss",
       {"SoftmaxCrossEntropyLoss (class indices, no label smoothing)", cross_entropy_rule}},
      // Distances.
      {"cosine_similarity", {"Mul, ReduceSum, Max, Sqrt, Div", cosine_similarity_rule}},
      {"pairwise_distance", {"Sub, Add, ReduceL2/ReduceL1", pairwise_distance_rule}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
