#include "tdfx/tensordict/tensordict.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/tensordict/access_hook.h"

namespace tdfx {
namespace {

std::string shape_str(at::IntArrayRef sizes) { return fmt::format("[{}]", fmt::join(sizes, ", ")); }

bool starts_with(at::IntArrayRef shape, const std::vector<int64_t>& prefix) {
  if (shape.size() < prefix.size()) return false;
  return std::equal(prefix.begin(), prefix.end(), shape.begin());
}

NestedKey prefix_of(const NestedKey& key, size_t n) {
  return NestedKey(std::vector<std::string>(key.parts().begin(), key.parts().begin() + n));
}

}  // namespace

TensorDict::TensorDict(std::vector<int64_t> batch_size, std::optional<at::Device> device)
    : batch_size_(std::move(batch_size)), device_(device) {}

TensorDict::TensorDict(std::initializer_list<std::pair<NestedKey, at::Tensor>> items,
                       std::vector<int64_t> batch_size, std::optional<at::Device> device)
    : TensorDict(std::move(batch_size), device) {
  for (const auto& [key, value] : items) set_unhooked(key, value);
}

TensorDict::TensorDict(const TensorDict& other) { copy_from(other); }

TensorDict& TensorDict::operator=(const TensorDict& other) {
  if (this != &other) {
    TensorDict copy(other);  // copy first: `other` may live inside this dict
    *this = std::move(copy);
  }
  return *this;
}

TensorDict::TensorDict(TensorDict&& other) noexcept = default;
TensorDict& TensorDict::operator=(TensorDict&& other) noexcept = default;
TensorDict::~TensorDict() = default;

void TensorDict::copy_from(const TensorDict& other) {
  batch_size_ = other.batch_size_;
  device_ = other.device_;
  entries_.clear();
  entries_.reserve(other.entries_.size());
  for (const Entry& entry : other.entries_) {
    entries_.push_back(Entry{entry.key, entry.tensor,
                             entry.sub ? std::make_unique<TensorDict>(*entry.sub) : nullptr});
  }
  index_ = other.index_;
}

void TensorDict::reindex() {
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].key, i);
}

const TensorDict::Entry* TensorDict::find_local(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const TensorDict::Entry* TensorDict::find_entry(const NestedKey& key) const {
  const TensorDict* td = this;
  const auto& parts = key.parts();
  for (size_t i = 0; i < parts.size(); ++i) {
    const Entry* entry = td->find_local(parts[i]);
    if (!entry || i + 1 == parts.size()) return entry;
    if (!entry->sub) return nullptr;
    td = entry->sub.get();
  }
  return nullptr;
}

TensorDict::Entry* TensorDict::find_entry(const NestedKey& key) {
  return const_cast<Entry*>(static_cast<const TensorDict*>(this)->find_entry(key));
}

const TensorDict* TensorDict::existing_parent(const NestedKey& key) const {
  // The deepest existing dict on the path to `key`'s parent: its batch size is the one a new
  // entry must match, since missing intermediate dicts inherit it.
  const TensorDict* td = this;
  const auto& parts = key.parts();
  for (size_t depth = 0; depth + 1 < parts.size(); ++depth) {
    const Entry* entry = td->find_local(parts[depth]);
    if (!entry) break;
    if (!entry->sub) {
      fail<KeyError>("cannot set key {}: {} is a tensor, not a TensorDict", key.repr(),
                     prefix_of(key, depth + 1).repr());
    }
    td = entry->sub.get();
  }
  return td;
}

TensorDict& TensorDict::parent_for_set(const NestedKey& key) {
  TensorDict* td = this;
  const auto& parts = key.parts();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    Entry& entry = td->slot(parts[i]);
    if (!entry.sub) {
      if (entry.tensor.defined()) {
        fail<KeyError>("cannot set key {}: {} is a tensor, not a TensorDict", key.repr(),
                       prefix_of(key, i + 1).repr());
      }
      entry.sub = std::make_unique<TensorDict>(td->batch_size_, td->device_);
    }
    td = entry.sub.get();
  }
  return *td;
}

