#include "tdfx/core/time_budget.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>
#include <unordered_set>

#include "tdfx/core/memory_budget.h"

namespace tdfx {

using Clock = std::chrono::steady_clock;

struct ScopedTimeBudget::State {
  double seconds = 0;
  std::string what;
  Clock::time_point deadline;

  double left() const { return std::chrono::duration<double>(deadline - Clock::now()).count(); }
};

namespace {

thread_local ScopedTimeBudget::State* active_deadline = nullptr;

// ---- Reading the boxed arguments -----------------------------------------------------------

const c10::IValue* arg(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                       const char* name) {
  const auto index = schema.argumentIndexWithName(name);
  if (!index || static_cast<size_t>(*index) >= args.size()) return nullptr;
  return &args[static_cast<size_t>(*index)];
}

const at::Tensor* tensor_arg(const c10::FunctionSchema& schema,
                             const std::vector<c10::IValue>& args, const char* name) {
  const c10::IValue* value = arg(schema, args, name);
  return value && value->isTensor() && value->toTensor().defined() ? &value->toTensor() : nullptr;
}

// An int list argument (`stride`, `kernel_size`), or empty.
std::vector<int64_t> int_list(const c10::FunctionSchema& schema,
                              const std::vector<c10::IValue>& args, const char* name) {
  const c10::IValue* value = arg(schema, args, name);
  if (!value || !value->isIntList()) return {};
  return value->toIntVector();
}

bool bool_arg(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
              const char* name) {
  const c10::IValue* value = arg(schema, args, name);
  return value && value->isBool() && value->toBool();
}

double elements_of(const at::Tensor& t) { return static_cast<double>(t.numel()); }

// Item `i` of a per-dimension list given once for all dimensions or once per dimension.
int64_t item(const std::vector<int64_t>& list, size_t i, int64_t otherwise) {
  if (list.empty()) return otherwise;
  return list.size() == 1 ? list[0] : (i < list.size() ? list[i] : otherwise);
}

// The elements of every tensor argument, list items included: what an op that reads each of
// its inputs once reads (a reduction over an expanded view reads each element it shows).
double elements_read(const std::vector<c10::IValue>& args) {
  double total = 0;
  for (const c10::IValue& value : args) {
    if (value.isTensor()) {
      if (value.toTensor().defined()) total += elements_of(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorVector()) {
        if (t.defined()) total += elements_of(t);
      }
    }
  }
  return total;
}

// ---- Op families ----------------------------------------------------------------------------

// Ops that read no element: sizes, strides and other metadata.
bool reads_metadata_only(std::string_view op) {
  static const std::unordered_set<std::string_view> kOps = {"size",
                                                            "sym_size",
                                                            "stride",
                                                            "sym_stride",
                                                            "dim",
                                                            "numel",
                                                            "sym_numel",
                                                            "is_contiguous",
                                                            "is_same_size",
                                                            "_shape_as_tensor",
                                                            "is_floating_point",
                                                            "is_complex",
                                                            "is_signed"};
  return kOps.count(op) > 0;
}

// A view: its result aliases its first argument and nothing is written (`view`, `expand`,
// `transpose`, `select`). A view that must copy (`reshape` of an expanded tensor) allocates
// what it copies, which the memory budget bounds.
bool is_view(const c10::FunctionSchema& schema) {
  if (schema.arguments().empty() || schema.returns().size() != 1) return false;
  const c10::AliasInfo* in = schema.arguments()[0].alias_info();
  const c10::AliasInfo* out = schema.returns()[0].alias_info();
  return in && out && !in->isWrite() && !out->isWrite();
}

bool sorts(std::string_view op) {
  static const std::unordered_set<std::string_view> kOps = {
      "sort",      "argsort", "msort",   "topk",     "kthvalue",   "median",
      "nanmedian", "mode",    "_unique", "_unique2", "unique_dim", "unique_consecutive"};
  return kOps.count(op) > 0;
}

// Multiply-adds of `a @ b` with broadcast batches: the larger of a's elements times b's
// columns and b's elements times a's rows.
double matmul_multiply_adds(const at::Tensor& a, const at::Tensor& b) {
  if (a.dim() == 0 || b.dim() == 0) return std::max(elements_of(a), elements_of(b));
  const double columns = b.dim() >= 2 ? static_cast<double>(b.size(-1)) : 1.0;
  const double rows = a.dim() >= 2 ? static_cast<double>(a.size(-2)) : 1.0;
  return std::max(elements_of(a) * columns, elements_of(b) * rows);
}

// Output positions of a sliding window along each spatial dimension (the last `kernel.size()`
// dimensions of `input`), times the leading elements: the windows a pooling or convolution
// computes. `stride` empty: the kernel's size (pooling's default).
double window_positions(const at::Tensor& input, const std::vector<int64_t>& kernel,
                        const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                        const std::vector<int64_t>& dilation, bool ceil_mode) {
  const size_t spatial = kernel.size();
  if (spatial == 0 || static_cast<size_t>(input.dim()) < spatial) return elements_of(input);
  double positions = 1;
  for (size_t i = 0; i < static_cast<size_t>(input.dim()) - spatial; ++i) {
    positions *= static_cast<double>(input.size(static_cast<int64_t>(i)));
  }
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t size = input.size(input.dim() - static_cast<int64_t>(spatial - i));
    const double k = static_cast<double>(kernel[i]);
    const double s = static_cast<double>(std::max<int64_t>(1, item(stride, i, kernel[i])));
    const double p = static_cast<double>(item(padding, i, 0));
    const double d = static_cast<double>(item(dilation, i, 1));
    const double span = static_cast<double>(size) + 2 * p - d * (k - 1) - 1;
    // ceil_mode can add one window.
    positions *= span < 0 ? 0.0 : std::floor(span / s) + (ceil_mode ? 2 : 1);
  }
  return positions;
}

double product(const std::vector<int64_t>& values) {
  double p = 1;
  for (int64_t v : values) p *= static_cast<double>(std::max<int64_t>(v, 0));
  return p;
}

// einsum's multiply-adds: the product of the sizes of its distinct subscripts (each once),
// times the elements the ellipsis stands for.
double einsum_multiply_adds(const std::string& equation, const std::vector<at::Tensor>& operands) {
  double sizes[128] = {};
  double ellipsis = 1;
  size_t operand = 0;
  const std::string inputs = equation.substr(0, equation.find("->"));
  size_t start = 0;
  while (start <= inputs.size() && operand < operands.size()) {
    size_t end = inputs.find(',', start);
    if (end == std::string::npos) end = inputs.size();
    const std::string term = inputs.substr(start, end - start);
    const at::Tensor& t = operands[operand++];
    int64_t dim = 0;
    int64_t letters = 0;
    for (char c : term) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
    const int64_t covered = t.dim() - letters;
    for (size_t i = 0; i < term.size(); ++i) {
      const char c = term[i];
      if (c == '.' && term.compare(i, 3, "...") == 0) {
        double n = 1;
        for (int64_t j = 0; j < covered && dim < t.dim(); ++j) {
          n *= static_cast<double>(t.size(dim++));
        }
        ellipsis = std::max(ellipsis, n);
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(c)) && dim < t.dim()) {
        double& size = sizes[static_cast<unsigned char>(c) & 127];
        size = std::max(size, static_cast<double>(t.size(dim++)));
      }
    }
    start = end + 1;
  }
  double total = ellipsis;
  for (double size : sizes) {
    if (size > 0) total *= size;
  }
  return total;
}

}  // namespace

