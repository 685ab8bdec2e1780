#pragma once

/// \file
/// The graph printer: torch.fx's text form of graphs, nodes and arguments (`str(graph)`,
/// `node.format_node()`, and how an argument prints in graph text and in code). graph.h
/// includes this header, so `std::cout << graph` and `fmt::print("{}", node)` work with
/// graph.h alone.

#include <fmt/format.h>

#include <iosfwd>
#include <string>
#include <string_view>

#include "tdfx/graph/graph.h"

namespace tdfx {

/// torch.fx's `str(graph)`: `graph():` and one line per node.
std::string to_string(const Graph& graph);
/// torch.fx's `node.format_node()`.
std::string to_string(const Node& node);
/// Writes to_string(graph): `std::cout << graph` prints as Python's `print(graph)`.
std::ostream& operator<<(std::ostream& os, const Graph& graph);
/// Writes to_string(node), the node's `format_node()` line.
std::ostream& operator<<(std::ostream& os, const Node& node);

/// An argument as torch.fx's graph text prints it (`%x`, `(input, x)`, `1e-05`).
std::string fx_str(const Argument& arg);
/// An argument as torch.fx's generated code prints it (`x`, `('input', 'x')`).
std::string fx_repr(const Argument& arg);
/// A node's positional arguments as torch.fx's graph text prints them: `(%x, 1)`.
std::string fx_args_str(const Args& args);
/// A node's keyword arguments as torch.fx's graph text prints them: `{dim: 1}`.
std::string fx_kwargs_str(const Kwargs& kwargs);

/// A one-line description of a node for error messages, control characters escaped:
/// `%relu = torch.relu(%_0_fc1)`.
std::string describe(const Node& node);

}  // namespace tdfx

/// `fmt::format("{}", graph)` is torch.fx's `str(graph)`, as to_string(graph).
template <>
struct fmt::formatter<tdfx::Graph> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const tdfx::Graph& graph, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tdfx::to_string(graph), ctx);
  }
};

/// `fmt::format("{}", node)` is torch.fx's `node.format_node()`, as to_string(node).
template <>
struct fmt::formatter<tdfx::Node> : fmt::formatter<std::string_view> {
  template <typename Ctx>
  auto format(const tdfx::Node& node, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tdfx::to_string(node), ctx);
  }
};
