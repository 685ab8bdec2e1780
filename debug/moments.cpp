#include "tdfx/debug/moments.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/isfinite.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tdfx/core/error.h"

namespace tdfx::detail {

namespace {

// `t` as a contiguous tensor of a real dtype, on the CPU.
at::Tensor readable(const at::Tensor& t, const char* what) {
  if (t.is_complex()) fail<Error>("{}: a complex tensor; give its real and imaginary parts", what);
  return t.detach().cpu().contiguous();
}

// Calls `fn(data, n)` with `data` a pointer of the tensor's element type, so that each
// statistic's loop is compiled, and inlined, once per dtype.
template <typename Fn>
void with_typed_data(const at::Tensor& t, Fn&& fn) {
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, t.scalar_type(), "tdfx_moments",
                             [&] { fn(t.data_ptr<scalar_t>(), t.numel()); });
}

}  // namespace

double Moments::std() const {
  return finite < 2 ? 0.0 : std::sqrt(squared_gap / static_cast<double>(finite - 1));
}

Moments moments_of(const at::Tensor& values) {
  Moments m;
  if (!values.defined() || values.numel() == 0) return m;
  const at::Tensor t = readable(values, "moments");
  // One pass. The variance from sums of (v - shift), the shift the first finite element: sums
  // of squares alone would lose what a mean far from 0 cancels.
  double lo = std::numeric_limits<double>::infinity();
  double hi = -lo;
  double sum = 0, sum_squares = 0, shifted = 0, shifted_squares = 0;
  int64_t finite = 0;
  const bool every_finite = all_finite(t);
  with_typed_data(t, [&](const auto* data, int64_t n) {
    double shift = 0;
    int64_t i = 0;
    for (; i < n && !std::isfinite(static_cast<double>(data[i])); ++i) {
    }
    if (i < n) shift = static_cast<double>(data[i]);
    if (every_finite) {
      // No branch, four sums of each kind at once: what a float tensor of a layer takes.
      double s[4] = {}, q[4] = {}, d1[4] = {}, d2[4] = {}, l[4], h[4];
      for (int k = 0; k < 4; ++k) l[k] = h[k] = shift;
      for (; i + 4 <= n; i += 4) {
        for (int k = 0; k < 4; ++k) {
          const double v = static_cast<double>(data[i + k]);
          const double d = v - shift;
          s[k] += v;
          q[k] += v * v;
          d1[k] += d;
          d2[k] += d * d;
          l[k] = std::min(l[k], v);
          h[k] = std::max(h[k], v);
        }
      }
      for (int k = 0; k < 4; ++k) {
        sum += s[k];
        sum_squares += q[k];
        shifted += d1[k];
        shifted_squares += d2[k];
        lo = std::min(lo, l[k]);
        hi = std::max(hi, h[k]);
      }
      finite = i;  // every element before i, all finite, summed above
    }
    for (; i < n; ++i) {
      const double v = static_cast<double>(data[i]);
      if (!std::isfinite(v)) continue;
      ++finite;
      sum += v;
      sum_squares += v * v;
      const double d = v - shift;
      shifted += d;
      shifted_squares += d * d;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  });
  m.finite = finite;
  m.nonfinite = values.numel() - finite;
  if (finite == 0) return m;
  const auto n = static_cast<double>(finite);
  m.sum = sum;
  m.sum_squares = sum_squares;
  m.min = lo;
  m.max = hi;
  m.mean = sum / n;
  m.squared_gap = std::max(0.0, shifted_squares - shifted * shifted / n);
  return m;
}

std::vector<double> bucket_counts(const at::Tensor& values, const std::vector<double>& limits) {
  std::vector<double> counts(limits.size(), 0.0);
  if (limits.empty() || !values.defined() || values.numel() == 0) return counts;
  const at::Tensor t = readable(values, "bucket_counts");
  const auto last = static_cast<int64_t>(limits.size()) - 1;
  // Limits of equal width from `first`: a value's bucket is guessed from its distance (bucket
  // i holds (first + (i - 1) width, first + i width]) and then moved to the one whose limits
  // hold it as written, so that rounding never puts a value on the wrong side of a limit. The
  // guess is right but at a limit, so the moves' branches are all but never taken.
  const double first = limits.front();
  const double width = last > 0 ? (limits.back() - first) / static_cast<double>(last) : 0.0;
  const double per_width = width > 0 ? 1.0 / width : 0.0;
  // Four tallies, filled in turn: neighbouring values often fall in one bucket, and with one
  // tally each increment would wait for the one before it.
  constexpr int64_t kTallies = 4;
  const auto size = static_cast<int64_t>(limits.size());
  std::vector<int64_t> tallies(static_cast<size_t>(kTallies * size), 0);
  // The limits after a -Inf: below[i] is the limit under bucket i, with no branch for i = 0.
  std::vector<double> padded(limits.size() + 1);
  padded[0] = -std::numeric_limits<double>::infinity();
  std::copy(limits.begin(), limits.end(), padded.begin() + 1);
  const double* below = padded.data();
  const double* above = limits.data();
  with_typed_data(t, [&](const auto* data, int64_t n) {
    for (int64_t k = 0; k < n; ++k) {
      const double v = static_cast<double>(data[k]);
      if (!std::isfinite(v)) continue;
      int64_t i = 0;
      if (per_width > 0 && v > first) {
        i = std::min(last, static_cast<int64_t>((v - first) * per_width) + 1);
      }
      // One move each way without a branch; more only for limits not of equal width.
      i -= static_cast<int64_t>(v <= below[i]);
      i += static_cast<int64_t>(i < last && v > above[i]);
      if (v <= below[i] || (i < last && v > above[i])) {
        while (i > 0 && v <= below[i]) --i;
        while (i < last && v > above[i]) ++i;
      }
      ++tallies[static_cast<size_t>((k % kTallies) * size + i)];
    }
  });
  for (int64_t j = 0; j < kTallies; ++j) {
    for (int64_t i = 0; i < size; ++i) {
      counts[static_cast<size_t>(i)] +=
          static_cast<double>(tallies[static_cast<size_t>(j * size + i)]);
    }
  }
  return counts;
}

namespace {

// True when no element of `data` has its exponent bits all set (Inf or NaN): an OR over the
// elements, without a branch, which the compiler vectorises.
template <typename Bits>
bool bits_all_finite(const void* data, int64_t n, Bits exponent) {
  const auto* p = static_cast<const Bits*>(data);
  Bits any = 0;
  for (int64_t i = 0; i < n; ++i) any |= static_cast<Bits>((p[i] & exponent) == exponent);
  return any == 0;
}

}  // namespace

bool all_finite(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0 || !(t.is_floating_point() || t.is_complex())) return true;
  if (t.device().is_cpu() && t.is_contiguous() && !t.is_complex()) {
    if (t.scalar_type() == at::kFloat) {
      return bits_all_finite<uint32_t>(t.data_ptr(), t.numel(), 0x7f800000u);
    }
    if (t.scalar_type() == at::kDouble) {
      return bits_all_finite<uint64_t>(t.data_ptr(), t.numel(), 0x7ff0000000000000ull);
    }
  }
  return at::isfinite(t).all().item<bool>();
}

double distance(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = readable(a, "distance"), y = readable(b, "distance");
  if (x.sizes() != y.sizes() || x.scalar_type() != y.scalar_type()) {
    fail<Error>("distance: tensors of shapes [{}] and [{}]", fmt::join(x.sizes(), ", "),
                fmt::join(y.sizes(), ", "));
  }
  // Four sums at once: each add then need not wait for the one before it.
  double squares[4] = {};
  AT_DISPATCH_ALL_TYPES_AND3(
      at::kHalf, at::kBFloat16, at::kBool, x.scalar_type(), "tdfx_distance", [&] {
        const scalar_t* p = x.data_ptr<scalar_t>();
        const scalar_t* q = y.data_ptr<scalar_t>();
        const int64_t n = x.numel();
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
          for (int k = 0; k < 4; ++k) {
            const double d = static_cast<double>(p[i + k]) - static_cast<double>(q[i + k]);
            squares[k] += d * d;
          }
        }
        for (; i < n; ++i) {
          const double d = static_cast<double>(p[i]) - static_cast<double>(q[i]);
          squares[0] += d * d;
        }
      });
  return std::sqrt((squares[0] + squares[1]) + (squares[2] + squares[3]));
}

}  // namespace tdfx::detail
