#pragma once

/// \file
/// node_stats: what each node of a run produced — dtype, shape, min, max,
/// mean, standard deviation, NaN and Inf counts, fraction of zeros — as data
/// and as a table.
///
///     auto stats = node_stats(debuggee(gm, td));
///     std::cout << stats_table(stats).str();

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tdfx/core/text_table.h"
#include "tdfx/debug/debuggee.h"

namespace tdfx {

/// The statistics of one tensor. Floating and complex values are read as doubles (complex:
/// their absolute value); min, max, mean and std are over every element, so one NaN makes
/// them NaN, as at::min and at::mean do. Empty tensors have NaN statistics.
struct TensorStats {
  /// The tensor's dtype.
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  /// The tensor's shape.
  std::vector<int64_t> shape;
  /// How many elements it has.
  int64_t numel = 0;
  ///@{
  /// The smallest, largest and mean element (NaN when the tensor holds one, or is empty).
  double min = 0, max = 0, mean = 0;
  ///@}
  /// The unbiased standard deviation (at::std's default); NaN below two elements.
  double std = 0;
  /// The L2 norm, the square root of the sum of squares (in double); 0 when empty.
  double norm = 0;
  ///@{
  /// How many elements are NaN, and how many are Inf.
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  ///@}
  /// The fraction of elements equal to zero.
  double zero_fraction = 0;

  /// True when no element is NaN or Inf.
  bool finite() const { return nan_count == 0 && inf_count == 0; }
};

/// The statistics of `t`, in one pass over its elements (on the CPU). tdfx::Error for an
/// undefined, meta, quantized or sparse tensor.
TensorStats tensor_stats(const at::Tensor& t);

/// A node's opcode and target as the tables print them (`call_module 0.module.fc1`).
std::string describe_op(const Node& node);
/// A shape as the tables print it (`[2, 3]`).
std::string shape_text(const std::vector<int64_t>& shape);

/// The rows of `t` (indices along dim 0) holding NaN or Inf: the first `shown` in `rows`, and
/// how many in `count`. Nothing for a 0-dim or non-floating tensor.
void nonfinite_rows(const at::Tensor& t, std::vector<int64_t>& rows, int64_t& count,
                    int64_t shown = 8);

/// The indices (one per dimension: row, feature, …) of the first `shown` elements of `t` that
/// are NaN or Inf, in row-major order. Nothing for a 0-dim or non-floating tensor.
std::vector<std::vector<int64_t>> nonfinite_indices(const at::Tensor& t, size_t shown = 4);

/// `[5, 7], [5, 9]`, with `, …` after them when `count` is larger: indices for a report.
std::string indices_text(const std::vector<std::vector<int64_t>>& indices, int64_t count);

/// One node of a run and what it produced.
struct NodeStats {
  /// The node's name.
  std::string node;
  /// The node's opcode and target as printed (`call_module 0.module.fc1`).
  std::string op;
  /// Set when the node produced one tensor.
  std::optional<TensorStats> stats;
  /// What the node produced when it is not a tensor (`tuple`, `int`), for the table.
  std::string kind;
};

/// Runs `debuggee` once through an Interpreter and returns every node's statistics, in
/// program order (the output node excluded).
std::vector<NodeStats> node_stats(const Debuggee& debuggee);

/// The statistics as a table at most `width` columns wide: node, dtype, shape, min, max,
/// mean, std, nan, inf, zeros.
Table stats_table(const std::vector<NodeStats>& stats, size_t width = kTerminalWidth);

}  // namespace tdfx
