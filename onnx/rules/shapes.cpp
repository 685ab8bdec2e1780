// ONNX rules of shapes and views: reshapes, transposes, squeezes, copies, splits and joins,
// expand, repeat, padding, broadcast_tensors, pixel_shuffle and size.

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
namespace {

Value transpose_rule(Converter& c) {
  const int64_t rank = c.rank_of(0);
  if (rank < 2) return tensor_value(c.op("Identity", {c.tensor(0)}));
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  int64_t a = rank == 2 && c.arg_count() == 1 ? 0 : c.norm_dim(c.int_arg(1), rank);
  int64_t b = rank == 2 && c.arg_count() == 1 ? 1 : c.norm_dim(c.int_arg(2), rank);
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(b)]);
  NodeProto* t = c.emit("Transpose", {c.tensor(0)});
  set_attr(t, "perm", perm);
  return tensor_value(t->output(0));
}

Value permute_rule(Converter& c) {
  const int64_t rank = c.rank_of(0);
  std::vector<int64_t> perm = c.ints_arg(1);
  for (auto& d : perm) d = c.norm_dim(d, rank);
  NodeProto* t = c.emit("Transpose", {c.tensor(0)});
  set_attr(t, "perm", perm);
  return tensor_value(t->output(0));
}

Value view_rule(Converter& c) {
  std::string shape = c.ints_tensor(1);
  NodeProto* r = c.emit("Reshape", {c.tensor(0), shape});
  // A literal 0 is a size of 0 in ATen, not "copy this dimension" as Reshape's default.
  if (c.ints_constant(1)) {
    const auto sizes = c.ints_arg(1);
    if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end())
      set_attr(r, "allowzero", int64_t{1});
  }
  return tensor_value(r->output(0));
}

Value flatten_rule(Converter& c) { return tensor_value(c.reshape_to_output(c.tensor(0), 0)); }

Value unsqueeze_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0) + 1);
  return tensor_value(c.op("Unsqueeze", {c.tensor(0), c.const_ints({dim})}));
}

Value squeeze_rule(Converter& c) {
  const auto& shape = c.shape_of(0);
  const int64_t rank = c.rank_of(0);
  std::vector<int64_t> axes;
  if (c.arg_count() > 1 && !c.is_none(1)) {
    for (int64_t d : c.ints_arg(1)) {
      d = c.norm_dim(d, rank);
      if (rank > 0 && shape[static_cast<size_t>(d)] == 1 && !c.follows_batch(0, d))
        axes.push_back(d);
      if (c.follows_batch(0, d)) c.refuse("squeezes a dimension that follows the batch");
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) {
      if (c.follows_batch(0, d)) c.refuse("squeezes a dimension that follows the batch");
      if (shape[static_cast<size_t>(d)] == 1) axes.push_back(d);
    }
  }
  if (axes.empty()) return tensor_value(c.op("Identity", {c.tensor(0)}));
  return tensor_value(c.op("Squeeze", {c.tensor(0), c.const_ints(axes)}));
}

Value identity_rule(Converter& c) { return tensor_value(c.op("Identity", {c.tensor(0)})); }

Value chunk_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(2), c.rank_of(0));
  return split_into(c, chunk_sizes(c, c.int_arg(1), dim), dim);
}

Value split_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(2), c.rank_of(0));
  if (c.arg(1).is<ArgumentList>()) return split_into(c, c.ints_arg(1), dim);
  return split_into(c, piece_sizes(c, c.int_arg(1), dim), dim);
}

Value unbind_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0));
  if (c.follows_batch(0, dim)) c.refuse("unbinds a dimension that follows the batch");
  const int64_t size = c.shape_of(0)[static_cast<size_t>(dim)];
  Value pieces = split_into(c, std::vector<int64_t>(static_cast<size_t>(size), 1), dim);
  for (Value& item : pieces.items) {
    item.name = c.op("Squeeze", {item.name, c.const_ints({dim})});
  }
  return pieces;
}

Value cat_rule(Converter& c) {
  std::vector<std::string> parts = c.tensors(0);
  const int64_t rank =
      static_cast<int64_t>(c.node().meta().tensor.shape.value_or(std::vector<int64_t>{}).size());
  NodeProto* cat = c.emit("Concat", parts);
  set_attr(cat, "axis", c.norm_dim(c.int_arg(1), rank));
  return tensor_value(cat->output(0));
}

Value stack_rule(Converter& c) {
  std::vector<std::string> parts = c.tensors(0);
  const int64_t rank =
      static_cast<int64_t>(c.node().meta().tensor.shape.value_or(std::vector<int64_t>{}).size());
  const int64_t dim = c.norm_dim(c.int_arg(1), rank);
  for (auto& p : parts) p = c.op("Unsqueeze", {p, c.const_ints({dim})});
  NodeProto* cat = c.emit("Concat", parts);
  set_attr(cat, "axis", dim);
  return tensor_value(cat->output(0));
}

Value expand_rule(Converter& c) {
  if (!c.ints_constant(1)) {
    // Sizes with size nodes: -1 entries are constants and mean "keep"; Expand keeps a
    // dimension given as 1.
    c.refuse("expand to sizes that follow the batch");
  }
  std::vector<int64_t> sizes = c.ints_arg(1);
  for (auto& s : sizes) {
    if (s == -1) s = 1;
  }
  return tensor_value(c.op("Expand", {c.tensor(0), c.const_ints(sizes)}));
}

Value size_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0));
  return {c.dim_size(c.tensor(0), dim), {}};
}

