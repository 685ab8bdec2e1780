#include "tdfx/core/nested_key.h"

#include <ostream>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"

namespace tdfx {

NestedKey::NestedKey(const char* key) : NestedKey(std::string(key ? key : "")) {}

NestedKey::NestedKey(std::string key) : parts_{std::move(key)} { validate(); }

NestedKey::NestedKey(std::string_view key) : NestedKey(std::string(key)) {}

NestedKey::NestedKey(std::initializer_list<std::string> parts) : parts_(parts), is_tuple_(true) {
  validate();
}

NestedKey::NestedKey(std::vector<std::string> parts) : parts_(std::move(parts)) {
  is_tuple_ = parts_.size() != 1;
  validate();
}

void NestedKey::validate() const {
  if (parts_.empty()) throw KeyError("a nested key needs at least one part; got ()");
  for (const auto& part : parts_) {
    if (part.empty()) {
      throw KeyError(fmt::format("key {} has an empty part; every part must be non-empty", repr()));
    }
  }
}

NestedKey NestedKey::parent() const {
  if (parts_.size() < 2) fail<KeyError>("key {} has no parent", repr());
  return NestedKey(std::vector<std::string>(parts_.begin(), parts_.end() - 1));
}

NestedKey NestedKey::join(const NestedKey& child) const {
  std::vector<std::string> parts = parts_;
  parts.insert(parts.end(), child.parts_.begin(), child.parts_.end());
  NestedKey out(std::move(parts));
  out.is_tuple_ = true;
  return out;
}

bool NestedKey::starts_with(const NestedKey& prefix) const {
  if (prefix.parts_.size() > parts_.size()) return false;
  return std::equal(prefix.parts_.begin(), prefix.parts_.end(), parts_.begin());
}

std::string NestedKey::joined(std::string_view separator) const {
  std::string out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i) out += separator;
    out += parts_[i];
  }
  return out;
}

std::string NestedKey::repr() const {
  if (!is_tuple_) return python_repr(parts_[0]);
  std::string out = "(";
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i) out += ", ";
    out += python_repr(parts_[i]);
  }
  return out + (parts_.size() == 1 ? ",)" : ")");
}

std::string NestedKey::str() const {
  if (!is_tuple_) return parts_[0];
  std::string out = "(";
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i) out += ", ";
    out += parts_[i];
  }
  return out + (parts_.size() == 1 ? ",)" : ")");
}

std::ostream& operator<<(std::ostream& os, const NestedKey& key) { return os << key.repr(); }

std::string repr(const std::vector<NestedKey>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += ", ";
    out += keys[i].repr();
  }
  return out + "]";
}

}  // namespace tdfx
