#include "tdfx/viz/html.h"

#include <cctype>

#include "tdfx/core/error.h"
#include "tdfx/core/utf8.h"

namespace tdfx {

namespace {

/// `xNN` for a byte that XML cannot carry (after the backslash the caller writes).
std::string hex_digits(unsigned char byte) {
  constexpr char kDigits[] = "0123456789abcdef";
  return {'x', kDigits[byte >> 4], kDigits[byte & 0xF]};
}

/// escape_html's and escape_markup's one walk: `backslash` is how a backslash is written (two
/// for Graphviz, which reads `\\` as one and `\N`, `\G`, `\L` as names and line breaks).
std::string escape(std::string_view text, std::string_view backslash) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80) {
      // Well-formed UTF-8 passes; a stray byte would make Graphviz drop the whole label.
      const size_t length = utf8_sequence_length(text.substr(i));
      if (length == 0) {
        out.append(backslash).append(hex_digits(byte));
      } else {
        out.append(text.data() + i, length);
        i += length - 1;
      }
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '{':
        out += "&#123;";
        break;
      case '}':
        out += "&#125;";
        break;
      case '|':
        out += "&#124;";
        break;
      case '\\':
        out += backslash;
        break;
      // Control characters are not allowed in XML, and a row is one line: shown as escapes.
      case '\n':
        out.append(backslash).append("n");
        break;
      case '\r':
        out.append(backslash).append("r");
        break;
      case '\t':
        out.append(backslash).append("t");
        break;
      default:
        if (byte < 0x20 || byte == 0x7F) {
          out.append(backslash).append(hex_digits(byte));
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

std::string escape_html(std::string_view text) { return escape(text, "\\\\"); }

std::string escape_markup(std::string_view text) { return escape(text, "\\"); }

std::string dot_quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out += '"';
  return out;
}

std::string truncate_text(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Back up over UTF-8 continuation bytes so a character is never split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

namespace {

/// The largest cut at most `at` that does not split a UTF-8 character (at least 1).
size_t utf8_cut(std::string_view text, size_t at) {
  size_t cut = at;
  while (cut > 1 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

}  // namespace

std::vector<std::string> wrap_text(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  if (width == 0) width = 1;
  while (text.size() > width) {
    // The last space within the width ends the line (kept on it); else cut the word.
    const size_t space = text.substr(0, width).rfind(' ');
    const size_t cut =
        space != std::string_view::npos && space > 0 ? space + 1 : utf8_cut(text, width);
    lines.emplace_back(text.substr(0, cut));
    text.remove_prefix(cut);
  }
  if (!text.empty() || lines.empty()) lines.emplace_back(text);
  return lines;
}

std::string wrapped_html(std::string_view text, size_t width) {
  std::string out;
  for (const std::string& line : wrap_text(text, width)) {
    if (!out.empty()) out += "<br/>";
    out += escape_html(line);
  }
  return out;
}

std::string dot_escape_colour(const std::string& colour) {
  for (char c : colour) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '#') {
      fail<Error>("overlay colour '{}' is neither #rrggbb nor a colour name", colour);
    }
  }
  return colour;
}

}  // namespace tdfx
