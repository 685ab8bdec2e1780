#include "tdfx/graph/tabular.h"

#include <vector>

#include "tdfx/core/python_repr.h"
#include "tdfx/graph/effects.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/graph_printer.h"

namespace tdfx {
namespace {

using Row = std::vector<std::string>;

// Python's `str` of a node's kwargs dict: `{'dim': 1}`.
std::string dict_str(const Kwargs& kwargs) {
  std::string out = "{";
  for (size_t i = 0; i < kwargs.size(); ++i) {
    out += (i ? ", " : "") + python_repr(kwargs[i].first) + ": " + fx_repr(kwargs[i].second);
  }
  return out + "}";
}

Row node_row(const Node& node) {
  std::string target = node.target().str();
  Args args = node.args();
  Kwargs kwargs = node.kwargs();
  if (node.op() == OpCode::kCallFunction) {
    FxCall call = fx_call(node);
    target = std::move(call.target);
    args = std::move(call.args);
    kwargs = std::move(call.kwargs);
  }
  return {std::string(to_string(node.op())), node.name(), escape_controls(target),
          fx_repr(tuple(std::move(args))), dict_str(kwargs)};
}

// tabulate strips each cell (its PRESERVE_WHITESPACE is off); controls are escaped by now.
std::string stripped(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// Width as tabulate measures it without wcwidth: len() of the str, in code points.
size_t width(const std::string& text) {
  size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// One line of the table: cells left-aligned to their widths, two spaces apart,
// trailing spaces dropped.
std::string line(const Row& cells, const std::vector<size_t>& widths) {
  std::string out;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) out += "  ";
    out += cells[i] + std::string(widths[i] - width(cells[i]), ' ');
  }
  return out.erase(out.find_last_not_of(' ') + 1);
}

}  // namespace

std::string print_tabular(const Graph& graph, const TabularOptions& options) {
  Row headers = {"opcode", "name", "target", "args", "kwargs"};
  if (options.effects) headers.push_back("effects");
  std::vector<Row> rows;
  rows.reserve(graph.size());
  for (const Node* node : graph.nodes()) {
    Row row = node_row(*node);
    if (options.effects) row.emplace_back(effect_of(*node));
    for (auto& cell : row) cell = stripped(cell);
    rows.push_back(std::move(row));
  }
  // tabulate's minimum: a column is two wider than its header.
  std::vector<size_t> widths(headers.size());
  Row dashes(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) {
    widths[i] = width(headers[i]) + 2;
    for (const Row& row : rows) widths[i] = std::max(widths[i], width(row[i]));
    dashes[i] = std::string(widths[i], '-');
  }
  std::string out = line(headers, widths) + "\n" + line(dashes, widths);
  for (const Row& row : rows) out += "\n" + line(row, widths);
  return out;
}

}  // namespace tdfx
