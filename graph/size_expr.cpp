#include "tdfx/graph/size_expr.h"

#include <fmt/format.h>

namespace tdfx {

std::optional<int64_t> SizeExpr::at(int64_t batch) const {
  int64_t scaled = 0;
  if (__builtin_mul_overflow(batch, scale, &scaled) || divisor <= 0) return std::nullopt;
  // Python's floor division, for either sign of `scaled` (the divisor is positive here).
  int64_t quotient = scaled / divisor;
  if ((scaled % divisor != 0) && ((scaled < 0) != (divisor < 0))) --quotient;
  int64_t out = 0;
  if (__builtin_add_overflow(quotient, offset, &out)) return std::nullopt;
  return out;
}

std::string SizeExpr::str() const {
  std::string out = "s0";
  if (scale != 1) out += fmt::format("*{}", scale);
  if (divisor != 1) out += fmt::format("//{}", divisor);
  if (offset > 0) out += fmt::format(" + {}", offset);
  if (offset < 0) out += fmt::format(" - {}", -static_cast<uint64_t>(offset));
  return out;
}

}  // namespace tdfx
