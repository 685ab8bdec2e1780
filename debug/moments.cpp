#include "tdfx/debug/moments.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/isfinite.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tdfx/core/error.h"

namespace tdfx::detail {

namespace {

// Error unless `t` holds values tdfx can read one by one: a strided tensor of a real dtype
// with storage.
void check_readable(const at::Tensor& t, const char* what) {
  if (t.is_complex()) fail<Error>("{}: a complex tensor; give its real and imaginary parts", what);
  if (t.is_quantized()) fail<Error>("{}: a quantized tensor; give its dequantize()", what);
  if (t.layout() != c10::kStrided) {
    fail<Error>("{}: a sparse or otherwise unstrided tensor; give its values() or to_dense()",
                what);
  }
  if (t.is_meta()) fail<Error>("{}: a meta tensor has a shape but no values", what);
}

// `t` as a contiguous tensor of a real dtype, on the CPU.
at::Tensor readable(const at::Tensor& t, const char* what) {
  check_readable(t, what);
  return t.detach().cpu().contiguous();
}

// Calls `fn(data, n)` with `data` a pointer of the tensor's element type, so that each
// statistic's loop is compiled, and inlined, once per dtype.
template <typename Fn>
void with_typed_data(const at::Tensor& t, Fn&& fn) {
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, t.scalar_type(), "tdfx_moments",
                             [&] { fn(t.data_ptr<scalar_t>(), t.numel()); });
}

// Buckets of equal width from `min`: bucket i holds (min + width i, min + width (i + 1)], the
// first also everything below, the last everything above. The limits are computed as
// equal_width_buckets lists them (`limits`), so a value is counted on the side of a limit it
// is on as written.
struct EqualWidth {
  double min = 0, width = 0, per_width = 0;
  int64_t last = 0;                             // the last bucket's index
  const std::vector<double>* limits = nullptr;  // last + 1 of them
  // For a range beyond a double (±1e308 apart): min and width are halves, each limit is
  // computed halved and doubled (exact), so that no product overflows.
  bool halved = false;

  double below(int64_t i) const {
    const double at = min + width * static_cast<double>(i);
    return halved ? at * 2 : at;
  }

  // The bucket of a finite `v`: guessed from its distance, else (where limits collapse, a
  // range of a few ulps, or the guess rounded across one) found among the limits.
  int64_t bucket(double v) const {
    const double distance = halved ? v * 0.5 - min : v - min;
    // max(0, g) first: a NaN guess (per_width 0 times an infinite distance) becomes 0.
    const double g = std::min(static_cast<double>(last), std::max(0.0, distance * per_width));
    const auto i = static_cast<int64_t>(g);
    if ((i == 0 || v > below(i)) && (i == last || v <= below(i + 1))) return i;
    const auto at = std::lower_bound(limits->begin(), limits->end() - 1, v);
    return at - limits->begin();
  }
};

// moments_of's sums over values all finite, each of four kinds in four lanes: value i + k of
// each group of 4 goes to lane k, whichever loop takes it, so the sums are the same to the bit
// with AVX2 or without.
struct MomentLanes {
  double sum[4] = {}, squares[4] = {}, shifted[4] = {}, shifted_squares[4] = {}, lo[4], hi[4];
};

#if defined(__x86_64__)
// The AVX2 loops: 4 doubles a lane each. Multiplies and adds are never fused (no FMA target),
// so each result is the double the loop by values computes.
#define TDFX_AVX2 __attribute__((target("avx2"), always_inline)) inline

template <typename T>
TDFX_AVX2 __m256d load_4(const T* data) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_cvtps_pd(_mm_loadu_ps(data));
  } else {
    return _mm256_loadu_pd(data);
  }
}

