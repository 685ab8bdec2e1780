#pragma once

/// \file
/// Plain-text tables for the terminal: columns sized to their contents up to a
/// maximum, text truncated with an ellipsis, numbers right-aligned. Used by
/// `tdfx run` for its inputs and outputs, and by the debugging tools'
/// statistics and profiles (debug/).

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace tdfx {

/// One column: its heading, its widest cell in characters (0: the room the
/// other columns leave in the table's width) and its alignment. Longer text
/// is cut with `…` at its end, or at its start when `keep_end` (file paths,
/// whose last part names the file).
struct Column {
  /// The column's heading, the first line of the table.
  std::string heading;
  /// Its widest cell in characters; 0: the room the other columns leave in the table's width.
  size_t max_width;
  /// Cells and heading aligned to the right (numbers), else to the left.
  bool right_aligned = false;
  /// A cell too long is cut at its start, keeping its end, else at its end.
  bool keep_end = false;
};

/// The width of a terminal tables fit by default.
inline constexpr size_t kTerminalWidth = 80;
///@{
/// The narrowest and widest table width a user may ask for (`--width`, `COLUMNS`).
inline constexpr size_t kMinTableWidth = 40;
inline constexpr size_t kMaxTableWidth = 1000;
///@}

/// The fewest characters a column without a maximum (names, keys) is cut to, however narrow
/// the table: a table whose other columns leave less is wider than asked.
inline constexpr size_t kMinNameWidth = 16;

/// A table printed with two spaces between columns and no trailing spaces, at most
/// `max_width` characters wide (see kMinNameWidth). A cut never makes two different cells of
/// a column look the same: those that would are cut inside, keeping the ends that tell them
/// apart (`('next', 'recu…', 'h')`, `('next', 'recu…', 'c')`); where no cut to the column's
/// width can (`module.1.module.layers.0.linear1.weight` and `…layers.1.linear1.weight`), the
/// column is widened until one does, and the table is wider than asked.
///
///     output        dtype    shape     min
///     ('out', 'y')  float32  [2, 3]  -1.52
class Table {
 public:
  /// A table of `columns`, printed at most `max_width` characters wide where the rule above allows.
  explicit Table(std::vector<Column> columns, size_t max_width = kTerminalWidth)
      : columns_(std::move(columns)), max_width_(max_width) {}
  /// Adds a row of one cell per column.
  void add_row(std::vector<std::string> cells);
  /// The widest line the table prints, in characters.
  size_t width() const;
  /// Writes the heading line and each row, one a line, the columns two spaces apart.
  void print(std::ostream& out) const;
  /// What print() writes.
  std::string str() const;

 private:
  /// The widths the columns get before any cut, from their contents and the table's width.
  std::vector<size_t> widths() const;
  /// The widths as printed (widened where a cut would be ambiguous) and the cells cut to them.
  struct Layout {
    std::vector<size_t> widths;
    std::vector<std::vector<std::string>> cells;
  };
  Layout layout() const;
  std::vector<Column> columns_;
  size_t max_width_;
  std::vector<std::vector<std::string>> rows_;
};

/// The number of characters `text` shows (UTF-8 code points).
size_t display_width(const std::string& text);

/// `text` cut to `width` characters, its last one `…` when cut (its first one
/// when `keep_end`).
std::string truncated(const std::string& text, size_t width, bool keep_end = false);

/// The widest number table_number gives.
inline constexpr size_t kNumberWidth = 9;

/// A number for a table in at most kNumberWidth characters: 4 significant digits (2 when
/// an exponent needs the room), `nan`, `inf`, `-inf`.
///
///     table_number(0.000123456789) == "0.0001235"    table_number(-1.5e-12) == "-1.5e-12"
std::string table_number(double value);

}  // namespace tdfx
