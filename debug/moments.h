#pragma once

/// \file
/// The moments of a tensor's finite elements, counted in one pass over its data without an
/// ATen op per statistic: what Watch records each sampled step and what a histogram is made
/// of, cheap enough to take of every module and parameter.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace tdfx::detail {

struct Moments {
  int64_t finite = 0;     // elements that are neither NaN nor ±Inf
  int64_t nonfinite = 0;  // the others
  double sum = 0;         // of the finite elements, and of their squares
  double sum_squares = 0;
  double min = 0;  // of the finite elements; 0 when there are none
  double max = 0;
  double mean = 0;         // of the finite elements
  double squared_gap = 0;  // the sum of their squared distances from the mean
  // sum, sum_squares, mean and squared_gap are Inf where the true value is beyond a double.
  // The sums of squares as summed: of the elements divided by `scale`, a power of 2, 1 but
  // where the elements' own squares overflow (beyond about 1e154); std() and norm() are
  // computed from them, so they stay finite where the result is.
  double scale = 1;
  double scaled_squares = 0;
  double scaled_gap = 0;

  /// The sample standard deviation (n - 1), 0 for fewer than two elements.
  double std() const;
  /// The Euclidean norm of the finite elements.
  double norm() const;
};

/// The moments of `values` (any real dtype; bools and integers as numbers); complex, quantized,
/// sparse and meta tensors are refused (Error).
Moments moments_of(const at::Tensor& values);

/// A histogram's buckets: bucket i holds the finite values in (limits[i-1], limits[i]], the
/// first everything up to limits[0].
struct Buckets {
  std::vector<double> limits;
  std::vector<double> counts;
};

/// The finite elements of `values`, whose moments are `m`, counted in `buckets` buckets of
/// equal width from m.min to m.max (one when they are equal; none when no element is finite).
/// Limit i is m.min + width (i + 1), the last m.max (for a range beyond a double, computed
/// from halves); a value on a limit is counted below it. For float and double tensors without
/// NaN or Inf the buckets are found 4 values at a time where the CPU has AVX2.
Buckets equal_width_buckets(const at::Tensor& values, const Moments& m, int buckets);

/// Whether every element of `t` is finite: for a contiguous float or double tensor on the CPU,
/// by the bits of each element in one loop the compiler vectorises (no ATen op); otherwise
/// through ATen. Integers and bools are finite. Error for a quantized, sparse or meta tensor.
bool all_finite(const at::Tensor& t);

/// The Euclidean norm of `a - b` (same shape), in one pass.
double distance(const at::Tensor& a, const at::Tensor& b);

}  // namespace tdfx::detail
