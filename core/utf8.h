#pragma once

/// \file
/// Checking UTF-8: what JSON strings, Graphviz labels and XML can carry.

#include <cstddef>
#include <string_view>

namespace tdfx {

/// The length of the well-formed UTF-8 sequence at the start of `text` (1 to 4), or 0 when
/// it starts with none: a stray byte, an overlong form, a surrogate, a code point past
/// U+10FFFF, or a sequence cut short. ASCII is a sequence of 1.
size_t utf8_sequence_length(std::string_view text);

/// True when all of `text` is well-formed UTF-8.
bool is_utf8(std::string_view text);

}  // namespace tdfx
