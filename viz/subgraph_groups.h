#pragma once

/// \file
/// Plain subgraphs that group many sibling subgraphs of a DOT drawing, for the op view's
/// boxes and the module view's boxes and rows. Internal to viz.

#include <cstddef>
#include <string>

namespace tdfx::detail {

/// At most this many subgraphs side by side in one graph or subgraph.
inline constexpr size_t kSubgraphFanout = 16;

/// Writes the braces of plain (unnamed, non-cluster) subgraphs around `siblings` sibling
/// subgraphs, so that none of them has more than kSubgraphFanout siblings; with that many or
/// fewer it writes nothing, and the DOT text is as if it were not there.
///
/// Why: Graphviz's gvFreeLayout frees each node's and edge's layout record in every subgraph
/// it belongs to (cgraph's agapply), searching every sibling subgraph at each level for it.
/// 2,500 rows of a module view side by side cost it 1.9 s; grouped by 16, 0.1 s. `dot` draws
/// nothing for a plain subgraph and lays out the same positions with or without them.
///
///     SubgraphGroups groups(out, boxes.size(), "  ");
///     for (const Box& box : boxes) write_box(box, groups.next());  // each at the indent given
///     groups.close();
class SubgraphGroups {
 public:
  SubgraphGroups(std::string& out, size_t siblings, std::string indent);
  /// Opens the groups that the next sibling starts; returns the indent to write it at.
  const std::string& next();
  /// Closes the groups still open, after the last sibling.
  void close();

 private:
  std::string& out_;
  std::string base_;
  std::string indent_;
  /// Levels of groups: 0 when the siblings need none.
  size_t depth_ = 0;
  /// Siblings per group at each level, outermost first.
  size_t span_[8] = {};
  size_t written_ = 0;
  size_t open_ = 0;
};

}  // namespace tdfx::detail
