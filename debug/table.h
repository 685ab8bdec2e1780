#pragma once

/// \file
/// A plain-text table that fits a terminal: columns sized to their content,
/// text left-aligned and numbers right-aligned, and the widest text column
/// shortened with an ellipsis when the table would be wider than asked.

#include <string>
#include <vector>

namespace tdfx {

/// A table to print: a header row and rows of cells.
struct Table {
  std::vector<std::string> headers;
  /// True for the columns that hold numbers (right-aligned).
  std::vector<bool> numeric;
  std::vector<std::vector<std::string>> rows;

  /// The table as text, one line per row under a header and a rule, at most `width`
  /// columns wide when the numeric columns allow it.
  ///
  ///     node       op             time µs  share
  ///     ---------  -------------  -------  -----
  ///     _0_fc1     call_module       12.5  61.0%
  std::string str(size_t width = 100) const;
};

/// `text` shortened to `width` display columns with a trailing "…" when longer.
std::string ellipsize(const std::string& text, size_t width);

/// A number for a table: up to 6 significant digits, `nan`, `inf`, `-inf`.
std::string table_number(double value);

}  // namespace tdfx
