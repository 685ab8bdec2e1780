#pragma once

/// \file
/// Python's `repr` of the scalar values tdfx prints, so that printed graphs and
/// code match torch.fx byte for byte.

#include <cstdint>
#include <string>
#include <string_view>

namespace tdfx {

/// `repr(s)` of a Python str: single quotes unless the text holds a single
/// quote and no double quote; backslash escapes for quotes, `\\`, `\n`, `\t`,
/// `\r` and other control characters. `python_repr("a")` → `'a'`.
std::string python_repr(std::string_view text);

/// `text` quoted as python_repr quotes it (the same choice of quotes, quotes and `\\` escaped),
/// with each control character (C0 and DEL) written by `escape_control` instead: for a
/// language that reads Python's strings but not all of its escapes (TorchScript's lexer takes
/// octal, not `\x01`).
std::string python_quoted(std::string_view text, void (*escape_control)(std::string& out, char c));

/// `text` with every control character (C0 and DEL) written as Python
/// escapes it (`\n`, `\x01`): one line, safe in a comment or a label.
std::string escape_controls(std::string_view text);

/// `repr(x)` of a Python float: the shortest text that reads back as the same
/// double, with `.0` on integral values and Python's exponent rules
/// (`1.0`, `0.0001`, `1e-05`, `1e+16`, `inf`, `nan`).
std::string python_float_repr(double value);

/// True when `name` is a Python identifier (ASCII letters, digits, `_`, not
/// starting with a digit).
bool is_python_identifier(std::string_view name);

/// True for Python's keywords (`in`, `def`, `None`): identifiers that cannot
/// name a parameter or variable.
bool is_python_keyword(std::string_view name);

}  // namespace tdfx