// MomentLanes' sums over groups of 4 from `i` (all finite), each value times `factor`. Returns
// where the last group ends.
template <typename T>
__attribute__((target("avx2"))) int64_t avx2_moments(const T* data, int64_t i, int64_t n,
                                                     double shift, double factor,
                                                     MomentLanes& lanes) {
  __m256d sum = _mm256_loadu_pd(lanes.sum), squares = _mm256_loadu_pd(lanes.squares),
          shifted = _mm256_loadu_pd(lanes.shifted),
          shifted_squares = _mm256_loadu_pd(lanes.shifted_squares), lo = _mm256_loadu_pd(lanes.lo),
          hi = _mm256_loadu_pd(lanes.hi);
  const __m256d by = _mm256_set1_pd(shift), times = _mm256_set1_pd(factor);
  for (; i + 4 <= n; i += 4) {
    const __m256d v = _mm256_mul_pd(load_4(data + i), times);
    const __m256d d = _mm256_sub_pd(v, by);
    sum = _mm256_add_pd(sum, v);
    squares = _mm256_add_pd(squares, _mm256_mul_pd(v, v));
    shifted = _mm256_add_pd(shifted, d);
    shifted_squares = _mm256_add_pd(shifted_squares, _mm256_mul_pd(d, d));
    // (v < lo ? v : lo) and (v > hi ? v : hi), as std::min(lo, v) and std::max(hi, v) pick.
    lo = _mm256_min_pd(v, lo);
    hi = _mm256_max_pd(v, hi);
  }
  _mm256_storeu_pd(lanes.sum, sum);
  _mm256_storeu_pd(lanes.squares, squares);
  _mm256_storeu_pd(lanes.shifted, shifted);
  _mm256_storeu_pd(lanes.shifted_squares, shifted_squares);
  _mm256_storeu_pd(lanes.lo, lo);
  _mm256_storeu_pd(lanes.hi, hi);
  return i;
}

// The bucket loop's constants, 4 lanes each.
struct Lanes {
  __m256d min, width, per_width, top, zero, one;
};

// min + width i: each limit the double equal_width_buckets lists.
TDFX_AVX2 __m256d limit_at(const Lanes& l, __m256d i) {
  return _mm256_add_pd(l.min, _mm256_mul_pd(l.width, i));
}

// Lanes whose value is at or below the limit under bucket i (so belongs lower).
TDFX_AVX2 __m256d belongs_lower(const Lanes& l, __m256d v, __m256d i) {
  return _mm256_and_pd(_mm256_cmp_pd(i, l.zero, _CMP_GT_OQ),
                       _mm256_cmp_pd(v, limit_at(l, i), _CMP_LE_OQ));
}

// Lanes whose value is above the limit over bucket i (so belongs higher).
TDFX_AVX2 __m256d belongs_higher(const Lanes& l, __m256d v, __m256d i) {
  return _mm256_and_pd(_mm256_cmp_pd(i, l.top, _CMP_LT_OQ),
                       _mm256_cmp_pd(v, limit_at(l, _mm256_add_pd(i, l.one)), _CMP_GT_OQ));
}

// Each of `n` finite values' bucket, 4 at a time, written to `bucket`: a guess from its
// distance, moved one down or one up as the limits either side of the guess say. Returns the
// index of the first group with a value more than one bucket from its guess (where limits
// collapse: a range of a few ulps), or where the last group of 4 ends; the caller takes the
// rest by EqualWidth::bucket.
template <typename T>
__attribute__((target("avx2"))) int avx2_buckets(const T* data, int32_t* bucket, int n,
                                                 const EqualWidth& w) {
  const Lanes l{_mm256_set1_pd(w.min),       _mm256_set1_pd(w.width),
                _mm256_set1_pd(w.per_width), _mm256_set1_pd(static_cast<double>(w.last)),
                _mm256_setzero_pd(),         _mm256_set1_pd(1.0)};
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m256d v = load_4(data + k);
    // max(g, 0) gives 0 for a NaN g (per_width 0 times an infinite distance).
    const __m256d g = _mm256_min_pd(
        _mm256_max_pd(_mm256_mul_pd(_mm256_sub_pd(v, l.min), l.per_width), l.zero), l.top);
    const __m256d i = _mm256_round_pd(g, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    // Every limit from the guess: the tests do not wait on each other.
    const __m256d down = belongs_lower(l, v, i), up = belongs_higher(l, v, i);
    const __m256d further =
        _mm256_or_pd(_mm256_and_pd(down, belongs_lower(l, v, _mm256_sub_pd(i, l.one))),
                     _mm256_and_pd(up, belongs_higher(l, v, _mm256_add_pd(i, l.one))));
    if (_mm256_movemask_pd(further) != 0) return k;
    const __m256d moved =
        _mm256_add_pd(_mm256_sub_pd(i, _mm256_and_pd(down, l.one)), _mm256_and_pd(up, l.one));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bucket + k), _mm256_cvttpd_epi32(moved));
  }
  return k;
}
#undef TDFX_AVX2

