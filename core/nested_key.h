#pragma once

/// \file
/// NestedKey: the address of an entry in a (nested) TensorDict — one string,
/// or a tuple of strings for an entry inside sub-dictionaries.

#include <fmt/format.h>

#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace tdfx {

/// A key of a TensorDict: `"x"` or `{"input", "x"}`. Built implicitly from a
/// string or a braced list of strings; never empty, no empty part.
///
///     NestedKey a = "x";                // prints 'x'
///     NestedKey b = {"some", "key"};    // prints ('some', 'key'), joined("_") == "some_key"
class NestedKey {
 public:
  ///@{
  /// From a string: a key of one part, `'x'`. From a braced list: a tuple key, `('input', 'x')`,
  /// even of one part (`{"x"}` is `('x',)`). From a vector: a tuple when it has several parts,
  /// the string key when it has one. KeyError when there is no part, or an empty one.
  NestedKey(const char* key);                           // NOLINT(google-explicit-constructor)
  NestedKey(std::string key);                           // NOLINT(google-explicit-constructor)
  NestedKey(std::string_view key);                      // NOLINT(google-explicit-constructor)
  NestedKey(std::initializer_list<std::string> parts);  // NOLINT(google-explicit-constructor)
  explicit NestedKey(std::vector<std::string> parts);
  ///@}

  /// The parts, outermost first.
  const std::vector<std::string>& parts() const { return parts_; }
  /// Number of parts (1 for a plain string key).
  size_t size() const { return parts_.size(); }
  /// True when built from a tuple (even a one-element one), as Python tells
  /// `'a'` from `('a',)`.
  bool is_tuple() const { return is_tuple_; }
  /// The innermost part.
  const std::string& leaf() const { return parts_.back(); }
  /// The key without its last part; requires size() > 1.
  NestedKey parent() const;
  /// This key followed by `child`'s parts: `NestedKey("a").join("b")` is ("a", "b").
  NestedKey join(const NestedKey& child) const;
  /// True when `prefix`'s parts start this key.
  bool starts_with(const NestedKey& prefix) const;

  /// Parts joined by `separator`: ("some", "key") → "some_key".
  std::string joined(std::string_view separator) const;
  /// As Python prints it: 'a' or ('a', 'b').
  std::string repr() const;
  /// Without quotes, as torch.fx prints arguments: a or (a, b).
  std::string str() const;

  /// Equal when their parts are (`'x'` and `('x',)` are equal).
  friend bool operator==(const NestedKey& a, const NestedKey& b) { return a.parts_ == b.parts_; }
  /// Not equal: !(a == b).
  friend bool operator!=(const NestedKey& a, const NestedKey& b) { return !(a == b); }
  /// Ordered by their parts, for maps and sorting.
  friend bool operator<(const NestedKey& a, const NestedKey& b) { return a.parts_ < b.parts_; }

 private:
  void validate() const;

  std::vector<std::string> parts_;
  bool is_tuple_ = false;
};

/// Writes key.repr(), as Python prints the key: `'x'`, `('input', 'x')`.
std::ostream& operator<<(std::ostream& os, const NestedKey& key);

/// A list of keys printed as Python prints a list: ['x', ('a', 'b')].
std::string repr(const std::vector<NestedKey>& keys);

}  // namespace tdfx

template <>
struct fmt::formatter<tdfx::NestedKey> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const tdfx::NestedKey& key, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(key.repr(), ctx);
  }
};