TensorDict::Entry& TensorDict::slot(const std::string& key) {
  auto it = index_.find(key);
  if (it != index_.end()) return entries_[it->second];
  index_.emplace(key, entries_.size());
  entries_.push_back(Entry{key, at::Tensor(), nullptr});
  return entries_.back();
}

void TensorDict::set_unhooked(const NestedKey& key, at::Tensor value) {
  const TensorDict* parent = existing_parent(key);
  if (!value.defined()) fail<Error>("cannot set key {}: the tensor is undefined", key.repr());
  if (!starts_with(value.sizes(), parent->batch_size_)) {
    fail<ShapeError>("cannot set key {}: shape {} does not start with batch size {}", key.repr(),
                     shape_str(value.sizes()), shape_str(parent->batch_size_));
  }
  TensorDict& target = parent_for_set(key);
  if (target.device_ && value.device() != *target.device_) value = value.to(*target.device_);
  Entry& entry = target.slot(key.leaf());
  entry.sub.reset();
  entry.tensor = std::move(value);
}

TensorDict& TensorDict::set(const NestedKey& key, at::Tensor value) {
  if (KeyAccessHook* hook = current_key_access_hook()) {
    const TensorDict* parent = existing_parent(key);
    // Check before the hook sees the write, so a rejected write is never recorded.
    if (value.defined() && starts_with(value.sizes(), parent->batch_size_)) {
      hook->on_write(*this, key, value);
    }
  }
  set_unhooked(key, std::move(value));
  return *this;
}

void TensorDict::set_sub_unhooked(const NestedKey& key, TensorDict value) {
  const TensorDict* parent = existing_parent(key);
  if (!starts_with(value.batch_size_, parent->batch_size_)) {
    fail<ShapeError>(
        "cannot set key {}: TensorDict batch size {} does not start with batch size {}", key.repr(),
        shape_str(value.batch_size_), shape_str(parent->batch_size_));
  }
  TensorDict& target = parent_for_set(key);
  if (target.device_ && value.device_ != target.device_) value = value.to(*target.device_);
  Entry& entry = target.slot(key.leaf());
  entry.tensor = at::Tensor();
  entry.sub = std::make_unique<TensorDict>(std::move(value));
}

TensorDict& TensorDict::set(const NestedKey& key, TensorDict value) {
  set_sub_unhooked(key, std::move(value));
  return *this;
}

at::Tensor TensorDict::get(const NestedKey& key) const {
  const Entry* entry = find_entry(key);
  KeyAccessHook* hook = current_key_access_hook();
  if (!entry) {
    if (hook) {
      if (std::optional<at::Tensor> value = hook->on_missing(*this, key)) return *value;
    }
    throw_missing(key);
  }
  if (entry->sub) {
    fail<KeyError>("key {} is a TensorDict, not a tensor; use get_sub to read it", key.repr());
  }
  return hook ? hook->on_read(*this, key, entry->tensor) : entry->tensor;
}

const TensorDict& TensorDict::get_sub(const NestedKey& key) const {
  const Entry* entry = find_entry(key);
  if (!entry) throw_missing(key);
  if (!entry->sub) {
    fail<KeyError>("key {} is a tensor, not a TensorDict; use get to read it", key.repr());
  }
  return *entry->sub;
}

TensorDict& TensorDict::get_sub(const NestedKey& key) {
  return const_cast<TensorDict&>(static_cast<const TensorDict*>(this)->get_sub(key));
}

namespace {

// The candidate nearest to `wanted` (a key's repr) by edit distance, when it
// is near enough to be a likely typo: within a third of the key's text, and
// not all of it (`'x'` is not a typo of `'y'`).
std::string closest_text(const std::string& wanted, const std::vector<std::string>& candidates) {
  const size_t text = wanted.size() > 2 ? wanted.size() - 2 : 0;  // without the quotes
  std::string best;
  size_t best_distance = std::min(std::max<size_t>(1, text / 3), text == 0 ? 0 : text - 1) + 1;
  std::vector<size_t> row(wanted.size() + 1);
  for (const std::string& candidate : candidates) {
    for (size_t j = 0; j <= wanted.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= candidate.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= wanted.size(); ++j) {
        const size_t above = row[j];
        row[j] = std::min(
            {row[j] + 1, row[j - 1] + 1, diagonal + (candidate[i - 1] == wanted[j - 1] ? 0 : 1)});
        diagonal = above;
      }
    }
    if (row[wanted.size()] < best_distance) {
      best_distance = row[wanted.size()];
      best = candidate;
    }
  }
  return best;
}

}  // namespace

