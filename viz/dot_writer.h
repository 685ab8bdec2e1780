#pragma once

/// \file
/// The DOT writer: the op view's DOT text of a graph (viz/dot_writer.cpp). Graphviz lays it
/// out in render.h; no Graphviz is needed to write it.

#include <cstddef>
#include <string>

#include "tdfx/graph/graph.h"
#include "tdfx/viz/render_options.h"

namespace tdfx {

/// The DOT text of `graph` in `options.view`: pure and deterministic (the same graph and
/// options give the same bytes), needs no Graphviz. In the op view each written key is a
/// row of the node that produces it; above `kMaxOutputEdges` outputs the output node gets
/// no edge per output, since that fan-in is what makes `dot` take minutes on long
/// pipelines. The module view reads `options.modules` and `options.output_keys` only.
std::string to_dot(const Graph& graph, const RenderOptions& options = {});

/// Above this many outputs, the output node lists its keys instead of
/// receiving one edge per output.
inline constexpr size_t kMaxOutputEdges = 16;

}  // namespace tdfx
