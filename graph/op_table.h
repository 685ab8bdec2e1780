#pragma once

/// \file
/// The aten operators tdfx knows, in one table: a row per operator, keyed by its name without
/// namespace or overload (`add`, `elu_`, `max`), holding the facts the libraries ask of it.
/// The load allowlist and the memory budget's counted creations (export/op_policy.h), the
/// method faces of printed code (tracer/method_calls.h), the effects the dead-code rules keep
/// (graph/effects.h) and the ONNX rules, which are registered only under a name the table has
/// (onnx/rules/rules.h), all read it. An operator the table has no row for has none of the
/// facts. Internal to tdfx's libraries: not installed.
///
///     find_op("dropout")->has(OpFact::kDropoutLike)  // true: random only in training
///     find_op("dropout")->training_arg               // 2: `dropout(x, p, train)`
///     op_has("item", OpFact::kMethodOnly)            // true: `x.item()`; no torch.item
///     find_op("as_strided")                          // nullptr: not loadable, no other fact

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tdfx::detail {

/// One fact about an operator. A row's facts are several of these joined with `|`.
enum class OpFact : uint16_t {
  /// No fact.
  kNone = 0,
  /// A program read from a file may call it (export/op_policy.h's allowlist; is_allowed_operator
  /// also allows the in-place `foo_` of a loadable `foo`).
  kLoadable = 1 << 0,
  /// An operator whose int argument counts the elements it makes (`arange`, `eye`; each row of
  /// `multinomial` its `num_samples`), which the memory budget bounds as it bounds a list of
  /// sizes.
  kCountedCreation = 1 << 1,
  /// Python has it as a Tensor method but not as a torch function (`view`, `item`), so printed
  /// code calls it as a method.
  kMethodOnly = 1 << 2,
  /// An in-place operator Python has as a function only (`torch.dropout_`,
  /// `torch._C._nn.elu_`), so printed code does not call it as a method.
  kInPlaceFunction = 1 << 3,
  /// Draws random numbers whatever its arguments (`rand`, `bernoulli`).
  kRandom = 1 << 4,
  /// Draws random numbers only when its training argument (OpRow::training_arg) is true: the
  /// dropouts and `rrelu`.
  kDropoutLike = 1 << 5,
  /// Allocates a tensor it does not write (`empty`, `empty_like`): no effect to keep, but its
  /// value means nothing until a later op writes it.
  kUninitialised = 1 << 6,
  /// A normalisation whose kernel may update its running statistics (arguments 3 and 4) in
  /// training mode although its schema does not say so (`batch_norm`).
  kRunningStats = 1 << 7,
};

/// The facts of both `a` and `b`.
constexpr OpFact operator|(OpFact a, OpFact b) {
  return static_cast<OpFact>(static_cast<uint16_t>(a) | static_cast<uint16_t>(b));
}

/// One operator's row.
struct OpRow {
  /// The operator's name, without `aten::` or overload (`add`, `elu_`).
  std::string_view name;
  /// Its facts, joined with `|`.
  OpFact facts = OpFact::kNone;
  /// For an OpFact::kDropoutLike operator, the position of its training argument (2 for
  /// `dropout(x, p, train)`, 3 for `rrelu(x, lower, upper, training)`); 0 otherwise.
  uint8_t training_arg = 0;
  /// Why a loaded program may not call it although it is pure math (an index ATen does not
  /// check), as refusal_reason gives it; null when there is no particular reason.
  const char* refusal = nullptr;

  /// True when the row has `fact`.
  constexpr bool has(OpFact fact) const {
    return (static_cast<uint16_t>(facts) & static_cast<uint16_t>(fact)) != 0;
  }
};

/// The row of the operator `name` (`add`, `elu_`: no `aten::`, no overload), found by
/// bisection; null when the table has none.
const OpRow* find_op(std::string_view name);

/// True when the operator `name` has a row with `fact`; false for a name the table lacks.
bool op_has(std::string_view name, OpFact fact);

/// Every row, sorted by name without repeats, as a range for `for` loops.
struct OpRows {
  /// The first row.
  const OpRow* begin() const { return first; }
  /// One past the last row.
  const OpRow* end() const { return last; }
  /// How many rows.
  size_t size() const { return static_cast<size_t>(last - first); }
  /// The first row.
  const OpRow* first;
  /// One past the last row.
  const OpRow* last;
};

/// The whole table, for allowed_operators(), tools and tests.
OpRows op_rows();

}  // namespace tdfx::detail
