#include "tdfx/core/memory_budget.h"

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace tdfx {

struct ScopedMemoryBudget::State : c10::MemoryReportingInfoBase {
  uint64_t budget = 0;
  std::string what;
  /// Bytes allocated and not freed since the scope began (negative when it freed more of what
  /// was there before).
  std::atomic<int64_t> live{0};
  std::atomic<int64_t> peak{0};

  void reportMemoryUsage(void* /*ptr*/, int64_t alloc_size, int64_t /*total_allocated*/,
                         int64_t /*total_reserved*/, c10::Device device) override {
    if (!device.is_cpu()) return;
    const int64_t now = live += alloc_size;
    int64_t top = peak.load();
    while (now > top && !peak.compare_exchange_weak(top, now)) {
    }
  }
  bool memoryProfilingEnabled() const override { return true; }

  /// What is left of the budget now.
  uint64_t left() const {
    const int64_t used = std::max<int64_t>(0, live.load());
    return static_cast<uint64_t>(used) >= budget ? 0 : budget - static_cast<uint64_t>(used);
  }

  [[noreturn]] void refuse(const std::string& asked, uint64_t bytes) const {
    throw BudgetExceeded(
        fmt::format("{} {}, with {} live already; {} is {}", asked, bytes_text(bytes),
                    bytes_text(static_cast<uint64_t>(std::max<int64_t>(0, live.load()))), what,
                    bytes_text(budget)));
  }
};

namespace {

thread_local ScopedMemoryBudget::State* active = nullptr;

// LibTorch's CPU allocator with the active budget's check before each allocation and zeros in
// what it hands out. Without a budget it is the allocator it wraps. Frees go through the
// wrapped allocator's own DataPtr (the budget's accounting of them is c10's report).
//
// Installed by one thread while others may already allocate: c10 publishes the allocator
// through a plain pointer, so what it wraps is an atomic, stored before it is installed and
// loaded with acquire (without it, ThreadSanitizer saw a thread read `base_` that another had
// just written).
class BudgetAllocator final : public c10::Allocator {
 public:
  explicit BudgetAllocator(c10::Allocator* base) { base_.store(base, std::memory_order_release); }

  c10::DataPtr allocate(size_t bytes) const override {
    c10::Allocator* base = base_.load(std::memory_order_acquire);
    ScopedMemoryBudget::State* budget = active;
    if (budget == nullptr) return base->allocate(bytes);
    if (bytes > budget->left()) budget->refuse("an allocation of", bytes);
    c10::DataPtr data = base->allocate(bytes);
    if (bytes > 0 && data.get() != nullptr) std::memset(data.get(), 0, bytes);
    return data;
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return base_.load(std::memory_order_acquire)->raw_deleter();
  }

 private:
  std::atomic<c10::Allocator*> base_;
};

void install_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    static BudgetAllocator allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
  });
}

// What one tensor's bookkeeping takes (TensorImpl, storage handle, sizes and strides), an
// upper bound for the tensors a list op makes without allocating.
constexpr uint64_t kTensorBookkeeping = 512;

int64_t int_arg(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                const char* name, int64_t otherwise) {
  const auto index = schema.argumentIndexWithName(name);
  if (!index || static_cast<size_t>(*index) >= args.size() || !args[*index].isInt())
    return otherwise;
  return args[*index].toInt();
}

}  // namespace

std::string bytes_text(uint64_t bytes) {
  std::string digits = std::to_string(bytes);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  const double b = static_cast<double>(bytes);
  if (bytes < 1000) return fmt::format("{} bytes", bytes);
  const char* unit = b >= 1e12 ? "TB" : b >= 1e9 ? "GB" : b >= 1e6 ? "MB" : "kB";
  const double scaled = b >= 1e12 ? b / 1e12 : b >= 1e9 ? b / 1e9 : b >= 1e6 ? b / 1e6 : b / 1e3;
  return fmt::format("{:.3g} {} ({} bytes)", scaled, unit, digits);
}

ScopedMemoryBudget::ScopedMemoryBudget(uint64_t bytes, std::string what) {
  if (active != nullptr) return;  // the outer budget counts
  install_allocator();
  state_ = std::make_shared<State>();
  state_->budget = bytes;
  state_->what = std::move(what);
  guard_ = std::make_shared<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, state_);
  active = state_.get();
}

ScopedMemoryBudget::~ScopedMemoryBudget() {
  if (!state_) return;
  active = nullptr;
  guard_.reset();
}