bool has_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}
#endif

}  // namespace

double Moments::std() const {
  return finite < 2 ? 0.0 : scale * std::sqrt(scaled_gap / static_cast<double>(finite - 1));
}

double Moments::norm() const { return scale * std::sqrt(scaled_squares); }

namespace {

// One pass of moments_of over the finite elements of `t`, each times `factor` (a power of 2,
// exact; 1 but where the sums of the values themselves overflow). The variance comes from sums
// of (v - shift), the shift the first finite element: sums of squares alone would lose what a
// mean far from 0 cancels.
struct Sums {
  double sum = 0, squares = 0, shifted = 0, shifted_squares = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  int64_t finite = 0;
};

Sums sums_of(const at::Tensor& t, bool every_finite, double factor) {
  Sums out;
  with_typed_data(t, [&](const auto* data, int64_t n) {
    double shift = 0;
    int64_t i = 0;
    for (; i < n && !std::isfinite(static_cast<double>(data[i])); ++i) {
    }
    if (i < n) shift = static_cast<double>(data[i]) * factor;
    if (every_finite) {
      // No branch, four sums of each kind at once: what a float tensor of a layer takes.
      MomentLanes lanes;
      for (int k = 0; k < 4; ++k) lanes.lo[k] = lanes.hi[k] = shift;
#if defined(__x86_64__)
      using T = std::decay_t<decltype(*data)>;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        if (has_avx2()) i = avx2_moments(data, i, n, shift, factor, lanes);
      }
#endif
      for (; i + 4 <= n; i += 4) {
        for (int k = 0; k < 4; ++k) {
          const double v = static_cast<double>(data[i + k]) * factor;
          const double d = v - shift;
          lanes.sum[k] += v;
          lanes.squares[k] += v * v;
          lanes.shifted[k] += d;
          lanes.shifted_squares[k] += d * d;
          lanes.lo[k] = std::min(lanes.lo[k], v);
          lanes.hi[k] = std::max(lanes.hi[k], v);
        }
      }
      for (int k = 0; k < 4; ++k) {
        out.sum += lanes.sum[k];
        out.squares += lanes.squares[k];
        out.shifted += lanes.shifted[k];
        out.shifted_squares += lanes.shifted_squares[k];
        out.lo = std::min(out.lo, lanes.lo[k]);
        out.hi = std::max(out.hi, lanes.hi[k]);
      }
      out.finite = i;  // every element before i, all finite, summed above
    }
    for (; i < n; ++i) {
      const double v = static_cast<double>(data[i]) * factor;
      if (!std::isfinite(v)) continue;
      ++out.finite;
      out.sum += v;
      out.squares += v * v;
      const double d = v - shift;
      out.shifted += d;
      out.shifted_squares += d * d;
      out.lo = std::min(out.lo, v);
      out.hi = std::max(out.hi, v);
    }
  });
  return out;
}

}  // namespace

Moments moments_of(const at::Tensor& values) {
  Moments m;
  if (!values.defined() || values.numel() == 0) return m;
  const at::Tensor t = readable(values, "moments");
  const bool every_finite = all_finite(t);
  Sums sums = sums_of(t, every_finite, 1.0);
  m.finite = sums.finite;
  m.nonfinite = values.numel() - sums.finite;
  if (sums.finite == 0) return m;
  m.min = sums.lo;
  m.max = sums.hi;
  // Values beyond about 1e154 overflow a sum of squares, and beyond 1e308 / n a sum: taken
  // again of the values times 2^-k, the largest then in [1, 2), and scaled back where the result
  // is a double (a sum of squares that is not stays Inf; norm() and std() are).
  const bool overflowed = !std::isfinite(sums.sum) || !std::isfinite(sums.squares) ||
                          !std::isfinite(sums.shifted) || !std::isfinite(sums.shifted_squares);
  double factor = 1.0;
  if (overflowed) {
    factor = std::ldexp(1.0, -std::ilogb(std::max(std::abs(m.min), std::abs(m.max))));
    sums = sums_of(t, every_finite, factor);
  }
  const auto n = static_cast<double>(sums.finite);
  m.scale = 1.0 / factor;
  m.scaled_squares = sums.squares;
  m.scaled_gap = std::max(0.0, sums.shifted_squares - sums.shifted * sums.shifted / n);
  m.sum = sums.sum * m.scale;
  m.mean = sums.sum / n * m.scale;
  m.sum_squares = m.scaled_squares * m.scale * m.scale;
  m.squared_gap = m.scaled_gap * m.scale * m.scale;
  return m;
}

