// ONNX rules of reductions: sum, mean, prod, logsumexp, max and min (NaN as ATen treats it),
// argmax and argmin, var and std, all and any; and cumsum.

#include <ATen/core/function_schema.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
namespace {

Value reduce_rule(Converter& c, const std::string& op, bool axes_as_input);

// ---- NaN as ATen treats it -------------------------------------------------------------------
// ATen's max and min (and amax, amin, max.dim, min.dim) give NaN for a slice holding one, and
// argmax and argmin the index of its first NaN; ONNX leaves NaN to the runtime, and ONNX Runtime
// skips it. These wrap the plain reductions so that a slice with a NaN gets ATen's answer.

/// Whether the slices of `x` along `axes` (every axis when empty) hold a NaN, as bool, with the
/// reduced axes kept when `keep`.
std::string slice_has_nan(Converter& c, const std::string& x, const std::vector<int64_t>& axes,
                          bool keep) {
  NodeProto* any = c.emit("ReduceMax", {c.cast(c.op("IsNaN", {x}), c10::ScalarType::Float)});
  if (!axes.empty()) set_attr(any, "axes", axes);
  set_attr(any, "keepdims", int64_t{keep});
  return c.cast(any->output(0), c10::ScalarType::Bool);
}

/// `reduced` (a ReduceMax or ReduceMin of `x`, of dtype `t`, over `axes`), NaN where the slice
/// holds one.
std::string nan_if_slice_has_nan(Converter& c, const std::string& x, const std::string& reduced,
                                 c10::ScalarType t, const std::vector<int64_t>& axes, bool keep) {
  if (!at::isFloatingType(t)) return reduced;
  return c.op("Where", {slice_has_nan(c, x, axes, keep),
                        c.const_scalar(std::numeric_limits<double>::quiet_NaN(), t), reduced});
}

/// ArgMax or ArgMin of `x` along `axis`, the first NaN's index where the slice holds one.
std::string arg_with_nan(Converter& c, const std::string& op, const std::string& x,
                         c10::ScalarType t, int64_t axis, bool keep) {
  NodeProto* plain = c.emit(op, {x});
  set_attr(plain, "axis", axis);
  set_attr(plain, "keepdims", int64_t{keep});
  if (!at::isFloatingType(t)) return plain->output(0);
  NodeProto* first_nan = c.emit("ArgMax", {c.cast(c.op("IsNaN", {x}), c10::ScalarType::Float)});
  set_attr(first_nan, "axis", axis);
  set_attr(first_nan, "keepdims", int64_t{keep});
  return c.op("Where", {slice_has_nan(c, x, {axis}, keep), first_nan->output(0), plain->output(0)});
}

/// mean as ReduceMean, or, over a dimension of no elements, as ATen has it: the sum (0)
/// divided by the count (0), NaN.
Value mean_rule(Converter& c) {
  const std::vector<int64_t>& shape = c.shape_of(0);
  std::vector<int64_t> dims;
  if (c.arg_count() > 1 && (c.arg(1).is<ArgumentList>() || c.arg(1).is<int64_t>())) {
    for (int64_t d : c.ints_arg(1)) dims.push_back(c.norm_dim(d, c.rank_of(0)));
  }
  if (dims.empty()) {
    for (size_t d = 0; d < shape.size(); ++d) dims.push_back(static_cast<int64_t>(d));
  }
  const bool empty = std::any_of(dims.begin(), dims.end(), [&](int64_t d) {
    return shape[static_cast<size_t>(d)] == 0 && !c.follows_batch(0, d);
  });
  if (!empty) return reduce_rule(c, "ReduceMean", false);
  const std::string sum = reduce_rule(c, "ReduceSum", true).name;
  return tensor_value(c.op("Div", {sum, c.const_scalar(0.0, c.out_dtype())}));
}

Value reduce_rule(Converter& c, const std::string& op, bool axes_as_input) {
  // (x, dims, keepdim, dtype) or the whole tensor (x, dtype).
  const int64_t rank = c.rank_of(0);
  std::string x = c.tensor(0);
  const c10::ScalarType t = c.out_dtype();
  x = c.cast_if(x, c.dtype_of(0), t);
  std::vector<int64_t> axes;
  bool keep = false;
  const bool has_dims =
      c.arg_count() > 1 && (c.arg(1).is<ArgumentList>() || c.arg(1).is<int64_t>());
  if (has_dims) {
    for (int64_t d : c.ints_arg(1)) axes.push_back(c.norm_dim(d, rank));
    keep = c.arg_count() > 2 && c.bool_arg(2);
  }
  NodeProto* r;
  if (axes.empty()) {
    r = c.emit(op, {x});
  } else if (axes_as_input) {
    r = c.emit(op, {x, c.const_ints(axes)});
  } else {
    r = c.emit(op, {x});
    set_attr(r, "axes", axes);
  }
  set_attr(r, "keepdims", int64_t{keep});
  if (op == "ReduceMax" || op == "ReduceMin") {
    return tensor_value(nan_if_slice_has_nan(c, x, r->output(0), t, axes, keep));
  }
  return tensor_value(r->output(0));
}

/// max.dim / min.dim: (values, indices).
Value max_dim_rule(Converter& c, bool is_max) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0));
  const int64_t keep = c.bool_arg(2);
  std::string x = c.tensor(0);
  const c10::ScalarType t = c.dtype_of(0);
  NodeProto* values = c.emit(is_max ? "ReduceMax" : "ReduceMin", {x});
  set_attr(values, "axes", std::vector<int64_t>{dim});
  set_attr(values, "keepdims", keep);
  return {"",
          {tensor_value(nan_if_slice_has_nan(c, x, values->output(0), t, {dim}, keep != 0)),
           tensor_value(arg_with_nan(c, is_max ? "ArgMax" : "ArgMin", x, t, dim, keep != 0))}};
}

