// ONNX rules of normalisation (layer, batch, instance and group norm) and of dropout, which
// is the identity in eval mode.

#include <string>
#include <vector>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
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

}  // namespace tdfx::onnx_detail
