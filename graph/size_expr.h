#pragma once

/// \file
/// SizeExpr: a size that is a function of the batch size s0, as a dynamic trace finds them
/// (tracer/dynamic_batch.h): `s0`, `2*s0`, `T*s0`, `s0 - 1`, `(s0//2)`. Printed as torch.export
/// prints a symbolic size (sympy's order, torch's FloorDiv in parentheses).

#include <cstdint>
#include <optional>
#include <string>

namespace tdfx {

/// (s0 * scale) // divisor + offset, for a positive batch size s0. `scale` and `divisor` are
/// at least 1; divisor > 1 only with scale 1 (`s0//2`).
struct SizeExpr {
  /// What s0 is multiplied by.
  int64_t scale = 1;
  /// What the product is floor-divided by.
  int64_t divisor = 1;
  /// What is added last.
  int64_t offset = 0;

  /// The batch itself: `s0`.
  bool is_batch() const { return scale == 1 && divisor == 1 && offset == 0; }
  /// The size at batch `batch`; nullopt when it overflows int64.
  std::optional<int64_t> at(int64_t batch) const;
  /// `s0`, `2*s0`, `(s0//2)`, `3*s0 + 1`, `s0 - 1`.
  std::string str() const;

  /// Equal when scale, divisor and offset are.
  friend bool operator==(const SizeExpr& a, const SizeExpr& b) {
    return a.scale == b.scale && a.divisor == b.divisor && a.offset == b.offset;
  }
  /// Not equal: !(a == b).
  friend bool operator!=(const SizeExpr& a, const SizeExpr& b) { return !(a == b); }
};

/// Python's `a // b` on int64: rounded towards negative infinity. nullopt when `b` is 0 or the
/// quotient overflows (INT64_MIN // -1).
std::optional<int64_t> floor_div(int64_t a, int64_t b);

/// A dimension of a tensor that is a function of the batch other than the batch itself.
struct DerivedDim {
  /// The dimension's index in the tensor's shape.
  int64_t dim = 0;
  /// Its size as a function of the batch size s0.
  SizeExpr size;
  /// Equal when dimension and size are.
  friend bool operator==(const DerivedDim& a, const DerivedDim& b) {
    return a.dim == b.dim && a.size == b.size;
  }
};

}  // namespace tdfx