Value arg_rule(Converter& c, const std::string& op) {
  if (c.is_none(1)) c.refuse("argmax/argmin over the whole tensor");
  return tensor_value(arg_with_nan(c, op, c.tensor(0), c.dtype_of(0),
                                   c.norm_dim(c.int_arg(1), c.rank_of(0)), c.bool_arg(2)));
}

/// var/std with a correction: sum((x - mean)^2) / (N - correction), over `dims`.
/// var.correction: (x, dim, correction, keepdim); var.dim: (x, dim, unbiased, keepdim);
/// plain var: (x, unbiased), over every dimension.
Value variance_rule(Converter& c, bool is_std) {
  const int64_t rank = c.rank_of(0);
  const auto& shape = c.shape_of(0);
  const std::string& overload = c.node().target().schema().overload_name();
  const bool every_dim = overload.empty() || c.is_none(1);
  std::vector<int64_t> axes;
  if (every_dim) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  } else {
    for (int64_t d : c.ints_arg(1)) axes.push_back(c.norm_dim(d, rank));
  }
  double correction = 1;
  bool keep = false;
  if (overload.empty()) {
    correction = c.bool_arg(1) ? 1.0 : 0.0;
  } else {
    if (overload == "correction") {
      correction = c.is_none(2) ? 1.0 : c.double_arg(2);
    } else {
      correction = c.bool_arg(2) ? 1.0 : 0.0;
    }
    keep = c.bool_arg(3);
  }
  int64_t count = 1;
  for (int64_t d : axes) {
    if (c.follows_batch(0, d)) c.refuse("a variance over a dimension that follows the batch");
    count *= shape[static_cast<size_t>(d)];
  }
  const c10::ScalarType t = c.out_dtype();
  std::string x = c.tensor(0);
  NodeProto* mean = c.emit("ReduceMean", {x});
  set_attr(mean, "axes", axes);
  set_attr(mean, "keepdims", int64_t{1});
  std::string diff = c.op("Sub", {x, mean->output(0)});
  NodeProto* sum = c.emit("ReduceSum", {c.op("Mul", {diff, diff}), c.const_ints(axes)});
  set_attr(sum, "keepdims", int64_t{keep});
  std::string var =
      c.op("Div", {sum->output(0), c.const_scalar(static_cast<double>(count) - correction, t)});
  return tensor_value(is_std ? c.op("Sqrt", {var}) : var);
}