std::string OpCost::str() const {
  if (multiply_adds > 0 && elements > 0) {
    return fmt::format("{:.2g} multiply-adds and {:.2g} elements", multiply_adds, elements);
  }
  if (multiply_adds > 0) return fmt::format("{:.2g} multiply-adds", multiply_adds);
  return fmt::format("{:.2g} elements", elements);
}

OpCost op_cost(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  std::string_view op = schema.name();
  if (op.rfind("aten::", 0) == 0) op.remove_prefix(6);
  OpCost cost;
  if (reads_metadata_only(op) || is_view(schema)) return cost;
  auto tensor = [&](const char* name) { return tensor_arg(schema, args, name); };
  // Matrix products.
  if (op == "mm" || op == "bmm" || op == "matmul") {
    const at::Tensor* a = tensor("self");
    const at::Tensor* b = tensor(op == "matmul" ? "other" : "mat2");
    if (a && b) cost.multiply_adds = matmul_multiply_adds(*a, *b);
  } else if (op == "addmm" || op == "baddbmm" || op == "addbmm") {
    const at::Tensor* a = tensor(op == "addmm" ? "mat1" : "batch1");
    const at::Tensor* b = tensor(op == "addmm" ? "mat2" : "batch2");
    if (a && b) cost.multiply_adds = matmul_multiply_adds(*a, *b);
  } else if (op == "mv" || op == "addmv") {
    if (const at::Tensor* m = tensor("mat")) cost.multiply_adds = elements_of(*m);
  } else if (op == "linear") {
    const at::Tensor* x = tensor("input");
    const at::Tensor* w = tensor("weight");
    if (x && w) cost.multiply_adds = elements_of(*x) * (w->dim() >= 2 ? w->size(0) : 1);
  } else if (op == "bilinear") {
    const at::Tensor* x = tensor("input1");
    const at::Tensor* w = tensor("weight");
    if (x && w && x->dim() > 0 && x->size(-1) > 0) {
      cost.multiply_adds = elements_of(*x) / static_cast<double>(x->size(-1)) * elements_of(*w);
    }
  } else if (op == "cdist" || op == "_cdist_forward") {
    const at::Tensor* a = tensor("x1");
    const at::Tensor* b = tensor("x2");
    if (a && b && b->dim() >= 2) cost.multiply_adds = elements_of(*a) * b->size(-2);
  } else if (op == "einsum") {
    const c10::IValue* equation = arg(schema, args, "equation");
    const c10::IValue* operands = arg(schema, args, "tensors");
    if (equation && equation->isString() && operands && operands->isTensorList()) {
      cost.multiply_adds =
          einsum_multiply_adds(equation->toStringRef(), operands->toTensorVector());
    }
  } else if (op.find("conv") != std::string_view::npos && tensor("weight") && tensor("input")) {
    // convolution, _convolution, conv1d/2d/3d, conv_transpose1d/2d/3d, conv_tbc.
    const at::Tensor& input = *tensor("input");
    const at::Tensor& weight = *tensor("weight");
    const bool transposed =
        op.rfind("conv_transpose", 0) == 0 || bool_arg(schema, args, "transposed");
    if (op == "conv_tbc") {
      // input [time, batch, in], weight [kernel, in, out]: each (time, batch) row meets every
      // weight.
      if (input.dim() == 3 && input.size(2) > 0) {
        cost.multiply_adds =
            elements_of(input) / static_cast<double>(input.size(2)) * elements_of(weight);
      }
    } else if (transposed) {
      // weight [in, out / groups, kernel…]: each input element meets a kernel's worth of
      // weights per output channel of its group.
      if (weight.dim() > 0 && weight.size(0) > 0) {
        cost.multiply_adds =
            elements_of(input) * elements_of(weight) / static_cast<double>(weight.size(0));
      }
    } else if (weight.dim() > 2 && input.dim() >= weight.dim()) {
      std::vector<int64_t> kernel(weight.sizes().begin() + 2, weight.sizes().end());
      const double windows = window_positions(input, kernel, int_list(schema, args, "stride"),
                                              int_list(schema, args, "padding"),
                                              int_list(schema, args, "dilation"), false);
      // Per window, leading positions hold the batch and the input channels: one window per
      // batch element and output channel reads C_in / groups · kernel weights.
      const double channels = static_cast<double>(std::max<int64_t>(input.size(1), 1));
      cost.multiply_adds = windows / channels * elements_of(weight);
    }
  } else if (op.find("pool") != std::string_view::npos &&
             op.find("adaptive") == std::string_view::npos) {
    // max_pool1d/2d/3d (with_indices too), avg_pool1d/2d/3d: each window's elements.
    const at::Tensor* input = tensor("self");
    const std::vector<int64_t> kernel = int_list(schema, args, "kernel_size");
    if (input && !kernel.empty()) {
      std::vector<int64_t> full_kernel = kernel;
      // A kernel given once stands for every spatial dimension: 1-D, 2-D or 3-D by the name.
      const size_t spatial = op.find("3d") != std::string_view::npos   ? 3
                             : op.find("2d") != std::string_view::npos ? 2
                                                                       : 1;
      full_kernel.resize(spatial, kernel.back());
      cost.elements =
          window_positions(*input, full_kernel, int_list(schema, args, "stride"),
                           int_list(schema, args, "padding"), int_list(schema, args, "dilation"),
                           bool_arg(schema, args, "ceil_mode")) *
          product(full_kernel);
    }
  } else if (op == "lstm" || op == "gru" || op == "rnn_tanh" || op == "rnn_relu") {
    // Every weight meets every step of every sequence: rows of the input times the weights.
    const at::Tensor* input = tensor("input");
    if (!input) input = tensor("data");  // the packed overloads
    const c10::IValue* params = arg(schema, args, "params");
    if (input && input->dim() > 0 && input->size(-1) > 0 && params && params->isTensorList()) {
      double weights = 0;
      for (const at::Tensor& w : params->toTensorVector())
        weights += w.defined() ? elements_of(w) : 0;
      cost.multiply_adds = elements_of(*input) / static_cast<double>(input->size(-1)) * weights;
    }
  } else if (sorts(op)) {
    if (const at::Tensor* self = tensor("self")) {
      cost.elements = elements_of(*self) * std::log2(elements_of(*self) + 2);
    }
  }
  cost.elements += elements_read(args);
  return cost;
}

