#pragma once

/// \file
/// A memory budget for running code from strangers (a loaded program): while a
/// ScopedMemoryBudget lives on a thread, LibTorch's CPU allocations on that thread are held to
/// its bytes in all, each one is checked before memory is taken, and each comes back
/// zero-filled (an `aten::empty` of a stranger's program never shows what was in memory).
///
///     ScopedMemoryBudget budget(256 << 20, "the program");
///     program.module()(inputs);   // an op asking past the budget throws BudgetExceeded
///
/// What counts: the bytes LibTorch's CPU allocator hands out on this thread from the scope's
/// start and has not taken back (the live set, reported through c10's memory-reporting hook),
/// plus what an op takes outside that allocator, checked before it runs
/// (check_unseen_memory): the bookkeeping of the tensors an op returning a list makes
/// (`unbind`, `split`, `chunk`), and the work vectors sorting ops sort in (`sort`, `topk`).

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace c10 {
struct FunctionSchema;
}

namespace tdfx {

/// What an allocation or op past the budget throws: a std::runtime_error, so that a graph run
/// names the node it happened in (RunError: while executing %node: …).
class BudgetExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `bytes` written for a person: `6.4 GB (6,400,000,000 bytes)`.
std::string bytes_text(uint64_t bytes);

/// Holds LibTorch's CPU allocations on this thread to a budget while it lives, as the file comment
/// says; an allocation past it throws BudgetExceeded.
class ScopedMemoryBudget {
 public:
  /// `what` names the budget in messages (`the program's memory budget`, and where to raise
  /// it). Inside another budget on the same thread, the outer one keeps counting and this one
  /// does nothing.
  ScopedMemoryBudget(uint64_t bytes, std::string what);
  ~ScopedMemoryBudget();
  ScopedMemoryBudget(const ScopedMemoryBudget&) = delete;
  ScopedMemoryBudget& operator=(const ScopedMemoryBudget&) = delete;

  /// The most bytes live at once so far.
  uint64_t peak() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<void> guard_;
};

/// True while a ScopedMemoryBudget is active on this thread.
bool memory_budget_active();

/// The most dimensions a tensor may have in an op run under a budget.
inline constexpr int64_t kMaxDims = 64;

/// Before an op runs under a budget, what it would take outside LibTorch's allocator; each is
/// refused with BudgetExceeded when it would not fit in what is left:
/// - an op returning a list of tensors (`aten::unbind`, `split`, `unsafe_split`,
///   `split_with_sizes`, `unsafe_split_with_sizes`, `chunk`, `unsafe_chunk`, `tensor_split`):
///   the tensors it would make, a few hundred bytes of bookkeeping each;
/// - a sorting op (`sort`, `argsort`, `msort`, `topk`, `kthvalue`, `median`, `nanmedian`,
///   `mode`): the work vectors it sorts in, 16 bytes per element of the dimension sorted, one
///   per slice sorted at once (up to one per thread);
/// - any op taking a tensor of more than kMaxDims dimensions is refused outright: LibTorch
///   keeps sizes and strides (and an op's per-dimension state) where no budget sees them.
/// Does nothing without a budget.
void check_unseen_memory(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

}  // namespace tdfx
