// ONNX rules of convolution, pooling (max, average, adaptive average) and upsampling.

#include <fmt/format.h>

#include <string>
#include <vector>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
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

}  // namespace tdfx::onnx_detail