ScopedTimeBudget::ScopedTimeBudget(double seconds, std::string what) {
  if (active_deadline != nullptr || !(seconds > 0)) return;  // the outer budget counts
  state_ = std::make_unique<State>();
  state_->seconds = seconds;
  state_->what = std::move(what);
  state_->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(std::min(seconds, 1e9)));
  active_deadline = state_.get();
}

ScopedTimeBudget::~ScopedTimeBudget() {
  if (state_) active_deadline = nullptr;
}

bool time_budget_active() { return active_deadline != nullptr; }

void check_deadline(const std::string& doing) {
  const ScopedTimeBudget::State* budget = active_deadline;
  if (budget == nullptr || budget->left() > 0) return;
  throw BudgetExceeded(
      fmt::format("{} ran past {} of {:g} s", doing, budget->what, budget->seconds));
}

void check_op_time(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  const ScopedTimeBudget::State* budget = active_deadline;
  if (budget == nullptr) return;
  const double left = budget->left();
  if (left <= 0) {
    throw BudgetExceeded(fmt::format("{} was not started: the run is past {} of {:g} s",
                                     schema.name(), budget->what, budget->seconds));
  }
  const OpCost cost = op_cost(schema, args);
  if (cost.seconds() > left) {
    throw BudgetExceeded(fmt::format(
        "{} would take {}, at least {:.3g} s even at {:g} elements and {:g} multiply-adds a "
        "second: more than is left of {} of {:g} s",
        schema.name(), cost.str(), cost.seconds(), kElementsPerSecond, kMultiplyAddsPerSecond,
        budget->what, budget->seconds));
  }
}

}  // namespace tdfx
