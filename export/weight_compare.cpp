#include "tdfx/export/weight_compare.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/view_as_real.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tdfx::detail {

Norms& Norms::operator+=(const Norms& o) {
  diff += o.diff;
  a += o.a;
  b += o.b;
  dot += o.dot;
  return *this;
}

double relative_change(const Norms& s) {
  if (s.a > 0) return std::sqrt(s.diff) / std::sqrt(s.a);
  return s.diff > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

double cosine(const Norms& s) {
  if (s.a <= 0 || s.b <= 0) return std::numeric_limits<double>::quiet_NaN();
  return s.dot / (std::sqrt(s.a) * std::sqrt(s.b));
}

void WeightSums::add(const WeightSums& o) {
  norms += o.norms;
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
  non_finite += o.non_finite;
  equal = equal && o.equal;
}

namespace {

// The elements compare_weights takes at a time: each block is summed apart and the blocks' sums
// added in order, so rounding grows with a block's length and the number of blocks rather
// than with the weight's size, and the sums are the same for any number of threads.
constexpr int64_t kWeightSumsBlock = int64_t{1} << 14;

template <typename T>
void sum_block(const T* pa, const T* pb, int64_t begin, int64_t end, WeightSums& out) {
  Norms& s = out.norms;
  for (int64_t k = begin; k < end; ++k) {
    const double x = static_cast<double>(pa[k]), y = static_cast<double>(pb[k]);
    // A causal mask holds -inf: equal elements, NaNs included, are no difference.
    if (x == y || (std::isnan(x) && std::isnan(y))) {
      if (std::isfinite(x)) {
        s.a += x * x;
        s.b += x * x;
        s.dot += x * x;
      }
      continue;
    }
    out.equal = false;
    if (!std::isfinite(x) || !std::isfinite(y)) {
      ++out.non_finite;
      continue;
    }
    const double d = std::abs(x - y);
    s.diff += d * d;
    s.a += x * x;
    s.b += y * y;
    s.dot += x * y;
    out.max_abs = std::max(out.max_abs, d);
    out.max_rel = std::max(out.max_rel, d / std::max(std::abs(x), std::abs(y)));
  }
}

template <typename T>
void sum_blocks(const T* pa, const T* pb, int64_t n, std::vector<WeightSums>& blocks) {
  at::parallel_for(0, static_cast<int64_t>(blocks.size()), 4, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      sum_block(pa, pb, k * kWeightSumsBlock, std::min(n, (k + 1) * kWeightSumsBlock), blocks[k]);
    }
  });
}

}  // namespace

WeightSums compare_weights(const at::Tensor& x, const at::Tensor& y) {
  at::Tensor a = x.detach(), b = y.detach();
  if (a.is_complex()) {
    // As pairs of reals: ‖B − A‖ is the same, and A·B its real part.
    a = at::view_as_real(a.resolve_conj());
    b = at::view_as_real(b.resolve_conj());
  }
  a = a.contiguous();
  b = b.contiguous();
  const int64_t n = a.numel();
  std::vector<WeightSums> blocks(
      static_cast<size_t>((n + kWeightSumsBlock - 1) / kWeightSumsBlock));
  AT_DISPATCH_ALL_TYPES_AND3(
      at::kHalf, at::kBFloat16, at::kBool, a.scalar_type(), "diff_programs",
      [&] { sum_blocks(a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), n, blocks); });
  WeightSums total;
  for (const WeightSums& m : blocks) total.add(m);
  return total;
}

}  // namespace tdfx::detail
