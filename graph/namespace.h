#pragma once

/// \file
/// Namespace: hands out unique Python identifiers by torch.fx's rules.

#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tdfx {

/// Makes names unique the way torch.fx's `_Namespace.create_name` does:
/// illegal characters become `_`, a leading digit gets a `_` prefix, a
/// trailing `_<n>` is taken as a counter, and Python keywords, builtins and
/// FX's own globals (`torch`, `inf`, ...) are never handed out.
///
///     Namespace ns;
///     ns.create_name("add");    // "add"
///     ns.create_name("add");    // "add_1"
///     ns.create_name("0.fc");   // "_0_fc"
///     ns.create_name("input");  // "input_1" (a builtin)
class Namespace {
 public:
  /// A fresh name derived from `candidate`, recorded as used.
  std::string create_name(std::string_view candidate);
  /// Records `name` as used without changing it.
  void reserve(const std::string& name) { insert(name); }
  /// True when `name` was handed out or reserved.
  bool contains(const std::string& name) const;

  /// True for Python keywords, builtins and FX's reserved globals.
  static bool is_reserved(const std::string& name);

 private:
  /// Records `name`; false when it was used already.
  bool insert(const std::string& name);

  /// The names used: in `small_` while there are few (most namespaces are a leaf call's or a
  /// body graph's, of a handful of names, and a vector costs one allocation), in `used_` once
  /// there are kSmall.
  static constexpr size_t kSmall = 16;
  std::vector<std::string> small_;
  std::unordered_set<std::string> used_;
  /// Per base name, the highest suffix handed out while counting up from the
  /// bare base: keeps naming a long chain of `relu`s linear.
  std::unordered_map<std::string, long long> highest_suffix_;
};

/// torch.fx's name sanitising: runs of characters illegal in an identifier
/// become one `_`, and a leading digit gets a `_` before it (`obs-1` → `obs_1`).
std::string identifier_from(std::string_view raw);

/// A name a Python function may take as a parameter: identifier_from(raw),
/// with `_` appended to a keyword (`in` → `in_`). Builtins (`input`) stay.
std::string parameter_name(std::string_view raw);

/// torch.fx's `_snake_case`: `LayerNorm` → `layer_norm`.
std::string snake_case(std::string_view name);

}  // namespace tdfx