uint64_t ScopedMemoryBudget::peak() const {
  return state_ ? static_cast<uint64_t>(std::max<int64_t>(0, state_->peak.load())) : 0;
}

bool memory_budget_active() { return active != nullptr; }

namespace {

// The number of items of the list argument `name`, or -1 when there is none.
int64_t list_length(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                    const char* name) {
  const auto index = schema.argumentIndexWithName(name);
  if (!index || static_cast<size_t>(*index) >= args.size() || !args[*index].isList()) return -1;
  return static_cast<int64_t>(args[*index].toListRef().size());
}

// `dim` of a tensor of `rank` dimensions as an index, or -1 when it is out of range (the op
// itself then says what is wrong).
int64_t wrapped_dim(int64_t dim, int64_t rank) {
  if (dim < 0) dim += rank;
  return dim >= 0 && dim < rank ? dim : -1;
}

// The tensors an op returning a list of them makes, or 0 for another op.
int64_t tensors_made(const std::string& name, const c10::FunctionSchema& schema,
                     const std::vector<c10::IValue>& args, int64_t size) {
  if (name == "aten::unbind") return size;
  if (name == "aten::chunk" || name == "aten::unsafe_chunk") {
    return std::min(int_arg(schema, args, "chunks", 1), std::max<int64_t>(size, 1));
  }
  if (name == "aten::tensor_split") {
    const int64_t indices = list_length(schema, args, "indices");
    return indices >= 0 ? indices + 1 : int_arg(schema, args, "sections", 1);
  }
  if (name == "aten::split_with_sizes" || name == "aten::unsafe_split_with_sizes") {
    return std::max<int64_t>(list_length(schema, args, "split_sizes"), 0);
  }
  if (name == "aten::split" || name == "aten::unsafe_split") {
    const int64_t sizes = list_length(schema, args, "split_size");  // split.sizes
    if (sizes >= 0) return sizes;
    const int64_t step = int_arg(schema, args, "split_size", 1);
    return step > 0 ? (size + step - 1) / step : 1;
  }
  return 0;
}

// Sorting ops whose CPU kernels sort each slice in a work vector of their own, one (value,
// index) pair per element, outside LibTorch's allocator.
bool sorts_in_work_memory(const std::string& name) {
  return name == "aten::sort" || name == "aten::argsort" || name == "aten::msort" ||
         name == "aten::topk" || name == "aten::kthvalue" || name == "aten::median" ||
         name == "aten::nanmedian" || name == "aten::mode";
}

}  // namespace

void check_unseen_memory(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  ScopedMemoryBudget::State* budget = active;
  if (budget == nullptr) return;
  const std::string& name = schema.name();
  for (const c10::IValue& arg : args) {
    if (arg.isTensor() && arg.toTensor().dim() > kMaxDims) {
      throw BudgetExceeded(fmt::format(
          "{} takes a tensor of {} dimensions; a program run under a budget may use at most {} "
          "(LibTorch keeps each tensor's sizes and strides outside its allocator, where no "
          "budget sees them)",
          name, arg.toTensor().dim(), kMaxDims));
    }
  }
  if (args.empty() || !args[0].isTensor()) return;
  const at::Tensor& self = args[0].toTensor();
  if (self.dim() == 0) return;
  if (sorts_in_work_memory(name)) {
    const int64_t dim =
        wrapped_dim(int_arg(schema, args, "dim", name == "aten::msort" ? 0 : -1), self.dim());
    if (dim < 0) return;
    const int64_t length = self.size(dim);
    if (length == 0) return;
    // Slices are sorted at once, each in its own work vector, by up to one per thread.
    const int64_t slices = self.numel() / length;
    const int64_t at_once = std::max<int64_t>(1, std::min<int64_t>(slices, at::get_num_threads()));
    const uint64_t bytes = static_cast<uint64_t>(length) * 16 * static_cast<uint64_t>(at_once);
    if (bytes > budget->left()) {
      budget->refuse(fmt::format("{} sorts {} elements at a time in work memory of its own, "
                                 "which takes",
                                 name, length),
                     bytes);
    }
    return;
  }
  const int64_t dim = wrapped_dim(int_arg(schema, args, "dim", 0), self.dim());
  if (dim < 0) return;
  const int64_t count = tensors_made(name, schema, args, self.size(dim));
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(count, 0)) * kTensorBookkeeping;
  if (count > 0 && bytes > budget->left()) {
    budget->refuse(fmt::format("{} makes {} tensors, whose bookkeeping takes", name, count), bytes);
  }
}

}  // namespace tdfx
