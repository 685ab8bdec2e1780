#pragma once

/// \file
/// Reading untrusted JSON (program.json of an archive): every read goes through these, so
/// that a wrong type or a missing field is an ArchiveError saying where, never a crash, and
/// no untrusted value is printed whole; and parsing program.json's text, within bounds on its
/// nesting, its integers and the memory its document takes.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/core/nested_key.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/node.h"

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

/// program.json's document, parsed from its text within bounds checked before any parser sees
/// it: ArchiveError when the text nests deeper than kMaxJsonDepth (archive_format.h) or holds an
/// integer outside int64's range, when it is not JSON, when an object repeats a field, or when
/// what reading it holds would go past `memory_budget` bytes (charged per JSON value as the
/// parser meets it: the parse stops there).
nlohmann::json parse_program_json(const std::string& document_text, uint64_t memory_budget,
                                  const std::string& where);

/// A dtype by the name archives keep it under (dtype_name); ArchiveError otherwise.
c10::ScalarType dtype_from_json(const nlohmann::json& value, const std::string& where);

/// A memory format or layout by the name torch has it under (`channels_last`); a
/// message that refuses anything else lists the names.
template <typename Enum>
Enum enum_from_json(const nlohmann::json& value, const char* what,
                    std::optional<Enum> (*from_name)(std::string_view), std::string (*name)(Enum),
                    const std::string& where) {
  const auto found = value.is_string() ? from_name(value.get<std::string>()) : std::nullopt;
  if (!found) {
    std::vector<std::string> names;
    for (int i = 0; i < static_cast<int>(Enum::NumOptions); ++i) {
      names.push_back(python_repr(name(static_cast<Enum>(i))));
    }
    fail<ArchiveError>("{}: invalid {} {} (one of {})", where, what, describe(value),
                       fmt::join(names, ", "));
  }
  return *found;
}

/// A device argument of a loaded program: only 'cpu'; ArchiveError otherwise.
c10::Device device_from_json(const nlohmann::json& value, const std::string& where);

/// A node's dimensions that are functions of the batch: [dim, scale, divisor, offset] each,
/// distinct dimensions of its shape in increasing order and none a batch dimension, with
/// scale and divisor at least 1 (a divisor above 1 with scale 1), as SizeExpr holds them.
std::vector<DerivedDim> derived_dims_from_json(const nlohmann::json& value,
                                               const TensorMeta& tensor, const std::string& where);

/// A node's batch dimensions: distinct dimensions of its shape, in increasing order.
std::vector<int64_t> batch_dims_from_json(const nlohmann::json& value,
                                          const std::optional<std::vector<int64_t>>& shape,
                                          const std::string& where);

/// A shape: a list of at most 64 non-negative sizes.
std::vector<int64_t> shape_from_json(const nlohmann::json& value, const std::string& where);

}  // namespace tdfx::detail
