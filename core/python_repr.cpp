#include "tdfx/core/python_repr.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace tdfx {

namespace {

// Python's escape of a control character: `\n`, `\t`, `\r`, else `\x01`.
void append_escaped_control(std::string& out, char c) {
  if (c == '\n') {
    out += "\\n";
  } else if (c == '\t') {
    out += "\\t";
  } else if (c == '\r') {
    out += "\\r";
  } else {
    out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  }
}

}  // namespace

std::string escape_controls(std::string_view text) {
  auto is_control = [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  };
  // Most text has no control character: one scan and one copy.
  if (std::none_of(text.begin(), text.end(), is_control)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      append_escaped_control(out, c);
    } else {
      out += c;
    }
  }
  return out;
}

std::string python_quoted(std::string_view text, void (*escape_control)(std::string& out, char c)) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      escape_control(out, c);
    } else {
      out += c;  // UTF-8 bytes pass through, as Python prints printable text.
    }
  }
  out += quote;
  return out;
}

std::string python_repr(std::string_view text) {
  return python_quoted(text, append_escaped_control);
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // fmt's "{}" gives the shortest round-trip digits, in fixed or exponent form;
  // reduce either to a digit string and a decimal exponent, then lay it out
  // by Python's rules.
  std::string text = fmt::format("{}", value);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const auto e_pos = text.find('e');
  int exponent = e_pos == std::string::npos ? 0 : std::atoi(text.c_str() + e_pos + 1);
  const std::string mantissa = text.substr(0, e_pos);
  const auto dot = mantissa.find('.');
  std::string digits = mantissa;
  if (dot != std::string::npos) digits.erase(dot, 1);
  // The exponent of the first digit: position of the point minus one.
  exponent += static_cast<int>(dot == std::string::npos ? mantissa.size() : dot) - 1;
  const auto first_nonzero = digits.find_first_not_of('0');
  if (first_nonzero == std::string::npos) {
    digits = "0";
    exponent = 0;
  } else {
    digits.erase(0, first_nonzero);
    exponent -= static_cast<int>(first_nonzero);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();

  std::string out = negative ? "-" : "";
  // Python's repr switches to exponent form outside 1e-4 <= |x| < 1e16.
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto int_len = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_len) {
      out += digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return out;
}

bool is_python_identifier(std::string_view name) {
  // ASCII tests, not the locale's: the same bytes are identifiers in every locale. A table
  // of the bytes an identifier may hold, as this runs for every node a graph names.
  static const auto kIdentifierByte = [] {
    std::array<bool, 256> table{};
    for (int c = 0; c < 256; ++c) {
      table[static_cast<size_t>(c)] =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    }
    return table;
  }();
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char c : name) {
    if (!kIdentifierByte[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

bool is_python_keyword(std::string_view name) {
  // Python 3.11's keyword.kwlist.
  static constexpr std::string_view kKeywords[] = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  if (name.size() > 8) return false;  // "continue" and "nonlocal" are the longest
  for (const std::string_view keyword : kKeywords) {
    if (keyword == name) return true;
  }
  return false;
}

}  // namespace tdfx
