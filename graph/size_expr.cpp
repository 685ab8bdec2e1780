#include "tdfx/graph/size_expr.h"

#include <fmt/format.h>

#include <cstdint>

namespace tdfx {

std::optional<int64_t> floor_div(int64_t a, int64_t b) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
  int64_t quotient = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --quotient;
  return quotient;
}

std::optional<int64_t> SizeExpr::at(int64_t batch) const {
  int64_t scaled = 0;
  if (__builtin_mul_overflow(batch, scale, &scaled)) return std::nullopt;
  const std::optional<int64_t> quotient = floor_div(scaled, divisor);
  int64_t out = 0;
  if (!quotient || __builtin_add_overflow(*quotient, offset, &out)) return std::nullopt;
  return out;
}

std::string SizeExpr::str() const {
  // As sympy prints torch's expressions: the coefficient first (`2*s0`), FloorDiv as
  // `(base//divisor)`, the constant term last (`s0 - 1`).
  std::string out = scale != 1 ? fmt::format("{}*s0", scale) : "s0";
  if (divisor != 1) out = fmt::format("({}//{})", out, divisor);
  if (offset > 0) out += fmt::format(" + {}", offset);
  if (offset < 0) out += fmt::format(" - {}", -static_cast<uint64_t>(offset));
  return out;
}

}  // namespace tdfx