Value cumsum_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0));
  std::string x = c.cast_if(c.tensor(0), c.dtype_of(0), c.out_dtype());
  return tensor_value(c.op("CumSum", {x, c.const_scalar(static_cast<double>(dim), c10::kLong)}));
}

/// all/any: over everything, or one dimension (all.dim(x, dim, keepdim)).
/// all and any as counts, which an empty reduction has too (ReduceMin and ReduceMax of nothing
/// are not ATen's True and False): all is "no element is false", any "some element is true".
Value all_any_rule(Converter& c, bool all) {
  std::string x = c.tensor(0);
  std::string truth = c.dtype_of(0) == c10::kBool
                          ? x
                          : c.op("Not", {c.op("Equal", {x, c.const_scalar(0, c.dtype_of(0))})});
  if (all) truth = c.op("Not", {truth});
  NodeProto* r;
  if (c.arg_count() > 1 && c.arg(1).is<int64_t>()) {
    r = c.emit("ReduceSum",
               {c.cast(truth, c10::kLong), c.const_ints({c.norm_dim(c.int_arg(1), c.rank_of(0))})});
    set_attr(r, "keepdims", int64_t{c.bool_arg(2)});
  } else {
    r = c.emit("ReduceSum", {c.cast(truth, c10::kLong)});
    set_attr(r, "keepdims", int64_t{0});
  }
  const std::string zero = c.const_scalar(0, c10::kLong);
  return tensor_value(all ? c.op("Equal", {r->output(0), zero})
                          : c.op("Greater", {r->output(0), zero}));
}

}  // namespace

void add_reduction_rules(RuleTable& table) {
  const RuleList entries = {
      {"sum", {"ReduceSum", [](Converter& c) { return reduce_rule(c, "ReduceSum", true); }}},
      {"mean", {"ReduceMean (ReduceSum over 0, NaN, over a dimension of no elements)", mean_rule}},
      {"amax", {"ReduceMax", [](Converter& c) { return reduce_rule(c, "ReduceMax", false); }}},
      {"amin", {"ReduceMin", [](Converter& c) { return reduce_rule(c, "ReduceMin", false); }}},
      {"prod", {"ReduceProd", [](Converter& c) { return reduce_rule(c, "ReduceProd", false); }}},
      {"logsumexp",
       {"ReduceLogSumExp", [](Converter& c) { return reduce_rule(c, "ReduceLogSumExp", false); }}},
      {"max.dim", {"ReduceMax, ArgMax", [](Converter& c) { return max_dim_rule(c, true); }}},
      {"min.dim", {"ReduceMin, ArgMin", [](Converter& c) { return max_dim_rule(c, false); }}},
      {"max.other", {"Max", binary("Max")}},
      {"min.other", {"Min", binary("Min")}},
      {"argmax", {"ArgMax", [](Converter& c) { return arg_rule(c, "ArgMax"); }}},
      {"argmin", {"ArgMin", [](Converter& c) { return arg_rule(c, "ArgMin"); }}},
      {"var",
       {"ReduceMean, Sub, Mul, ReduceSum, Div",
        [](Converter& c) { return variance_rule(c, false); }}},
      {"std",
       {"ReduceMean, Sub, Mul, ReduceSum, Div, Sqrt",
        [](Converter& c) { return variance_rule(c, true); }}},
      // all, any and cumsum.
      {"all",
       {"Equal, Not, Cast, ReduceSum (the false counted)",
        [](Converter& c) { return all_any_rule(c, true); }}},
      {"any",
       {"Equal, Not, Cast, ReduceSum (the true counted)",
        [](Converter& c) { return all_any_rule(c, false); }}},
      {"cumsum", {"CumSum", cumsum_rule}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
