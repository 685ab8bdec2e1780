#include "tdfx/core/memory_budget.h"

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

void check_list_op(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args) {
  ScopedMemoryBudget::State* budget = active;
  if (budget == nullptr || args.empty() || !args[0].isTensor()) return;
  const std::string& name = schema.name();
  if (name != "aten::unbind" && name != "aten::split" && name != "aten::unsafe_split" &&
      name != "aten::chunk" && name != "aten::tensor_split") {
    return;
  }
  const at::Tensor& self = args[0].toTensor();
  if (self.dim() == 0) return;
  int64_t dim = int_arg(schema, args, "dim", 0);
  if (dim < 0) dim += self.dim();
  if (dim < 0 || dim >= self.dim()) return;  // the op itself says what is wrong
  const int64_t size = self.size(dim);
  int64_t count = 1;
  if (name == "aten::unbind") {
    count = size;
  } else if (name == "aten::chunk") {
    count = std::min(int_arg(schema, args, "chunks", 1), std::max<int64_t>(size, 1));
  } else if (name == "aten::tensor_split") {
    count = int_arg(schema, args, "sections", 1);
  } else {  // split by a size
    const int64_t step = int_arg(schema, args, "split_size", 1);
    count = step > 0 ? (size + step - 1) / step : 1;
  }
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(count, 0)) * kTensorBookkeeping;
  if (bytes > budget->left()) {
    budget->refuse(fmt::format("{} makes {} tensors, whose bookkeeping takes", name, count), bytes);
  }
}

}  // namespace tdfx
