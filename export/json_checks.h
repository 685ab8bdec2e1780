#pragma once

/// \file
/// Reading untrusted JSON (program.json of an archive): every read goes through these, so
/// that a wrong type or a missing field is an ArchiveError saying where, never a crash, and
/// no untrusted value is printed whole.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tdfx/core/nested_key.h"

namespace tdfx::detail {

/// What a JSON value is, for messages: a number, a string cut to 40 bytes, or its type.
std::string describe(const nlohmann::json& value);

/// `text`, when it holds no control character (names and strings that reach printed code
/// and diagrams); else ArchiveError naming `what` and `where`.
const std::string& printable(const std::string& text, const std::string& what,
                             const std::string& where);

/// `text` with every byte outside printable ASCII as `\xNN`, for a message about bytes.
std::string byte_escaped(std::string_view text);

/// True for a dotted path of identifiers and indices (`module.0.fc1`).
bool is_module_path(const std::string& path);

/// `object[name]`; ArchiveError when `object` is not an object or has no such field.
const nlohmann::json& field(const nlohmann::json& object, const char* name,
                            const std::string& where);
/// `object[name]` as a string; ArchiveError when it is missing or not a string.
std::string text(const nlohmann::json& object, const char* name, const std::string& where);
/// `object[name]` as a list; ArchiveError when it is missing or not a list.
const nlohmann::json& array(const nlohmann::json& object, const char* name,
                            const std::string& where);

/// A key from its parts (`["input", "x"]`), each printable; a one-part key is a tuple key
/// when `is_tuple`.
NestedKey key_from_json(const nlohmann::json& parts, bool is_tuple, const std::string& where);

}  // namespace tdfx::detail
