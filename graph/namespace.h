#pragma once

/// \file
/// Namespace: hands out unique Python identifiers by torch.fx's rules.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
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
  static bool is_reserved(std::string_view name);

 private:
  /// Records `name`; false when it was used already.
  bool insert(std::string_view name) { return used_.insert(name).second; }

  /// Strings with a number each, in one character buffer and an open-addressing table of
  /// (hash, offset, length): adding a name allocates nothing but the buffer's and the table's
  /// growth, where a set of std::string allocates per name (every node of every graph is named).
  class StringTable {
   public:
    /// The entry for `key`, added with value 0 if absent; `.second` is true when added. The
    /// reference is valid until the next insert.
    std::pair<long long*, bool> insert(std::string_view key);
    bool contains(std::string_view key) const;

   private:
    struct Slot {
      size_t hash = 0;
      uint32_t offset = 0;
      uint32_t stored = 0;  // the key's length + 1; 0 for an empty slot
      long long value = 0;
    };
    /// The slot holding `key`, or the empty slot where it would go.
    size_t find(std::string_view key, size_t hash) const;
    void grow();
    std::string chars_;
    std::vector<Slot> slots_;  // a power of two in size, at most half full
    size_t count_ = 0;
  };

  /// The names used.
  StringTable used_;
  /// Per base name, the highest suffix handed out while counting up from the
  /// bare base: keeps naming a long chain of `relu`s linear.
  StringTable highest_suffix_;
};

/// torch.fx's name sanitising: runs of characters illegal in an identifier
/// become one `_`, and a leading digit gets a `_` before it (`obs-1` → `obs_1`).
std::string identifier_from(std::string_view raw);

/// A name a Python function may take as a parameter: identifier_from(raw),
/// with `_` appended to a keyword (`in` → `in_`) and to `self`, which a forward
/// takes first. Builtins (`input`) stay.
std::string parameter_name(std::string_view raw);

/// torch.fx's `_snake_case`: `LayerNorm` → `layer_norm`.
std::string snake_case(std::string_view name);

}  // namespace tdfx