Value repeat_rule(Converter& c) {
  std::vector<int64_t> repeats = c.ints_arg(1);
  std::string x = c.tensor(0);
  const int64_t rank = c.rank_of(0);
  if (static_cast<int64_t>(repeats.size()) > rank) {
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < static_cast<int64_t>(repeats.size()) - rank; ++d) axes.push_back(d);
    x = c.op("Unsqueeze", {x, c.const_ints(axes)});
  }
  return tensor_value(c.op("Tile", {x, c.const_ints(repeats)}));
}

/// ONNX's pads (every begin, then every end) from ATen's pad argument (argument 1): (begin,
/// end) pairs from the last dimension on.
std::vector<int64_t> onnx_pads(Converter& c) {
  const std::vector<int64_t> pad = c.ints_arg(1);
  const size_t rank = static_cast<size_t>(c.rank_of(0));
  if (pad.size() % 2 != 0 || pad.size() / 2 > rank)
    c.refuse("a pad list of odd length or too long");
  std::vector<int64_t> pads(2 * rank, 0);
  for (size_t i = 0; i < pad.size(); i += 2) {
    const size_t dim = rank - 1 - i / 2;
    pads[dim] = pad[i];
    pads[dim + rank] = pad[i + 1];
  }
  return pads;
}

Value constant_pad_rule(Converter& c) {
  // constant_pad_nd(x, pad, value): pad is (begin, end) pairs from the last dimension.
  const std::vector<int64_t> pads = onnx_pads(c);
  const c10::ScalarType t = c.out_dtype();
  return tensor_value(
      c.op("Pad", {c.tensor(0), c.const_ints(pads), c.const_scalar(c.double_arg(2), t)}));
}

Value pad_enum_rule(Converter& c) {
  // _pad_enum(x, pad, mode, value): mode is at::padding_mode (0 reflect, 1 replicate,
  // 2 circular, 3 constant); pad is (begin, end) pairs from the last dimension, as
  // constant_pad_nd's.
  static const char* kModes[] = {"reflect", "edge", "", "constant"};
  const int64_t mode = c.int_arg(2);
  if (mode == 2) c.refuse("circular padding");
  if (mode < 0 || mode > 3) c.refuse(fmt::format("padding mode {}", mode));
  const std::vector<int64_t> pads = onnx_pads(c);
  std::vector<std::string> inputs{c.tensor(0), c.const_ints(pads)};
  if (mode == 3) {
    inputs.push_back(c.const_scalar(c.is_none(3) ? 0.0 : c.double_arg(3), c.out_dtype()));
  }
  NodeProto* p = c.emit("Pad", inputs);
  set_attr(p, "mode", std::string(kModes[mode]));
  return tensor_value(p->output(0));
}

Value broadcast_tensors_rule(Converter& c) {
  // Each tensor expanded to the shape of their broadcast sum.
  std::vector<std::string> parts = c.tensors(0);
  std::string sum = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) sum = c.op("Add", {sum, parts[i]});
  const std::string shape = c.shape(sum);
  Value list;
  for (const auto& p : parts) list.items.push_back(tensor_value(c.op("Expand", {p, shape})));
  return list;
}

Value pixel_shuffle_rule(Converter& c) {
  if (c.rank_of(0) != 4) c.refuse("pixel shuffle of other than a 4-D tensor");
  NodeProto* d = c.emit("DepthToSpace", {c.tensor(0)});
  set_attr(d, "blocksize", c.int_arg(1));
  set_attr(d, "mode", std::string("CRD"));
  return tensor_value(d->output(0));
}

}  // namespace

void add_shape_rules(RuleTable& table) {
  const RuleList entries = {
      {"view", {"Reshape", view_rule}},
      {"reshape", {"Reshape", view_rule}},
      {"_unsafe_view", {"Reshape", view_rule}},
      {"flatten", {"Reshape", flatten_rule}},
      {"unflatten",
       {"Reshape", [](Converter& c) { return tensor_value(c.reshape_to_output(c.tensor(0), 0)); }}},
      {"t", {"Transpose", transpose_rule}},
      {"transpose", {"Transpose", transpose_rule}},
      {"permute", {"Transpose", permute_rule}},
      {"unsqueeze", {"Unsqueeze", unsqueeze_rule}},
      {"squeeze", {"Squeeze (Identity when no dimension is 1)", squeeze_rule}},
      {"contiguous", {"Identity", identity_rule}},
      {"clone", {"Identity", identity_rule}},
      {"alias", {"Identity", identity_rule}},
      {"detach", {"Identity", identity_rule}},
      {"chunk", {"Split", chunk_rule}},
      {"unsafe_chunk", {"Split", chunk_rule}},
      {"_pad_enum", {"Pad (constant, reflect, edge; circular is refused)", pad_enum_rule}},
      {"broadcast_tensors", {"Add, Shape, Expand", broadcast_tensors_rule}},
      {"pixel_shuffle", {"DepthToSpace (CRD)", pixel_shuffle_rule}},
      {"split", {"Split", split_rule}},
      {"split_with_sizes", {"Split", split_rule}},
      {"unbind", {"Split, Squeeze", unbind_rule}},
      {"cat", {"Concat", cat_rule}},
      {"concat", {"Concat", cat_rule}},
      {"stack", {"Unsqueeze, Concat", stack_rule}},
      {"expand", {"Expand", expand_rule}},
      {"repeat", {"Tile (Unsqueeze for new dimensions)", repeat_rule}},
      {"constant_pad_nd", {"Pad", constant_pad_rule}},
      {"size", {"Shape", size_rule}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