namespace {

// Each of `n` finite values' bucket, written to `bucket`: 4 at a time where the CPU has AVX2,
// the rest one by one.
template <typename T>
void find_buckets(const T* data, int32_t* bucket, int n, const EqualWidth& w) {
  int k = 0;
#if defined(__x86_64__)
  if (has_avx2()) k = avx2_buckets(data, bucket, n, w);
#endif
  for (; k < n; ++k) bucket[k] = static_cast<int32_t>(w.bucket(static_cast<double>(data[k])));
}

}  // namespace

Buckets equal_width_buckets(const at::Tensor& values, const Moments& m, int buckets) {
  Buckets b;
  if (m.finite == 0) return b;
  // Bucket i holds (limit[i-1], limit[i]]; the first everything up to limit[0].
  const int n = m.min == m.max ? 1 : std::max(buckets, 1);
  if (n == 1) {
    b.limits = {m.max};
    b.counts = {static_cast<double>(m.finite)};
    return b;
  }
  EqualWidth w;
  w.min = m.min;
  w.width = (m.max - m.min) / n;
  if (!std::isfinite(w.width)) {  // max - min beyond a double
    w.halved = true;
    w.min = m.min * 0.5;
    w.width = (m.max * 0.5 - w.min) / n;
  }
  w.per_width = 1.0 / w.width;
  w.last = n - 1;
  w.limits = &b.limits;
  for (int i = 1; i < n; ++i) b.limits.push_back(w.below(i));
  b.limits.push_back(m.max);
  b.counts.assign(b.limits.size(), 0.0);
  // Four tallies, filled in turn: neighbouring values often fall in one bucket, and with one
  // tally each increment would wait for the one before it.
  constexpr int64_t kTallies = 4;
  const auto size = static_cast<int64_t>(n);
  std::vector<int64_t> tallies(static_cast<size_t>(kTallies * size), 0);
  const auto tally = [&](int64_t k, int64_t i) {
    ++tallies[static_cast<size_t>((k % kTallies) * size + i)];
  };
  const at::Tensor t = readable(values, "histogram");
  const bool by_blocks = m.nonfinite == 0 && !w.halved && std::isfinite(w.per_width) &&
                         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble);
  if (by_blocks) {
    // Every value finite: a block's buckets found at once, then tallied.
    constexpr int kBlock = 512;
    int32_t bucket[kBlock];
    const int64_t total = t.numel();
    for (int64_t start = 0; start < total; start += kBlock) {
      const int len = static_cast<int>(std::min<int64_t>(kBlock, total - start));
      if (t.scalar_type() == at::kFloat) {
        find_buckets(t.data_ptr<float>() + start, bucket, len, w);
      } else {
        find_buckets(t.data_ptr<double>() + start, bucket, len, w);
      }
      for (int k = 0; k < len; ++k) tally(k, bucket[k]);
    }
  } else {
    with_typed_data(t, [&](const auto* data, int64_t count) {
      for (int64_t k = 0; k < count; ++k) {
        const double v = static_cast<double>(data[k]);
        if (std::isfinite(v)) tally(k, w.bucket(v));
      }
    });
  }
  for (int64_t j = 0; j < kTallies; ++j) {
    for (int64_t i = 0; i < size; ++i) {
      b.counts[static_cast<size_t>(i)] +=
          static_cast<double>(tallies[static_cast<size_t>(j * size + i)]);
    }
  }
  return b;
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
  if (!t.defined()) return true;
  if (!t.is_complex()) check_readable(t, "all_finite");
  if (t.numel() == 0 || !(t.is_floating_point() || t.is_complex())) return true;
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
    fail<Error>("distance: tensors of shapes [{}] and [{}], dtypes {} and {}",
                fmt::join(x.sizes(), ", "), fmt::join(y.sizes(), ", "),
                c10::toString(x.scalar_type()), c10::toString(y.scalar_type()));
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