void TensorDict::throw_missing(const NestedKey& key) const {
  std::vector<std::string> present;
  for (const NestedKey& k : keys(true, true)) present.push_back(k.repr());
  if (present.empty()) fail<KeyError>("key {} not found; the TensorDict is empty", key.repr());
  const std::string closest = closest_text(key.repr(), present);
  fail<KeyError>("key {} not found{}; keys: {}", key.repr(),
                 closest.empty() ? "" : " (did you mean " + closest + "?)",
                 fmt::join(present, ", "));
}

bool TensorDict::contains(const NestedKey& key) const { return find_entry(key) != nullptr; }

void TensorDict::erase(const NestedKey& key) {
  if (!contains(key)) throw_missing(key);
  TensorDict* parent = key.size() > 1 ? &get_sub(key.parent()) : this;
  auto it = parent->index_.find(key.leaf());
  parent->entries_.erase(parent->entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
  parent->reindex();
}

void TensorDict::collect_keys(const NestedKey* prefix, bool include_nested, bool leaves_only,
                              std::vector<NestedKey>& out) const {
  for (const Entry& entry : entries_) {
    NestedKey key = prefix ? prefix->join(entry.key) : NestedKey(entry.key);
    if (!entry.sub || !leaves_only) out.push_back(key);
    if (entry.sub && include_nested) entry.sub->collect_keys(&key, true, leaves_only, out);
  }
}

std::vector<NestedKey> TensorDict::keys(bool include_nested, bool leaves_only) const {
  std::vector<NestedKey> out;
  collect_keys(nullptr, include_nested, leaves_only, out);
  return out;
}

TensorDict TensorDict::select(const std::vector<NestedKey>& keys, bool strict) const {
  TensorDict out(batch_size_, device_);
  for (const NestedKey& key : keys) {
    const Entry* entry = find_entry(key);
    if (!entry) {
      if (strict) throw_missing(key);
      continue;
    }
    if (entry->sub) {
      out.set_sub_unhooked(key, *entry->sub);
    } else {
      out.set_unhooked(key, entry->tensor);
    }
  }
  return out;
}

TensorDict TensorDict::exclude(const std::vector<NestedKey>& keys) const {
  TensorDict out(*this);
  for (const NestedKey& key : keys) {
    if (out.contains(key)) out.erase(key);
  }
  return out;
}

TensorDict TensorDict::flatten_keys(const std::string& sep) const {
  TensorDict out(batch_size_, device_);
  // The key each flat name came from: two keys that flatten alike would otherwise lose one
  // tensor without a word.
  std::unordered_map<std::string, NestedKey> source;
  for (const NestedKey& key : keys(true, true)) {
    std::string flat = key.joined(sep);
    auto [it, fresh] = source.emplace(flat, key);
    if (!fresh) {
      fail<KeyError>("flatten_keys: keys {} and {} both flatten to {}", it->second.repr(),
                     key.repr(), NestedKey(flat).repr());
    }
    out.set_unhooked(NestedKey(std::move(flat)), find_entry(key)->tensor);
  }
  return out;
}

namespace {

/// `key`'s parts, each split at `sep`: ('a.b', 'c') → ('a', 'b', 'c').
NestedKey split_key(const NestedKey& key, const std::string& sep) {
  std::vector<std::string> parts;
  for (const std::string& part : key.parts()) {
    size_t start = 0;
    for (size_t pos; (pos = part.find(sep, start)) != std::string::npos; start = pos + sep.size()) {
      parts.push_back(part.substr(start, pos - start));
    }
    parts.push_back(part.substr(start));
  }
  for (const std::string& part : parts) {
    if (part.empty()) {
      fail<KeyError>("unflatten_keys: key {} split at {} has an empty part", key.repr(),
                     python_repr(sep));
    }
  }
  return NestedKey(std::move(parts));
}

}  // namespace

TensorDict TensorDict::unflatten_keys(const std::string& sep) const {
  if (sep.empty()) fail<Error>("unflatten_keys needs a non-empty separator");
  TensorDict out(batch_size_, device_);
  // Each new key and the key it came from, to name both keys of a clash.
  std::map<NestedKey, NestedKey> made;
  for (const NestedKey& key : keys(true, true)) {
    NestedKey nested = split_key(key, sep);
    // A clash is the same key twice, or one key inside the other (a tensor holds no entries):
    // an earlier key equal to or inside `nested` sorts right at or after it...
    auto clash = made.lower_bound(nested);
    if (clash != made.end() && !clash->first.starts_with(nested)) clash = made.end();
    // ...and one `nested` is inside is one of its prefixes.
    for (size_t n = 1; clash == made.end() && n < nested.size(); ++n) {
      clash = made.find(prefix_of(nested, n));
    }
    if (clash != made.end()) {
      fail<KeyError>("unflatten_keys: keys {} and {} unflatten to {} and {}, which clash",
                     clash->second.repr(), key.repr(), clash->first.repr(), nested.repr());
    }
    out.set_unhooked(nested, find_entry(key)->tensor);
    made.emplace(std::move(nested), key);
  }
  return out;
}

TensorDict TensorDict::map_tensors(const std::function<at::Tensor(const at::Tensor&)>& fn,
                                   const std::optional<at::Device>& new_device,
                                   bool change_device) const {
  TensorDict out(batch_size_, change_device ? new_device : device_);
  for (const Entry& entry : entries_) {
    if (entry.sub) {
      out.set_sub_unhooked(entry.key, entry.sub->map_tensors(fn, new_device, change_device));
    } else {
      out.set_unhooked(entry.key, fn(entry.tensor));
    }
  }
  return out;
}

TensorDict TensorDict::to(at::Device device) const {
  return map_tensors([&](const at::Tensor& t) { return t.to(device); }, device, true);
}

TensorDict TensorDict::to(at::ScalarType dtype) const {
  return map_tensors([&](const at::Tensor& t) { return t.to(dtype); }, std::nullopt, false);
}

TensorDict TensorDict::apply(const std::function<at::Tensor(const at::Tensor&)>& fn) const {
  return map_tensors(fn, std::nullopt, false);
}

TensorDict TensorDict::clone() const {
  return map_tensors([](const at::Tensor& t) { return t.clone(); }, std::nullopt, false);
}

TensorDict& TensorDict::update(const TensorDict& other) {
  if (&other == this) return *this;
  for (const Entry& entry : other.entries_) {
    if (!entry.sub) {
      set_unhooked(entry.key, entry.tensor);
      continue;
    }
    const Entry* mine = find_local(entry.key);
    if (mine && mine->sub) {
      mine->sub->update(*entry.sub);
    } else {
      set_sub_unhooked(entry.key, *entry.sub);
    }
  }
  return *this;
}

bool all_equal(const TensorDict& a, const TensorDict& b) {
  if (a.batch_size_ != b.batch_size_ || a.entries_.size() != b.entries_.size()) return false;
  for (const TensorDict::Entry& x : a.entries_) {
    const TensorDict::Entry* y = b.find_local(x.key);
    if (!y || static_cast<bool>(x.sub) != static_cast<bool>(y->sub)) return false;
    if (x.sub) {
      if (!all_equal(*x.sub, *y->sub)) return false;
    } else if (x.tensor.sizes() != y->tensor.sizes() ||
               x.tensor.scalar_type() != y->tensor.scalar_type() ||
               x.tensor.device() != y->tensor.device() || !at::equal(x.tensor, y->tensor)) {
      return false;
    }
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const TensorDict& td) { return os << td.repr(); }

}  // namespace tdfx
