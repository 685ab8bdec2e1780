#pragma once

/// \file
/// A time budget for running code from strangers (a loaded program): while a ScopedTimeBudget
/// lives on a thread, each op a compiled graph runs on that thread is checked before it starts
/// (check_op_time). It is refused with BudgetExceeded when the budget's deadline has passed, or
/// when the op's own cost could not be paid in what is left even at the fastest a CPU goes:
///
///     ScopedTimeBudget budget(30, "the program's time budget");
///     program.module()(inputs);   // `amax` over a 2^40-element expanded view: refused at once
///
/// The cost of an op (op_cost) is counted from its arguments, by op family: the elements it
/// reads (a reduction over an expanded view reads every element the view shows), the
/// multiply-adds of the matrix products, convolutions and recurrent layers, each pooling
/// window's elements, n log n for a sort. Views and size queries cost nothing. An op is refused
/// only when even kElementsPerSecond and kMultiplyAddsPerSecond, rates above what this
/// library's CPU kernels reach, would not finish it in time; an op under that bound that runs
/// slower still runs to its end, and the deadline stops the next one.

#include <ATen/core/ivalue.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace c10 {
struct FunctionSchema;
}

namespace tdfx {

///@{
/// Elements read or written per second, and multiply-adds per second, above what LibTorch's
/// CPU kernels reach on one machine: an op whose cost at these rates is past the time left is
/// sure not to finish in it.
inline constexpr double kElementsPerSecond = 1e10;
inline constexpr double kMultiplyAddsPerSecond = 2e11;
///@}

/// What an op costs (op_cost).
struct OpCost {
  /// Elements read or written.
  double elements = 0;
  /// Multiply-adds (matrix products, convolutions, recurrent layers).
  double multiply_adds = 0;
  /// The least time it takes, at kElementsPerSecond and kMultiplyAddsPerSecond.
  double seconds() const {
    return elements / kElementsPerSecond + multiply_adds / kMultiplyAddsPerSecond;
  }
  /// `2.2e+12 elements` or `6.9e+10 multiply-adds` (both when there are both).
  std::string str() const;
};

/// The cost of calling the op `schema` on `args` (its boxed arguments), by the rules in the
/// file comment.
OpCost op_cost(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

/// Holds the ops a compiled graph runs on this thread to a deadline while it lives, as the file
/// comment says; an op past it is refused with BudgetExceeded.
class ScopedTimeBudget {
 public:
  /// `seconds` from now; `what` names the budget in messages (`the program's time budget`,
  /// and where to raise it). Inside another budget on the same thread, the outer one keeps its
  /// deadline and this one does nothing. `seconds` <= 0: no budget.
  ScopedTimeBudget(double seconds, std::string what);
  ~ScopedTimeBudget();
  ScopedTimeBudget(const ScopedTimeBudget&) = delete;
  ScopedTimeBudget& operator=(const ScopedTimeBudget&) = delete;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

/// True while a ScopedTimeBudget is active on this thread.
bool time_budget_active();

/// Before an op runs under a time budget: BudgetExceeded when the deadline has passed, or when
/// op_cost(schema, args).seconds() is more than what is left. Does nothing without a budget.
void check_op_time(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);

/// BudgetExceeded when the active budget's deadline has passed (`doing`: what was under way,
/// `drawing the graph`); nothing without a budget. For work that is not ops.
void check_deadline(const std::string& doing);

}  // namespace tdfx
