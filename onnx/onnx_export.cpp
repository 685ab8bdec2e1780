// The public ONNX export (onnx_export.h) on top of the converter (converter.h); and five
// families of ONNX rules (rules/rules.h): reductions, normalisation and dropout, convolution and
// pooling, the recurrent layers, the losses.

#include "tdfx/onnx/onnx_export.h"

#include <ATen/core/function_schema.h>
#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tdfx/core/file_io.h"
#include "tdfx/onnx/converter.h"
#include "tdfx/onnx/rules/rules.h"

namespace tdfx {
namespace onnx_detail {

// --------------------------------------------------------------------------------------
// ONNX rules of reductions: sum, mean, prod, logsumexp, max and min (NaN as ATen treats it),
// argmax and argmin, var and std, all and any; and cumsum.

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

// --------------------------------------------------------------------------------------
// ONNX rules of normalisation (layer, batch, instance and group norm) and of dropout, which
// is the identity in eval mode.

namespace {

// Eval mode, or p = 0 in training mode (ATen returns the input then, drawing nothing), is the
// identity; any other training-mode dropout draws a mask ONNX Runtime would not draw.
Value dropout_rule(Converter& c) {
  if (c.bool_arg(2) && c.double_arg(1) != 0.0) {
    c.refuse("dropout with p > 0 in training mode; export the pipeline in eval mode");
  }
  return tensor_value(c.op("Identity", {c.tensor(0)}));
}

Value layer_norm_rule(Converter& c) {
  // layer_norm(x, normalized_shape, weight, bias, eps, cudnn_enable).
  const int64_t axis = -static_cast<int64_t>(c.ints_arg(1).size());
  const std::vector<int64_t> normalized = c.ints_arg(1);
  std::vector<std::string> inputs{
      c.tensor(0), c.is_none(2) ? c.filled(normalized, 1.0, c.out_dtype()) : c.tensor(2)};
  if (!c.is_none(3)) inputs.push_back(c.tensor(3));
  NodeProto* ln = c.emit("LayerNormalization", inputs);
  set_attr(ln, "axis", axis);
  set_attr(ln, "epsilon", c.double_arg(4));
  return tensor_value(ln->output(0));
}

Value batch_norm_rule(Converter& c) {
  // batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, cudnn).
  if (c.bool_arg(5)) c.refuse("batch norm in training mode; export the pipeline in eval mode");
  if (c.is_none(3) || c.is_none(4)) c.refuse("batch norm without running statistics");
  const int64_t channels = c.shape_of(0).size() > 1 ? c.shape_of(0)[1] : 1;
  auto or_fill = [&](size_t i, double fill) {
    return c.is_none(i) ? c.filled({channels}, fill, c.out_dtype()) : c.tensor(i);
  };
  NodeProto* bn = c.emit("BatchNormalization",
                         {c.tensor(0), or_fill(1, 1.0), or_fill(2, 0.0), c.tensor(3), c.tensor(4)});
  set_attr(bn, "epsilon", c.double_arg(7));
  set_attr(bn, "momentum", 1.0 - c.double_arg(6));
  return tensor_value(bn->output(0));
}

/// Ones (or zeros) of `channels` elements of the output's dtype, for a missing weight or bias.
std::string filled_vector(Converter& c, int64_t channels, double value) {
  return c.filled({channels}, value, c.out_dtype());
}

Value instance_norm_rule(Converter& c) {
  // instance_norm(x, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
  // cudnn_enabled).
  if (!c.bool_arg(5)) c.refuse("instance norm by running statistics");
  const int64_t channels = c.shape_of(0).at(1);
  std::string w = c.is_none(1) ? filled_vector(c, channels, 1.0) : c.tensor(1);
  std::string b = c.is_none(2) ? filled_vector(c, channels, 0.0) : c.tensor(2);
  NodeProto* n = c.emit("InstanceNormalization", {c.tensor(0), w, b});
  set_attr(n, "epsilon", c.double_arg(7));
  return tensor_value(n->output(0));
}

Value group_norm_rule(Converter& c) {
  // group_norm(x, groups, weight, bias, eps, cudnn): x as [N, G, -1] normalised per group
  // (InstanceNormalization), back to x's shape, then the per-channel weight and bias.
  const int64_t groups = c.int_arg(1);
  const int64_t rank = c.rank_of(0);
  std::string x = c.tensor(0);
  std::string grouped = c.reshape(x, c.const_ints({0, groups, -1}));
  NodeProto* n = c.emit("InstanceNormalization",
                        {grouped, filled_vector(c, groups, 1.0), filled_vector(c, groups, 0.0)});
  set_attr(n, "epsilon", c.double_arg(4));
  std::string y = c.reshape(n->output(0), c.shape(x));
  std::vector<int64_t> axes;
  for (int64_t d = 1; d < rank - 1; ++d) axes.push_back(d);
  auto per_channel = [&](size_t i) {
    std::string v = c.tensor(i);
    return axes.empty() ? v : c.op("Unsqueeze", {v, c.const_ints(axes)});
  };
  if (!c.is_none(2)) y = c.op("Mul", {y, per_channel(2)});
  if (!c.is_none(3)) y = c.op("Add", {y, per_channel(3)});
  return tensor_value(y);
}

}  // namespace

void add_normalisation_rules(RuleTable& table) {
  const RuleList entries = {
      // Normalisation.
      {"layer_norm", {"LayerNormalization", layer_norm_rule}},
      {"batch_norm", {"BatchNormalization (eval mode; training mode is refused)", batch_norm_rule}},
      {"instance_norm", {"InstanceNormalization (input statistics)", instance_norm_rule}},
      {"group_norm", {"Reshape, InstanceNormalization, Reshape, Mul, Add", group_norm_rule}},
      // Dropout.
      {"dropout", {"Identity (eval mode, or p = 0; training mode is refused)", dropout_rule}},
      {"feature_dropout", {"Identity (eval mode, or p = 0)", dropout_rule}},
      {"alpha_dropout", {"Identity (eval mode, or p = 0)", dropout_rule}},
      {"feature_alpha_dropout", {"Identity (eval mode, or p = 0)", dropout_rule}},
  };
  add_rules(table, entries);
}

// --------------------------------------------------------------------------------------
// ONNX rules of convolution, pooling (max, average, adaptive average) and upsampling.

namespace {

/// A convolution's or pool's per-dimension ints: one value stands for every spatial dimension.
std::vector<int64_t> per_spatial(std::vector<int64_t> v, int64_t spatial) {
  if (v.size() == 1 && spatial > 1) v.assign(static_cast<size_t>(spatial), v[0]);
  return v;
}

/// ONNX's pads (every begin, then every end) for symmetric per-dimension padding.
std::vector<int64_t> both_ends(std::vector<int64_t> pads) {
  pads.insert(pads.end(), pads.begin(), pads.end());
  return pads;
}

Value conv_rule(Converter& c) {
  // _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups, ...),
  // convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups),
  // conv{1,2,3}d(x, w, b, stride, padding, dilation, groups).
  const std::string& name = c.node().target().op_name();
  const bool generic = name == "_convolution" || name == "convolution";
  const int64_t spatial = c.rank_of(1) - 2;
  const bool transposed = generic && c.bool_arg(6);
  std::vector<std::string> inputs{c.tensor(0), c.tensor(1)};
  if (!c.is_none(2)) inputs.push_back(c.tensor(2));
  NodeProto* conv = c.emit(transposed ? "ConvTranspose" : "Conv", inputs);
  set_attr(conv, "strides", per_spatial(c.ints_arg(3), spatial));
  if (c.arg(4).is<std::string>()) {
    const std::string mode = c.string_arg(4);
    if (mode == "same") {
      set_attr(conv, "auto_pad", std::string("SAME_UPPER"));
    } else if (mode != "valid") {
      c.refuse("padding '" + mode + "'");
    }
  } else {
    set_attr(conv, "pads", both_ends(per_spatial(c.ints_arg(4), spatial)));
  }
  set_attr(conv, "dilations", per_spatial(c.ints_arg(5), spatial));
  set_attr(conv, "group", generic ? c.int_arg(8) : c.int_arg(6));
  if (transposed) set_attr(conv, "output_padding", per_spatial(c.ints_arg(7), spatial));
  return tensor_value(conv->output(0));
}

Value max_pool_rule(Converter& c) {
  // max_pool{1,2,3}d(x, kernel, stride, padding, dilation, ceil_mode).
  const int64_t spatial = c.rank_of(0) - 2;
  std::vector<int64_t> kernel = per_spatial(c.ints_arg(1), spatial);
  std::vector<int64_t> stride =
      c.ints_arg(2).empty() ? kernel : per_spatial(c.ints_arg(2), spatial);
  const std::vector<int64_t> pads = both_ends(per_spatial(c.ints_arg(3), spatial));
  NodeProto* pool = c.emit("MaxPool", {c.tensor(0)});
  set_attr(pool, "kernel_shape", kernel);
  set_attr(pool, "strides", stride);
  set_attr(pool, "pads", pads);
  set_attr(pool, "dilations", per_spatial(c.ints_arg(4), spatial));
  set_attr(pool, "ceil_mode", int64_t{c.bool_arg(5)});
  return tensor_value(pool->output(0));
}

Value avg_pool_rule(Converter& c) {
  // avg_pool{1,2,3}d(x, kernel, stride, padding, ceil_mode, count_include_pad[, divisor]).
  const int64_t spatial = c.rank_of(0) - 2;
  if (c.arg_count() > 6 && !c.is_none(6)) c.refuse("a divisor_override");
  std::vector<int64_t> kernel = per_spatial(c.ints_arg(1), spatial);
  std::vector<int64_t> stride =
      c.ints_arg(2).empty() ? kernel : per_spatial(c.ints_arg(2), spatial);
  const std::vector<int64_t> padding = per_spatial(c.ints_arg(3), spatial);
  const bool ceil_mode = c.bool_arg(4);
  bool count_include_pad = c.bool_arg(5);
  // With ceil_mode the last window may hang past the padded input. ATen then divides by the
  // part of the window inside the padded input; ONNX by the whole kernel when it counts the
  // padding, by the part inside the input when it does not. Without padding those agree once
  // ONNX leaves the padding out; with padding they cannot.
  const auto& shape = c.shape_of(0);
  bool overhangs = false, padded = false;
  for (int64_t d = 0; ceil_mode && d < spatial; ++d) {
    const auto i = static_cast<size_t>(d);
    const int64_t in = shape[shape.size() - static_cast<size_t>(spatial) + i];
    const int64_t span = in + 2 * padding[i] - kernel[i];
    int64_t out = (span + stride[i] - 1) / stride[i] + 1;
    if ((out - 1) * stride[i] >= in + padding[i]) --out;  // ATen's rule: start inside
    overhangs = overhangs || (out - 1) * stride[i] + kernel[i] > in + 2 * padding[i];
    padded = padded || padding[i] != 0;
  }
  if (overhangs && count_include_pad) {
    if (padded) {
      c.refuse(
          "average pooling with ceil_mode whose last window passes the padding, counting the "
          "padding: ONNX divides that window by the whole kernel");
    }
    count_include_pad = false;
  }
  NodeProto* pool = c.emit("AveragePool", {c.tensor(0)});
  set_attr(pool, "kernel_shape", kernel);
  set_attr(pool, "strides", stride);
  set_attr(pool, "pads", both_ends(padding));
  set_attr(pool, "ceil_mode", int64_t{ceil_mode});
  set_attr(pool, "count_include_pad", int64_t{count_include_pad});
  return tensor_value(pool->output(0));
}

Value adaptive_pool_rule(Converter& c, bool is_max) {
  // Output sizes that divide the input: a pool of kernel = stride = input / output.
  const auto& shape = c.shape_of(0);
  const std::vector<int64_t> out = c.ints_arg(1);
  const size_t first = shape.size() - out.size();
  bool global = true;
  std::vector<int64_t> kernel;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t in = shape[first + i];
    if (out[i] <= 0 || in % out[i] != 0) {
      c.refuse(fmt::format("adaptive pooling from {} to {}, which does not divide it", in, out[i]));
    }
    global = global && out[i] == 1;
    kernel.push_back(in / out[i]);
  }
  if (global)
    return tensor_value(c.op(is_max ? "GlobalMaxPool" : "GlobalAveragePool", {c.tensor(0)}));
  NodeProto* pool = c.emit(is_max ? "MaxPool" : "AveragePool", {c.tensor(0)});
  set_attr(pool, "kernel_shape", kernel);
  set_attr(pool, "strides", kernel);
  return tensor_value(pool->output(0));
}

/// upsample_{nearest,bilinear}2d(x, output_size, [align_corners,] scales_h, scales_w) and the
/// `.vec` overloads (x, output_size, [align_corners,] scale_factors). With the scales given,
/// ATen maps output to input coordinates by them, as Resize does by its `scales`; without,
/// by the sizes' ratio, as Resize does for `sizes` (the batch and channels taken from x, so
/// that the batch may vary).
Value upsample_rule(Converter& c, bool bilinear) {
  const auto& in = c.shape_of(0);
  const TensorMeta& out = c.node().meta().tensor;
  if (!out.shape || out.shape->size() != in.size()) c.refuse("an upsampling of unknown size");
  const size_t spatial = in.size() - 2;
  const size_t first_scale = bilinear ? 3 : 2;
  std::vector<double> given;
  if (c.arg_count() > first_scale && c.arg(first_scale).is<ArgumentList>()) {
    for (const Argument& a : c.arg(first_scale).as<ArgumentList>().items) {
      if (!a.is<double>()) c.refuse("scale factors that are not constant numbers");
      given.push_back(a.as<double>());
    }
  } else {
    for (size_t d = 0; d < spatial; ++d) {
      if (c.is_none(first_scale + d)) break;
      given.push_back(c.double_arg(first_scale + d));
    }
  }
  NodeProto* r = nullptr;
  if (given.size() == spatial) {
    std::vector<float> scales{1.0f, 1.0f};
    for (double g : given) scales.push_back(static_cast<float>(g));
    r = c.emit("Resize", {c.tensor(0), "", c.const_tensor(at::tensor(scales))});
  } else {
    const std::string x = c.tensor(0);
    std::vector<int64_t> sizes(out.shape->begin() + 2, out.shape->end());
    NodeProto* concat = c.emit("Concat", {c.dim_size(x, 0), c.dim_size(x, 1), c.const_ints(sizes)});
    set_attr(concat, "axis", int64_t{0});
    r = c.emit("Resize", {x, "", "", concat->output(0)});
  }
  if (bilinear) {
    set_attr(r, "mode", std::string("linear"));
    set_attr(r, "coordinate_transformation_mode",
             std::string(c.bool_arg(2) ? "align_corners" : "pytorch_half_pixel"));
  } else {
    set_attr(r, "mode", std::string("nearest"));
    set_attr(r, "coordinate_transformation_mode", std::string("asymmetric"));
    set_attr(r, "nearest_mode", std::string("floor"));
  }
  return tensor_value(r->output(0));
}

}  // namespace

void add_convolution_rules(RuleTable& table) {
  const RuleList entries = {
      // Convolution and pooling.
      {"_convolution", {"Conv, ConvTranspose", conv_rule}},
      {"convolution", {"Conv, ConvTranspose", conv_rule}},
      {"conv1d", {"Conv", conv_rule}},
      {"conv2d", {"Conv", conv_rule}},
      {"conv3d", {"Conv", conv_rule}},
      {"max_pool1d", {"MaxPool", max_pool_rule}},
      {"max_pool2d", {"MaxPool", max_pool_rule}},
      {"max_pool3d", {"MaxPool", max_pool_rule}},
      {"avg_pool1d", {"AveragePool", avg_pool_rule}},
      {"avg_pool2d", {"AveragePool", avg_pool_rule}},
      {"avg_pool3d", {"AveragePool", avg_pool_rule}},
      {"adaptive_avg_pool1d",
       {"GlobalAveragePool, AveragePool (sizes that divide)",
        [](Converter& c) { return adaptive_pool_rule(c, false); }}},
      {"adaptive_avg_pool2d",
       {"GlobalAveragePool, AveragePool (sizes that divide)",
        [](Converter& c) { return adaptive_pool_rule(c, false); }}},
      {"adaptive_avg_pool3d",
       {"GlobalAveragePool, AveragePool (sizes that divide)",
        [](Converter& c) { return adaptive_pool_rule(c, false); }}},
      // Upsampling.
      {"upsample_nearest2d",
       {"Resize (nearest, asymmetric, floor)",
        [](Converter& c) { return upsample_rule(c, false); }}},
      {"upsample_bilinear2d",
       {"Resize (linear)", [](Converter& c) { return upsample_rule(c, true); }}},
  };
  add_rules(table, entries);
}

// --------------------------------------------------------------------------------------
// ONNX rules of the recurrent layers: LSTM, GRU and RNN, each layer one ONNX node.

namespace {

// --- recurrent layers -------------------------------------------------------------------

/// The ONNX gate order of a torch gate-stacked weight or bias, as chunk indices.
std::string reorder_gates(Converter& c, const std::string& w, int64_t hidden,
                          const std::vector<int64_t>& order) {
  const int64_t gates = static_cast<int64_t>(order.size());
  NodeProto* split =
      c.emit("Split", {w, c.const_ints(std::vector<int64_t>(static_cast<size_t>(gates), hidden))},
             static_cast<int>(gates));
  set_attr(split, "axis", int64_t{0});
  std::vector<std::string> parts;
  for (int64_t g : order) parts.push_back(split->output(static_cast<int>(g)));
  NodeProto* cat = c.emit("Concat", parts);
  set_attr(cat, "axis", int64_t{0});
  return cat->output(0);
}

/// lstm.input / gru.input / rnn_{tanh,relu}.input: each layer an ONNX LSTM/GRU/RNN.
/// Torch's gates are (i, f, g, o) for LSTM and (r, z, n) for GRU; ONNX's (i, o, f, c) and
/// (z, r, h). The state tensors are [layers * directions, batch, hidden] in both.
Value recurrent_rule(Converter& c, const std::string& kind) {
  const bool lstm = kind == "LSTM";
  // lstm(input, hx[], params[], has_biases, num_layers, dropout, train, bidirectional,
  // batch_first); gru/rnn(input, hx, params[], has_biases, num_layers, dropout, train,
  // bidirectional, batch_first).
  std::string x = c.tensor(0);
  std::vector<std::string> hx = lstm ? c.tensors(1) : std::vector<std::string>{c.tensor(1)};
  std::vector<std::string> params = c.tensors(2);
  const bool has_biases = c.bool_arg(3);
  const int64_t layers = c.int_arg(4);
  const bool train = c.bool_arg(6);
  const bool bidirectional = c.bool_arg(7);
  const bool batch_first = c.bool_arg(8);
  if (train && c.double_arg(5) != 0.0 && layers > 1)
    c.refuse("dropout between layers in training mode");
  const int64_t dirs = bidirectional ? 2 : 1;
  const size_t per_dir = has_biases ? 4 : 2;
  if (params.size() != per_dir * static_cast<size_t>(dirs * layers)) {
    c.refuse("a recurrent layer with projections or an unexpected weight list");
  }
  const int64_t gates = lstm ? 4 : (kind == "GRU" ? 3 : 1);
  const Node* w0 =
      c.arg(2).is<ArgumentList>() ? c.arg(2).as<ArgumentList>().items[0].node() : nullptr;
  if (!w0 || !w0->meta().tensor.shape) c.refuse("a recurrent weight of unknown shape");
  const int64_t hidden = (*w0->meta().tensor.shape)[0] / gates;
  const std::vector<int64_t> order =
      lstm ? std::vector<int64_t>{0, 3, 1, 2}
           : (gates == 3 ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0});
  if (batch_first) {
    NodeProto* t = c.emit("Transpose", {x});
    set_attr(t, "perm", std::vector<int64_t>{1, 0, 2});
    x = t->output(0);
  }
  std::vector<std::string> h_out, c_out;
  for (int64_t layer = 0; layer < layers; ++layer) {
    std::vector<std::string> w, r, b;
    for (int64_t d = 0; d < dirs; ++d) {
      const size_t base = per_dir * static_cast<size_t>(layer * dirs + d);
      auto gated = [&](const std::string& v) {
        return c.op("Unsqueeze", {reorder_gates(c, v, hidden, order), c.const_ints({0})});
      };
      w.push_back(gated(params[base]));
      r.push_back(gated(params[base + 1]));
      if (has_biases) {
        NodeProto* cat = c.emit("Concat", {reorder_gates(c, params[base + 2], hidden, order),
                                           reorder_gates(c, params[base + 3], hidden, order)});
        set_attr(cat, "axis", int64_t{0});
        b.push_back(c.op("Unsqueeze", {cat->output(0), c.const_ints({0})}));
      }
    }
    auto stack = [&](const std::vector<std::string>& parts) {
      if (parts.size() == 1) return parts[0];
      NodeProto* cat = c.emit("Concat", parts);
      set_attr(cat, "axis", int64_t{0});
      return cat->output(0);
    };
    auto state_slice = [&](const std::string& s) {
      return c.op("Slice", {s, c.const_ints({layer * dirs}), c.const_ints({(layer + 1) * dirs}),
                            c.const_ints({0})});
    };
    std::vector<std::string> inputs{x,  stack(w),          stack(r), has_biases ? stack(b) : "",
                                    "", state_slice(hx[0])};
    if (lstm) inputs.push_back(state_slice(hx[1]));
    NodeProto* cell = c.emit(kind, inputs, lstm ? 3 : 2);
    set_attr(cell, "hidden_size", hidden);
    if (bidirectional) set_attr(cell, "direction", std::string("bidirectional"));
    if (kind == "GRU") set_attr(cell, "linear_before_reset", int64_t{1});
    if (kind == "RNN_RELU") {
      cell->set_op_type("RNN");
      set_attr(cell, "activations", std::vector<std::string>(static_cast<size_t>(dirs), "Relu"));
    }
    // Y [T, dirs, B, H] → [T, B, dirs * H].
    NodeProto* t = c.emit("Transpose", {cell->output(0)});
    set_attr(t, "perm", std::vector<int64_t>{0, 2, 1, 3});
    x = c.op("Reshape", {t->output(0), c.const_ints({0, 0, -1})});
    h_out.push_back(cell->output(1));
    if (lstm) c_out.push_back(cell->output(2));
  }
  if (batch_first) {
    NodeProto* t = c.emit("Transpose", {x});
    set_attr(t, "perm", std::vector<int64_t>{1, 0, 2});
    x = t->output(0);
  }
  auto stack_states = [&](const std::vector<std::string>& parts) {
    if (parts.size() == 1) return c.op("Identity", {parts[0]});
    NodeProto* cat = c.emit("Concat", parts);
    set_attr(cat, "axis", int64_t{0});
    return cat->output(0);
  };
  Value out{"", {tensor_value(x), tensor_value(stack_states(h_out))}};
  if (lstm) out.items.push_back(tensor_value(stack_states(c_out)));
  return out;
}

}  // namespace

