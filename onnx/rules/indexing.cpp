// ONNX rules of the operators that pick elements by position: select, slice, narrow, gather,
// index_select, embedding, tril and triu.

#include <limits>
#include <string>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
namespace {

Value select_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0));
  std::string index;
  if (c.arg(2).is<int64_t>()) {
    index = c.const_scalar(static_cast<double>(c.int_arg(2)), c10::kLong);
  } else {
    index = c.tensor(2, c10::kLong);
  }
  NodeProto* g = c.emit("Gather", {c.tensor(0), index});
  set_attr(g, "axis", dim);
  return tensor_value(g->output(0));
}

Value slice_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0));
  auto bound = [&](size_t i, int64_t missing) -> std::string {
    if (c.is_none(i)) return c.const_ints({missing});
    if (c.arg(i).is<int64_t>()) return c.const_ints({c.int_arg(i)});
    // A size node: already a 1-D int64 tensor of one element.
    const Node* n = c.arg(i).node();
    if (!n || c.dtype_of(i) != c10::kLong)
      c.refuse("a slice bound that is neither an int nor a size");
    return c.op("Unsqueeze", {c.tensor(i), c.const_ints({0})});
  };
  std::string start = bound(2, 0), end = bound(3, std::numeric_limits<int64_t>::max());
  const int64_t step = c.is_none(4) ? 1 : c.int_arg(4);
  return tensor_value(
      c.op("Slice", {c.tensor(0), start, end, c.const_ints({dim}), c.const_ints({step})}));
}

Value narrow_rule(Converter& c) {
  const int64_t dim = c.norm_dim(c.int_arg(1), c.rank_of(0));
  int64_t start = c.int_arg(2);
  const int64_t length = c.int_arg(3);
  if (start < 0) {
    // ATen counts a negative start from the dimension's end; Slice would count its end
    // (start + length) from the end too, and take nothing where that reaches 0.
    if (c.follows_batch(0, dim))
      c.refuse("narrow from the end of a dimension that follows the batch");
    start += c.shape_of(0)[static_cast<size_t>(dim)];
  }
  return tensor_value(c.op("Slice", {c.tensor(0), c.const_ints({start}),
                                     c.const_ints({start + length}), c.const_ints({dim})}));
}

Value embedding_rule(Converter& c) {
  // embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse).
  NodeProto* g = c.emit("Gather", {c.tensor(0), c.tensor(1)});
  set_attr(g, "axis", int64_t{0});
  return tensor_value(g->output(0));
}

Value gather_rule(Converter& c) {
  NodeProto* g = c.emit("GatherElements", {c.tensor(0), c.tensor(2)});
  set_attr(g, "axis", c.norm_dim(c.int_arg(1), c.rank_of(0)));
  return tensor_value(g->output(0));
}

Value index_select_rule(Converter& c) {
  NodeProto* g = c.emit("Gather", {c.tensor(0), c.tensor(2)});
  set_attr(g, "axis", c.norm_dim(c.int_arg(1), c.rank_of(0)));
  return tensor_value(g->output(0));
}

Value trilu_rule(Converter& c, bool upper) {
  NodeProto* t =
      c.emit("Trilu", {c.tensor(0), c.const_scalar(static_cast<double>(c.int_arg(1)), c10::kLong)});
  set_attr(t, "upper", int64_t{upper});
  return tensor_value(t->output(0));
}

}  // namespace

void add_indexing_rules(RuleTable& table) {
  const RuleList entries = {
      {"select", {"Gather", select_rule}},
      {"slice", {"Slice", slice_rule}},
      {"narrow", {"Slice", narrow_rule}},
      {"gather", {"GatherElements", gather_rule}},
      {"index_select", {"Gather", index_select_rule}},
      {"embedding", {"Gather", embedding_rule}},
      {"tril", {"Trilu", [](Converter& c) { return trilu_rule(c, false); }}},
      {"triu", {"Trilu", [](Converter& c) { return trilu_rule(c, true); }}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
