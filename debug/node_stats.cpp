#include "tdfx/debug/node_stats.h"

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/isfinite.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/interpreter.h"

namespace tdfx {
namespace {

template <typename T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, c10::complex<float>> || std::is_same_v<T, c10::complex<double>>) {
    return std::abs(std::complex<double>(v.real(), v.imag()));
  } else {
    return static_cast<double>(v);
  }
}

// Accumulates in double, in element order; min and max propagate NaN as at::min/max do.
template <typename T>
void accumulate(const T* data, int64_t n, TensorStats& s) {
  double min = std::numeric_limits<double>::infinity();
  double max = -min;
  double sum = 0, sum_of_squares = 0;
  bool saw_nan = false;
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = as_double(data[i]);
    if (std::isnan(v)) {
      ++s.nan_count;
      saw_nan = true;
    } else if (std::isinf(v)) {
      ++s.inf_count;
    }
    if (v == 0) ++zeros;
    min = v < min ? v : min;
    max = v > max ? v : max;
    sum += v;
    sum_of_squares += v * v;
  }
  const double mean = sum / static_cast<double>(n);
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = as_double(data[i]) - mean;
    squares += d * d;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.min = saw_nan ? nan : min;
  s.max = saw_nan ? nan : max;
  s.mean = mean;
  s.norm = std::sqrt(sum_of_squares);
  s.std = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : nan;
  s.zero_fraction = static_cast<double>(zeros) / static_cast<double>(n);
}

// What a value is, as a Python user names it.
std::string kind_of(const c10::IValue& value) {
  if (value.isGenericDict()) return "dict";
  if (value.isList()) return "list";
  if (value.isTuple()) return "tuple";
  if (value.isNone()) return "None";
  if (value.isInt()) return "int";
  if (value.isDouble()) return "float";
  if (value.isBool()) return "bool";
  return value.tagKind();
}

// Records each node's statistics as it runs; values need not be kept for it.
class StatsInterpreter : public Interpreter {
 public:
  using Interpreter::Interpreter;
  std::vector<NodeStats> stats;

  c10::IValue run_node(const Node& node) override {
    c10::IValue value = Interpreter::run_node(node);
    if (node.op() == OpCode::kOutput) return value;
    NodeStats entry{node.name(), describe_op(node), std::nullopt, kind_of(value)};
    if (value.isTensor()) entry.stats = tensor_stats(value.toTensor());
    stats.push_back(std::move(entry));
    return value;
  }
};

}  // namespace

std::string describe_op(const Node& node) {
  return fmt::format("{} {}", to_string(node.op()), node.target().str());
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

void nonfinite_rows(const at::Tensor& t, std::vector<int64_t>& rows, int64_t& count,
                    int64_t shown) {
  rows.clear();
  count = 0;
  if (t.dim() == 0 || t.size(0) == 0 || !at::isFloatingType(t.scalar_type())) return;
  const at::Tensor bad = at::isfinite(t.detach()).logical_not().reshape({t.size(0), -1}).any(1);
  const at::Tensor indices = bad.nonzero().reshape({-1});
  count = indices.numel();
  const auto* data = indices.data_ptr<int64_t>();
  for (int64_t i = 0; i < std::min(count, shown); ++i) rows.push_back(data[i]);
}

std::vector<std::vector<int64_t>> nonfinite_indices(const at::Tensor& t, size_t shown) {
  std::vector<std::vector<int64_t>> out;
  if (t.dim() == 0 || t.numel() == 0 || !at::isFloatingType(t.scalar_type())) return out;
  // One byte per element, scanned until the first few are found: not an index per element
  // (nonzero() of an all-NaN tensor would be dim × 8 bytes per element).
  const at::Tensor bad = at::isfinite(t.detach()).logical_not().contiguous().reshape({-1});
  const bool* data = bad.data_ptr<bool>();
  const int64_t numel = bad.numel();
  for (int64_t flat = 0; flat < numel && out.size() < shown; ++flat) {
    if (!data[flat]) continue;
    std::vector<int64_t> index(static_cast<size_t>(t.dim()));
    int64_t rest = flat;
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      index[static_cast<size_t>(d)] = rest % t.size(d);
      rest /= t.size(d);
    }
    out.push_back(std::move(index));
  }
  return out;
}

std::string indices_text(const std::vector<std::vector<int64_t>>& indices, int64_t count) {
  std::string out;
  if (indices.empty()) return out;
  for (const auto& index : indices) {
    out += fmt::format("{}[{}]", out.empty() ? "" : ", ", fmt::join(index, ", "));
  }
  if (count > static_cast<int64_t>(indices.size())) out += ", …";
  return out;
}

TensorStats tensor_stats(const at::Tensor& t) {
  if (!t.defined()) fail<Error>("tensor_stats: the tensor is undefined");
  if (t.is_meta() || t.is_quantized() || t.is_sparse()) {
    fail<Error>("tensor_stats: a {} tensor has no values to summarise", t.is_meta() ? "meta"
                                                                        : t.is_quantized()
                                                                            ? "quantized"
                                                                            : "sparse");
  }
  TensorStats s;
  s.dtype = t.scalar_type();
  s.shape = t.sizes().vec();
  s.numel = t.numel();
  if (s.numel == 0) {
    s.min = s.max = s.mean = s.std = s.zero_fraction = std::numeric_limits<double>::quiet_NaN();
    s.norm = 0;
    return s;
  }
  const at::Tensor data = t.device().is_cpu() ? t.contiguous() : t.to(at::kCPU).contiguous();
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(
      at::kHalf, at::kBFloat16, at::kBool, data.scalar_type(), "tensor_stats",
      [&] { accumulate(data.data_ptr<scalar_t>(), s.numel, s); });
  return s;
}

std::vector<NodeStats> node_stats(const Debuggee& debuggee) {
  const DebugRun run(debuggee);
  StatsInterpreter interpreter(*debuggee.module);
  interpreter.run(debuggee.inputs);
  return std::move(interpreter.stats);
}

Table stats_table(const std::vector<NodeStats>& stats, size_t width) {
  // The node's name takes what the numbers leave (its op is in the data, and in profiles).
  Table table({{"node", 0},
               {"dtype", 5},
               {"shape", 12},
               {"min", kNumberWidth, true},
               {"max", kNumberWidth, true},
               {"mean", kNumberWidth, true},
               {"std", kNumberWidth, true},
               {"nan", 6, true},
               {"inf", 6, true},
               {"zeros", 5, true}},
              width);
  for (const auto& entry : stats) {
    if (!entry.stats) {
      table.add_row({entry.node, entry.kind, "", "", "", "", "", "", "", ""});
      continue;
    }
    const TensorStats& s = *entry.stats;
    table.add_row({entry.node, dtype_short(s.dtype), shape_text(s.shape), table_number(s.min),
                   table_number(s.max), table_number(s.mean), table_number(s.std),
                   std::to_string(s.nan_count), std::to_string(s.inf_count),
                   fmt::format("{:.0f}%", 100 * s.zero_fraction)});
  }
  return table;
}

}  // namespace tdfx