void add_recurrent_rules(RuleTable& table) {
  const RuleList entries = {
      {"lstm.input",
       {"LSTM per layer (gates reordered by Split, Concat)",
        [](Converter& c) { return recurrent_rule(c, "LSTM"); }}},
      {"gru.input",
       {"GRU per layer (gates reordered by Split, Concat)",
        [](Converter& c) { return recurrent_rule(c, "GRU"); }}},
      {"rnn_tanh.input", {"RNN per layer", [](Converter& c) { return recurrent_rule(c, "RNN"); }}},
      {"rnn_relu.input",
       {"RNN per layer (Relu)", [](Converter& c) { return recurrent_rule(c, "RNN_RELU"); }}},
  };
  add_rules(table, entries);
}

// --------------------------------------------------------------------------------------
// ONNX rules of the losses, and of the distances some of them build on (cosine_similarity,
// pairwise_distance).

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

Value nll_loss_rule(Converter& c) {
  // nll_loss(x, target, weight, reduction, ignore_index).
  std::vector<std::string> inputs{c.tensor(0), c.tensor(1)};
  if (!c.is_none(2)) inputs.push_back(c.tensor(2));
  NodeProto* n = c.emit("NegativeLogLikelihoodLoss", inputs);
  const int64_t reduction = c.int_arg(3);
  if (reduction < 0 || reduction > 2) c.refuse("an unknown reduction");
  set_attr(n, "reduction", std::string(kReductions[reduction]));
  set_attr(n, "ignore_index", c.int_arg(4));
  return tensor_value(n->output(0));
}

