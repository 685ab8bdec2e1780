#include "tdfx/core/text_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include "tdfx/core/error.h"

namespace tdfx {

size_t display_width(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  }));
}

std::string truncated(const std::string& text, size_t width, bool keep_end) {
  if (display_width(text) <= width) return text;
  if (width == 0) return "";
  const auto starts = [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; };
  std::string out;
  size_t shown = 0;
  if (keep_end) {
    size_t begin = text.size();
    while (begin > 0 && shown < width - 1) {
      if (starts(text[--begin])) ++shown;
    }
    return "…" + text.substr(begin);
  }
  for (char c : text) {
    if (starts(c) && ++shown == width) break;
    out += c;
  }
  return out + "…";
}

namespace {

// `text` (wider than `width`) cut to `width` characters with `…` inside, keeping its last
// `tail` characters.
std::string cut_inside(const std::string& text, size_t width, size_t tail) {
  const auto starts = [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; };
  size_t end = text.size();
  for (size_t shown = 0; end > 0 && shown < tail;) {
    if (starts(text[--end])) ++shown;
  }
  const size_t head = width - 1 - tail;
  size_t begin = 0;
  for (size_t shown = 0; begin < end; ++begin) {
    if (starts(text[begin]) && shown++ == head) break;
  }
  return text.substr(0, begin) + "…" + text.substr(end);
}

// The cells of one column cut to `width`, or nullopt when every cut to `width` makes two
// different cells look the same. Where the plain cut would (`('next', 'state', 'h')` and
// `…'c')` both `('next', 'st…`), those cells are cut inside instead, keeping as much of their
// ends as it takes to tell them apart.
std::optional<std::vector<std::string>> cut_column(const std::vector<std::string>& cells,
                                                   size_t width, bool keep_end) {
  std::vector<std::string> out;
  for (const std::string& cell : cells) out.push_back(truncated(cell, width, keep_end));
  auto ambiguous = [&](const std::vector<std::string>& cut) {
    std::map<std::string, std::string> seen;  // cut text → the cell it came from
    for (size_t i = 0; i < cells.size(); ++i) {
      auto [it, added] = seen.emplace(cut[i], cells[i]);
      if (!added && it->second != cells[i]) return true;
    }
    return false;
  };
  if (!ambiguous(out)) return out;
  for (size_t tail = 1; tail + 2 <= width; ++tail) {
    std::vector<std::string> cut;
    for (const std::string& cell : cells) {
      cut.push_back(display_width(cell) <= width ? cell : cut_inside(cell, width, tail));
    }
    if (!ambiguous(cut)) return cut;
  }
  return std::nullopt;
}

}  // namespace

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size()) {
    throw InternalError("a table row has " + std::to_string(cells.size()) + " cells, not " +
                        std::to_string(columns_.size()));
  }
  rows_.push_back(std::move(cells));
}

std::vector<size_t> Table::widths() const {
  std::vector<size_t> out;
  size_t others = 0;
  for (size_t c = 0; c < columns_.size(); ++c) {
    size_t width = display_width(columns_[c].heading);
    for (const auto& row : rows_) width = std::max(width, display_width(row[c]));
    if (columns_[c].max_width > 0) width = std::min(width, columns_[c].max_width);
    out.push_back(width);
    if (columns_[c].max_width > 0) others += width + 2;
  }
  // Columns without a maximum share the room the others leave, and keep their headings and
  // at least kMinNameWidth characters.
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (columns_[c].max_width > 0) continue;
    const size_t room = max_width_ > others ? max_width_ - others : 0;
    out[c] = std::min(out[c], std::max({room, display_width(columns_[c].heading), kMinNameWidth}));
    others += out[c] + 2;
  }
  return out;
}

Table::Layout Table::layout() const {
  Layout layout{widths(), std::vector<std::vector<std::string>>(rows_.size())};
  for (size_t c = 0; c < columns_.size(); ++c) {
    std::vector<std::string> column;
    size_t widest = 0;
    for (const auto& row : rows_) {
      column.push_back(row[c]);
      widest = std::max(widest, display_width(row[c]));
    }
    // Cells that no cut to the column's width tells apart (names alike at both ends, differing
    // only in the middle) widen it until one does: at the widest cell none is cut.
    std::optional<std::vector<std::string>> cut;
    size_t& width = layout.widths[c];
    while (!(cut = cut_column(column, width, columns_[c].keep_end)) && width < widest) ++width;
    for (size_t r = 0; r < rows_.size(); ++r) {
      layout.cells[r].push_back(cut ? std::move((*cut)[r]) : std::move(column[r]));
    }
  }
  return layout;
}

size_t Table::width() const {
  const std::vector<size_t> w = layout().widths;
  size_t total = 0;
  for (const size_t x : w) total += x;
  return total + 2 * (w.empty() ? 0 : w.size() - 1);
}

void Table::print(std::ostream& out) const {
  const Layout cut = layout();
  const std::vector<size_t>& w = cut.widths;
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string cell = truncated(cells[c], w[c], columns_[c].keep_end);
      const std::string pad(w[c] - display_width(cell), ' ');
      if (c > 0) text += "  ";
      text += columns_[c].right_aligned ? pad + cell : cell + pad;
    }
    text.erase(text.find_last_not_of(' ') + 1);
    out << text << "\n";
  };
  std::vector<std::string> headings;
  for (const Column& column : columns_) headings.push_back(column.heading);
  line(headings);
  for (const auto& row : cut.cells) line(row);
}

std::string Table::str() const {
  std::ostringstream out;
  print(out);
  return out.str();
}

std::string table_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{:.4g}", value);
  if (text.size() > kNumberWidth) text = fmt::format("{:.2g}", value);
  return text;
}

}  // namespace tdfx
