#include "debug/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tdfx {
namespace {

// Display columns of UTF-8 text: one per code point (the tables hold no wide characters).
size_t columns(const std::string& text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

std::string ellipsize(const std::string& text, size_t width) {
  if (columns(text) <= width) return text;
  if (width == 0) return "";
  std::string out;
  size_t used = 0;
  for (size_t i = 0; i < text.size() && used < width - 1;) {
    size_t len = 1;
    while (i + len < text.size() && (text[i + len] & 0xC0) == 0x80) ++len;
    out.append(text, i, len);
    i += len;
    ++used;
  }
  return out + "…";
}

std::string table_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", value);
}

std::string Table::str(size_t width) const {
  const size_t n = headers.size();
  std::vector<size_t> widths(n, 0);
  for (size_t c = 0; c < n; ++c) {
    widths[c] = columns(headers[c]);
    for (const auto& row : rows) widths[c] = std::max(widths[c], columns(row.at(c)));
  }
  // Shorten the widest text column, step by step, until the table fits (or no text column
  // can give more than its header needs).
  auto total = [&] {
    size_t sum = n ? 2 * (n - 1) : 0;
    for (size_t w : widths) sum += w;
    return sum;
  };
  while (total() > width) {
    size_t widest = n;
    for (size_t c = 0; c < n; ++c) {
      const bool is_number = c < numeric.size() && numeric[c];
      if (is_number || widths[c] <= std::max<size_t>(columns(headers[c]), 8)) continue;
      if (widest == n || widths[c] > widths[widest]) widest = c;
    }
    if (widest == n) break;
    widths[widest] -= std::min(widths[widest] - std::max<size_t>(columns(headers[widest]), 8),
                               total() - width);
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < n; ++c) {
      const std::string cell = ellipsize(cells[c], widths[c]);
      const std::string pad(widths[c] - columns(cell), ' ');
      const bool right = c < numeric.size() && numeric[c];
      if (c) out += "  ";
      out += right ? pad + cell : (c + 1 == n ? cell : cell + pad);
    }
    return out + "\n";
  };
  std::string out = line(headers);
  std::vector<std::string> rule;
  for (size_t w : widths) rule.push_back(std::string(w, '-'));
  out += line(rule);
  for (const auto& row : rows) out += line(row);
  return out;
}

}  // namespace tdfx