Value cross_entropy_rule(Converter& c) {
  // cross_entropy_loss(x, target, weight, reduction, ignore_index, label_smoothing).
  if (c.double_arg(5) != 0.0) c.refuse("label smoothing");
  if (c.dtype_of(1) != c10::kLong) c.refuse("class probabilities as targets");
  std::vector<std::string> inputs{c.tensor(0), c.tensor(1)};
  if (!c.is_none(2)) inputs.push_back(c.tensor(2));
  NodeProto* n = c.emit("SoftmaxCrossEntropyLoss", inputs);
  const int64_t reduction = c.int_arg(3);
  if (reduction < 0 || reduction > 2) c.refuse("an unknown reduction");
  set_attr(n, "reduction", std::string(kReductions[reduction]));
  set_attr(n, "ignore_index", c.int_arg(4));
  return tensor_value(n->output(0));
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

}  // namespace onnx_detail

std::string onnx_model(const ExportedProgram& program, const OnnxOptions& options) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("tdfx");
  model.set_producer_version(TDFX_VERSION_STRING);
  if (!options.doc_string.empty()) model.set_doc_string(options.doc_string);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name(options.graph_name);
  onnx_detail::Converter(
      program, graph, options.memory_budget > 0 ? options.memory_budget : program.memory_budget())
      .convert();
  try {
    onnx::checker::check_model(model);
    onnx::ShapeInferenceOptions strict(/*check_type=*/true, /*error_mode=*/1);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), strict);
  } catch (const std::exception& e) {
    // ONNX lists one failure a line; a message of tdfx's is one line.
    std::string failures = e.what();
    while (!failures.empty() && failures.back() == '\n') failures.pop_back();
    for (size_t at = failures.find('\n'); at != std::string::npos; at = failures.find('\n', at)) {
      failures.replace(at, 1, "; ");
    }
    throw OnnxError(
        fmt::format("the ONNX model written from the program fails ONNX's checks: {}", failures));
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw OnnxError("the ONNX model could not be serialized");
  return bytes;
}

void save_onnx(const ExportedProgram& program, const std::string& path,
               const OnnxOptions& options) {
  write_file_atomically(path, onnx_model(program, options));
}

std::vector<OnnxOperator> onnx_operators() {
  std::vector<OnnxOperator> out;
  for (const auto& [name, entry] : onnx_detail::rules()) out.push_back({name, entry.onnx});
  return out;
}

}  // namespace tdfx
