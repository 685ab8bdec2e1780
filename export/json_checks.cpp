#include "tdfx/export/json_checks.h"

#include <fmt/format.h>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/core/utf8.h"

namespace tdfx::detail {

using nlohmann::json;

// What a JSON value is, for messages: untrusted values are never printed whole.
std::string describe(const json& value) {
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_string()) {
    const auto& s = value.get_ref<const std::string&>();
    return python_repr(s.size() > 40 ? s.substr(0, 40) + "..." : s);
  }
  return std::string("a JSON ") + value.type_name();
}

// Names and strings that reach printed code and diagrams: no control
// characters, whatever the printers do with them.
const std::string& printable(const std::string& text, const std::string& what,
                             const std::string& where) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      fail<ArchiveError>("{}: {} {} holds a control character", where, what, python_repr(text));
    }
  }
  return text;
}

std::string byte_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7F || c == '\\') {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

bool is_module_path(const std::string& path) {
  size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    const bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    // A keyword part (`module.lambda`) would print as invalid Python: `self.module.lambda`.
    if (!digits && (!is_python_identifier(part) || is_python_keyword(part))) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// Every read of the document goes through these: a wrong type or a missing
// field is an ArchiveError saying where, never a crash.
const json& field(const json& object, const char* name, const std::string& where) {
  if (!object.is_object() || !object.contains(name)) {
    fail<ArchiveError>("{}: missing field '{}'", where, name);
  }
  return object.at(name);
}

std::string text(const json& object, const char* name, const std::string& where) {
  const json& value = field(object, name, where);
  if (!value.is_string()) fail<ArchiveError>("{}: field '{}' is not a string", where, name);
  return value.get<std::string>();
}

const json& array(const json& object, const char* name, const std::string& where) {
  const json& value = field(object, name, where);
  if (!value.is_array()) fail<ArchiveError>("{}: field '{}' is not a list", where, name);
  return value;
}

NestedKey key_from_json(const json& parts, bool is_tuple, const std::string& where) {
  if (!parts.is_array() || parts.empty())
    fail<ArchiveError>("{}: a key must be a non-empty list", where);
  std::vector<std::string> items;
  for (const json& part : parts) {
    if (!part.is_string()) fail<ArchiveError>("{}: a key part is not a string", where);
    items.push_back(printable(part.get<std::string>(), "key part", where));
  }
  if (items.size() == 1 && !is_tuple) return NestedKey(items[0]);
  if (items.size() == 1) return NestedKey({items[0]});
  return NestedKey(std::move(items));
}

}  // namespace tdfx::detail
