#pragma once

/// \file
/// Argument: one argument of a graph node — a reference to another node, or a
/// constant (None, bool, int, float, string, nested key, dtype, memory format,
/// layout, device), or a list/tuple of arguments.

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tdfx/core/nested_key.h"

namespace tdfx {

class Node;
struct Argument;

/// A Python list (`[a, b]`) or tuple (`(a, b)`) of arguments.
struct ArgumentList {
  /// The items, in order.
  std::vector<Argument> items;
  /// True for a tuple, false for a list.
  bool is_tuple = false;
};

/// Python's `None`.
struct None {
  /// None equals None.
  friend bool operator==(None, None) { return true; }
};

/// One node argument. Implicit from its alternatives: `Argument(node)`,
/// `Argument(int64_t{1})`, `Argument(0.5)`, `Argument(NestedKey{"a", "b"})`,
/// `Argument(c10::MemoryFormat::ChannelsLast)`. A dtype, memory format or layout
/// is its own alternative, not an int, so that it prints as Python names it
/// (`torch.channels_last`); an operator receives it as the int c10 passes.
struct Argument {
  /// What an argument may hold.
  using Value = std::variant<None, bool, int64_t, double, std::string, NestedKey, c10::ScalarType,
                             c10::MemoryFormat, c10::Layout, c10::Device, Node*, ArgumentList>;
  /// The argument's value.
  Value value;

  Argument() : value(None{}) {}
  ///@{
  /// An argument holding `v` (a `None`, a number, a string, a key, a dtype, memory format, layout
  /// or device, a node, a list): implicit, so that `g.call_function(t, {x, 1, "a"})` reads as
  /// Python. An `int` is held as an int64_t, a `const char*` as a string.
  Argument(None) : value(None{}) {}                   // NOLINT
  Argument(bool v) : value(v) {}                      // NOLINT
  Argument(int v) : value(int64_t{v}) {}              // NOLINT
  Argument(int64_t v) : value(v) {}                   // NOLINT
  Argument(double v) : value(v) {}                    // NOLINT
  Argument(const char* v) : value(std::string(v)) {}  // NOLINT
  Argument(std::string v) : value(std::move(v)) {}    // NOLINT
  Argument(NestedKey v) : value(std::move(v)) {}      // NOLINT
  Argument(c10::ScalarType v) : value(v) {}           // NOLINT
  Argument(c10::MemoryFormat v) : value(v) {}         // NOLINT
  Argument(c10::Layout v) : value(v) {}               // NOLINT
  Argument(c10::Device v) : value(v) {}               // NOLINT
  Argument(Node* v) : value(v) {}                     // NOLINT
  Argument(ArgumentList v) : value(std::move(v)) {}   // NOLINT
  ///@}

  template <typename T>
  /// True when the argument holds a `T`.
  bool is() const {
    return std::holds_alternative<T>(value);
  }
  template <typename T>
  /// The `T` it holds; std::bad_variant_access when it holds another type.
  const T& as() const {
    return std::get<T>(value);
  }
  /// The node referenced, or nullptr for a constant or a list.
  Node* node() const { return is<Node*>() ? as<Node*>() : nullptr; }
};

/// A Python list argument: `list({a, b})`.
Argument list(std::vector<Argument> items);
/// A Python tuple argument: `tuple({a, b})`.
Argument tuple(std::vector<Argument> items);

/// Positional arguments of a node.
using Args = std::vector<Argument>;
/// Keyword arguments of a node, in insertion order.
using Kwargs = std::vector<std::pair<std::string, Argument>>;

/// Calls `fn` on every node referenced by `arg`, depth first, left to right
/// (a null Node* included: only arguments not yet in a graph can hold one).
void for_each_node(const Argument& arg, const std::function<void(Node*)>& fn);
/// A copy of `arg` with every referenced node replaced by `fn(node)`.
Argument map_nodes(const Argument& arg, const std::function<Node*(Node*)>& fn);

}  // namespace tdfx
