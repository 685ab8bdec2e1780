#pragma once

/// \file
/// How two weights of one dtype and shape differ, element by element, as diff_programs
/// (program_diff.h) reports it: the sums behind the relative change ‖B − A‖ / ‖A‖ and the
/// cosine similarity, and the largest differences, in one pass over both weights, in blocks
/// across threads, with no copy of either.
///
///     const WeightSums m = compare_weights(a, b);
///     relative_change(m.norms);   // 0.01
///     cosine(m.norms);            // 0.999995

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tdfx::detail {

/// Sums over the elements finite in both of two weights, in double: ‖B − A‖², ‖A‖², ‖B‖², A·B.
struct Norms {
  double diff = 0, a = 0, b = 0, dot = 0;
  Norms& operator+=(const Norms& o);
};

/// ‖B − A‖ / ‖A‖; infinity when ‖A‖ = 0 and B is not zero, 0 when both are.
double relative_change(const Norms& s);

/// A·B / (‖A‖ ‖B‖); NaN when either is zero.
double cosine(const Norms& s);

/// How two weights differ: their sums, the largest absolute difference, the largest relative
/// one (|a − b| / max(|a|, |b|)) over the elements finite in both, and how many elements
/// differ where one is not finite. Two NaNs, or two infinities of one sign, are equal.
struct WeightSums {
  Norms norms;
  double max_abs = 0, max_rel = 0;
  int64_t non_finite = 0;
  bool equal = true;

  void add(const WeightSums& o);
};

/// Compares `x` and `y` (one dtype and shape; complex ones as pairs of reals) in one pass,
/// without a copy of either unless one is strided. The sums are the same for any number of
/// threads: each block of elements is summed apart and the blocks added in order.
WeightSums compare_weights(const at::Tensor& x, const at::Tensor& y);

}  // namespace tdfx::detail
