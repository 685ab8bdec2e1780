#pragma once

/// \file
/// TensorDict: a nested, insertion-ordered dictionary of tensors that share leading (batch)
/// dimensions, as Python's `tensordict.TensorDict`.

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tdfx/core/nested_key.h"

namespace tdfx {

/// A dictionary of tensors and nested TensorDicts whose leading dimensions all equal
/// `batch_size()`. Entries keep their insertion order; lookups are O(1) per key part.
///
/// Copying a TensorDict copies its structure (nested dicts included) while the tensors share
/// storage, as Python's `td.copy()`; `clone()` copies the tensors too.
///
///     TensorDict td({{"x", at::zeros({4, 3})}}, {4});
///     td.set({"input", "mask"}, at::ones({4}));     // creates sub-dict "input" with batch [4]
///     td.get({"input", "mask"});                    // the tensor
///     td.set("y", at::zeros({5}));                  // ShapeError: does not start with [4]
class TensorDict {
 public:
  /// An empty dict with the given batch size; with a device, every tensor set is moved there.
  explicit TensorDict(std::vector<int64_t> batch_size = {},
                      std::optional<at::Device> device = std::nullopt);
  /// A dict holding `items` (set in order, each checked against `batch_size`).
  TensorDict(std::initializer_list<std::pair<NestedKey, at::Tensor>> items,
             std::vector<int64_t> batch_size = {}, std::optional<at::Device> device = std::nullopt);

  /// Copies the structure; tensors share storage (Python's `td.copy()`).
  TensorDict(const TensorDict& other);
  /// Copies the structure of `other`; tensors share storage.
  TensorDict& operator=(const TensorDict& other);
  /// Moves the entries.
  TensorDict(TensorDict&& other) noexcept;
  /// Moves the entries.
  TensorDict& operator=(TensorDict&& other) noexcept;
  /// Releases the entries (tensors are freed when no other dict or caller holds them).
  ~TensorDict();

  /// The leading dimensions every entry shares.
  const std::vector<int64_t>& batch_size() const { return batch_size_; }
  /// The device every tensor lives on, or nullopt when tensors may differ.
  const std::optional<at::Device>& device() const { return device_; }

  /// Stores `value` at `key`, creating intermediate sub-dicts (with this dict's batch size and
  /// device). Throws ShapeError when the tensor's leading dims differ from the batch size, and
  /// KeyError when a key part names an existing tensor. Calls the KeyAccessHook's on_write.
  TensorDict& set(const NestedKey& key, at::Tensor value);
  /// Stores a copy of the dict `value` at `key`; its batch size must start with this one's.
  TensorDict& set(const NestedKey& key, TensorDict value);

  /// The tensor at `key`. Throws KeyError when the key is missing (listing the keys present)
  /// or names a sub-dict. While a KeyAccessHook is installed, it sees the read and decides the
  /// returned tensor.
  at::Tensor get(const NestedKey& key) const;
  /// The sub-dict at `key`; KeyError when missing or a tensor.
  const TensorDict& get_sub(const NestedKey& key) const;
  /// The sub-dict at `key`; KeyError when missing or a tensor.
  TensorDict& get_sub(const NestedKey& key);

  /// True when `key` names a tensor or a sub-dict.
  bool contains(const NestedKey& key) const;
  /// Removes the tensor or sub-dict at `key`; KeyError when missing.
  void erase(const NestedKey& key);

  /// The keys in insertion order. With `include_nested`, the keys of sub-dicts follow their
  /// parent's key depth-first as tuples; with `leaves_only`, sub-dict keys are left out.
  ///
  ///     {a: t, b: {c: t}}.keys(true, false) → 'a', 'b', ('b', 'c')
  std::vector<NestedKey> keys(bool include_nested = false, bool leaves_only = false) const;
  /// Number of top-level entries.
  size_t size() const { return entries_.size(); }
  /// True when there are no entries.
  bool empty() const { return entries_.empty(); }

  /// A dict with only `keys` (same batch size and device). With `strict`, a missing key is a
  /// KeyError; otherwise it is skipped.
  TensorDict select(const std::vector<NestedKey>& keys, bool strict = true) const;
  /// A dict without `keys`; missing keys are ignored.
  TensorDict exclude(const std::vector<NestedKey>& keys) const;
  /// Nested leaves become top-level keys joined by `sep`: {a: {b: t}} → {"a.b": t}. Throws
  /// KeyError naming both keys when two flatten alike ("a.b" and ("a", "b")).
  TensorDict flatten_keys(const std::string& sep = ".") const;
  /// The inverse of flatten_keys: {"a.b": t} → {a: {b: t}}. Throws KeyError naming both keys
  /// when two unflatten to the same key or one inside the other ("a" and "a.b"), and when a
  /// key split at `sep` has an empty part ("a..b").
  TensorDict unflatten_keys(const std::string& sep = ".") const;
  /// Every tensor moved to `device`, and the dict's device set to it.
  TensorDict to(at::Device device) const;
  /// Every tensor cast to `dtype`.
  TensorDict to(at::ScalarType dtype) const;
  /// A dict with `fn` applied to every tensor (results checked against the batch size).
  TensorDict apply(const std::function<at::Tensor(const at::Tensor&)>& fn) const;
  /// A deep copy: the tensors are cloned too.
  TensorDict clone() const;
  /// Sets every entry of `other` into this dict; sub-dicts present in both are updated
  /// recursively.
  TensorDict& update(const TensorDict& other);

  /// Python's repr: `TensorDict(\n    fields={...},\n    batch_size=torch.Size([...]), ...)`.
  std::string repr() const;

 private:
  friend bool all_equal(const TensorDict& a, const TensorDict& b);

  /// One entry: a tensor, or a nested dict when `sub` is set.
  struct Entry {
    std::string key;
    at::Tensor tensor;
    std::unique_ptr<TensorDict> sub;
  };

  const Entry* find_entry(const NestedKey& key) const;
  Entry* find_entry(const NestedKey& key);
  const Entry* find_local(const std::string& key) const;
  TensorDict& parent_for_set(const NestedKey& key);
  const TensorDict* existing_parent(const NestedKey& key) const;
  void set_sub_unhooked(const NestedKey& key, TensorDict value);
  Entry& slot(const std::string& key);
  void set_unhooked(const NestedKey& key, at::Tensor value);
  void collect_keys(const NestedKey* prefix, bool include_nested, bool leaves_only,
                    std::vector<NestedKey>& out) const;
  [[noreturn]] void throw_missing(const NestedKey& key) const;
  TensorDict map_tensors(const std::function<at::Tensor(const at::Tensor&)>& fn,
                         const std::optional<at::Device>& new_device, bool change_device) const;
  void copy_from(const TensorDict& other);
  void reindex();

  std::vector<int64_t> batch_size_;
  std::optional<at::Device> device_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> index_;
};

/// True when `a` and `b` have the same batch size, the same keys at every level (order not
/// considered), a sub-dict where the other has a sub-dict, and `at::equal` tensors.
bool all_equal(const TensorDict& a, const TensorDict& b);

/// Prints `td.repr()`.
std::ostream& operator<<(std::ostream& os, const TensorDict& td);

/// Python's `torch.Size([3, 4])` for a shape.
std::string torch_size_repr(at::IntArrayRef sizes);

}  // namespace tdfx

/// `fmt::format("{}", td)` prints `td.repr()`.
template <>
struct fmt::formatter<tdfx::TensorDict> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const tdfx::TensorDict& td, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(td.repr(), ctx);
  }
};
