#include "tdfx/export/op_policy.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "tdfx/core/error.h"
#include "tdfx/graph/value_type.h"

namespace tdfx {
namespace {

// Pure tensor operators: math, reductions, shapes and views that ATen bounds-
// checks, creation of fresh tensors, and the nn functional ops. Left out on
// purpose: file and storage access (from_file, set_, storage_offset games),
// views with caller-chosen strides (as_strided*), which read outside a
// storage, and anything not plain tensor math. Sorted, for binary search.
constexpr std::string_view kAllowed[] = {
    "_assert_async",
    "_convolution",
    "_embedding_bag",
    "_log_softmax",
    "_pad_circular",
    "_pad_enum",
    "_softmax",
    "_to_copy",
    "_unsafe_view",
    "abs",
    "absolute",
    "acos",
    "acosh",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "add",
    "addbmm",
    "addcdiv",
    "addcmul",
    "addmm",
    "addmv",
    "alias",
    "all",
    "alpha_dropout",
    "amax",
    "amin",
    "any",
    "arange",
    "argmax",
    "argmin",
    "argsort",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "baddbmm",
    "batch_norm",
    "bernoulli",
    "bilinear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "bmm",
    "broadcast_tensors",
    "bucketize",
    "cat",
    "cdist",
    "ceil",
    "celu",
    "chunk",
    "clamp",
    "clamp_max",
    "clamp_min",
    "clip",
    "clone",
    "col2im",
    "concat",
    "constant_pad_nd",
    "contiguous",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "convolution",
    "copy",
    "copysign",
    "cos",
    "cosh",
    "cosine_embedding_loss",
    "cosine_similarity",
    "count_nonzero",
    "cross_entropy_loss",
    "cumprod",
    "cumsum",
    "deg2rad",
    "detach",
    "diag",
    "diag_embed",
    "diagonal",
    "dim",
    "div",
    "divide",
    "dot",
    "dropout",
    "einsum",
    "elu",
    "embedding",
    "embedding_bag",
    "empty",
    "empty_like",
    "eq",
    "equal",
    "erf",
    "erfc",
    "erfinv",
    "exp",
    "exp2",
    "expand",
    "expand_as",
    "expm1",
    "eye",
    "feature_alpha_dropout",
    "feature_dropout",
    "fill",
    "flatten",
    "flip",
    "float_power",
    "floor",
    "floor_divide",
    "fmax",
    "fmin",
    "fmod",
    "frac",
    "full",
    "full_like",
    "gather",
    "ge",
    "gelu",
    "glu",
    "group_norm",
    "gru",
    "gru_cell",
    "gt",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "heaviside",
    "hinge_embedding_loss",
    "huber_loss",
    "hypot",
    "im2col",
    "index",
    "index_add",
    "index_fill",
    "index_select",
    "instance_norm",
    "isfinite",
    "isinf",
    "isnan",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "le",
    "leaky_relu",
    "lerp",
    "lgamma",
    "linalg_vector_norm",
    "linear",
    "linspace",
    "log",
    "log10",
    "log1p",
    "log2",
    "log_sigmoid",
    "log_softmax",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "logit",
    "logsumexp",
    "lstm",
    "lstm_cell",
    "lt",
    "margin_ranking_loss",
    "masked_fill",
    "masked_select",
    "matmul",
    "max",
    "max_pool1d",
    "max_pool2d",
    "max_pool2d_with_indices",
    "max_pool3d",
    "max_unpool2d",
    "max_unpool3d",
    "maximum",
    "mean",
    "median",
    "min",
    "minimum",
    "mish",
    "mm",
    "movedim",
    "mse_loss",
    "mul",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multiply",
    "mv",
    "nan_to_num",
    "narrow",
    "native_batch_norm",
    "native_dropout",
    "native_group_norm",
    "native_layer_norm",
    "ne",
    "neg",
    "negative",
    "new_empty",
    "new_full",
    "new_ones",
    "new_zeros",
    "nll_loss",
    "nll_loss_nd",
    "norm",
    "normal",
    "numel",
    "one_hot",
    "ones",
    "ones_like",
    "pad",
    "pairwise_distance",
    "permute",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "pow",
    "prelu",
    "prod",
    "rad2deg",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "reciprocal",
    "reflection_pad1d",
    "reflection_pad2d",
    "relu",
    "relu6",
    "remainder",
    "repeat",
    "repeat_interleave",
    "replication_pad1d",
    "replication_pad2d",
    "reshape",
    "rnn_relu",
    "rnn_relu_cell",
    "rnn_tanh",
    "rnn_tanh_cell",
    "roll",
    "round",
    "rrelu",
    "rsqrt",
    "rsub",
    "scatter",
    "scatter_add",
    "select",
    "selu",
    "sigmoid",
    "sign",
    "silu",
    "sin",
    "sinh",
    "size",
    "slice",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softplus",
    "softshrink",
    "sort",
    "split",
    "split_with_sizes",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "std",
    "std_mean",
    "sub",
    "subtract",
    "sum",
    "t",
    "tan",
    "tanh",
    "tanhshrink",
    "threshold",
    "tile",
    "to",
    "topk",
    "transpose",
    "tril",
    "triplet_margin_loss",
    "triu",
    "true_divide",
    "trunc",
    "type_as",
    "unbind",
    "unflatten",
    "unsafe_chunk",
    "unsqueeze",
    "upsample_bilinear2d",
    "upsample_nearest1d",
    "upsample_nearest2d",
    "var",
    "var_mean",
    "view",
    "view_as",
    "where",
    "xlogy",
    "zero",
    "zeros",
    "zeros_like",
};

// Creation operators whose single int argument is an element count.
constexpr std::string_view kCountedCreation[] = {"arange", "eye", "linspace", "one_hot",
                                                 "randperm"};

constexpr bool sorted_strictly(const std::string_view* begin, const std::string_view* end) {
  for (const std::string_view* it = begin + 1; it < end; ++it) {
    if (!(*(it - 1) < *it)) return false;
  }
  return true;
}
static_assert(sorted_strictly(std::begin(kAllowed), std::end(kAllowed)),
              "kAllowed must stay sorted: is_allowed_operator searches it by bisection");

bool allowed_exactly(std::string_view name) {
  return std::binary_search(std::begin(kAllowed), std::end(kAllowed), name);
}

// The number of elements a constant argument asks for: the product of an int
// list, or an int itself for counted creation operators; 0 when it asks for none.
uint64_t requested_elements(const Argument& arg, bool counts) {
  if (counts && arg.is<int64_t>())
    return static_cast<uint64_t>(std::max<int64_t>(arg.as<int64_t>(), 0));
  if (!arg.is<ArgumentList>()) return 0;
  uint64_t product = 1;
  bool all_ints = true;
  for (const Argument& item : arg.as<ArgumentList>().items) {
    if (!item.is<int64_t>()) {
      all_ints = false;
      break;
    }
    const int64_t v = item.as<int64_t>();
    const auto d = static_cast<uint64_t>(v < 0 ? 0 : v);
    if (d != 0 && product > std::numeric_limits<uint64_t>::max() / d)
      return std::numeric_limits<uint64_t>::max();
    product *= d;
  }
  return all_ints ? product : 0;
}

void check_graph(const Graph& graph, uint64_t budget, const std::string& where) {
  for (const Node* node : graph.nodes()) {
    switch (node->op()) {
      case OpCode::kPlaceholder:
      case OpCode::kOutput:
        break;
      case OpCode::kGetAttr:
      case OpCode::kCallMethod:
        fail<ArchiveError>("{}: node %{} is a {} ('{}'); a loaded program runs aten operators only",
                           where, node->name(), to_string(node->op()), node->target().str());
      case OpCode::kCallModule:
        if (!node->body()) {
          fail<ArchiveError>("{}: call_module %{} has no body graph to run", where, node->name());
        }
        check_graph(*node->body(), budget, where);
        break;
      case OpCode::kCallFunction: {
        // Indexing and int arithmetic (checked for overflow as it runs) allocate nothing.
        if (node->target().is_getitem()) break;
        if (node->target().is_size_arith()) {
          const bool by_zero = node->target().arith() == Target::SizeArith::kFloorDiv &&
                               node->args().size() == 2 && node->args()[1].is<int64_t>() &&
                               node->args()[1].as<int64_t>() == 0;
          if (by_zero)
            fail<ArchiveError>("{}: node %{}: operator.floordiv divides by zero", where,
                               node->name());
          break;
        }
        const std::string& op = node->target().op_name();
        if (node->target().str().rfind("aten::", 0) != 0 || !is_allowed_operator(op)) {
          if (const char* why = refusal_reason(op)) {
            fail<ArchiveError>("{}: node %{} calls {}, which a loaded program may not run: {}",
                               where, node->name(), node->target().str(), why);
          }
          fail<ArchiveError>(
              "{}: node %{} calls {}, which a loaded program may not run (only pure tensor "
              "operators are allowed; see export/op_policy.cpp)",
              where, node->name(), node->target().str());
        }
        const bool counts = std::find(std::begin(kCountedCreation), std::end(kCountedCreation),
                                      op) != std::end(kCountedCreation);
        auto check = [&](const Argument& arg) {
          const uint64_t elements = requested_elements(arg, counts);
          // Eight bytes an element: the widest real dtype.
          if (elements > budget / 8) {
            fail<ArchiveError>(
                "{}: node %{} ({}) asks for {} elements, over the memory budget of {} bytes "
                "(LoadOptions::memory_budget)",
                where, node->name(), node->target().str(), elements, budget);
          }
        };
        for (const Argument& arg : node->args()) check(arg);
        for (const auto& [name, arg] : node->kwargs()) check(arg);
        break;
      }
    }
  }
}

}  // namespace

const char* refusal_reason(std::string_view name) {
  // Pure math that torch::nn layers emit, left out because ATen 1.13 does not check an index
  // they take (tried with out-of-range values): a file could make them read outside a tensor.
  if (name == "ctc_loss" || name == "_ctc_loss") {
    return "ATen does not check its target classes or lengths against log_probs, so a file "
           "could make it read outside them";
  }
  if (name == "fractional_max_pool2d" || name == "fractional_max_pool3d") {
    return "ATen does not check that its samples lie in [0, 1), so a file could make it read "
           "outside its input";
  }
  return nullptr;
}

bool is_allowed_operator(std::string_view name) {
  if (allowed_exactly(name)) return true;
  // In-place variants (`add_`, `relu_`) of allowed operators; not `_foo` privates.
  return name.size() > 1 && name.back() == '_' && allowed_exactly(name.substr(0, name.size() - 1));
}

std::vector<std::string_view> allowed_operators() {
  return {std::begin(kAllowed), std::end(kAllowed)};
}

void check_program_operations(const Graph& graph, uint64_t memory_budget,
                              const std::string& where) {
  check_graph(graph, memory_budget, where);
  // Every value is taken as its type allows (getitem of a list or tuple, arithmetic on ints).
  try {
    check_value_types(graph, ValueTypes(graph));
  } catch (const GraphError& e) {
    fail<ArchiveError>("{}: {}", where, e.what());
  }
}

}  // namespace tdfx
