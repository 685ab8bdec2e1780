#pragma once

/// \file
/// print_tabular: a graph as the table torch.fx's `Graph.print_tabular()` prints.

#include <string>

#include "tdfx/graph/graph.h"

namespace tdfx {

/// What print_tabular adds to torch.fx's table.
struct TabularOptions {
  /// An `effects` column (below).
  bool effects = false;
};

/// The table torch.fx's `graph.print_tabular()` prints, without its final
/// newline: one row per node under the headers opcode, name, target, args,
/// kwargs, laid out as the `tabulate` package's default "simple" format does
/// (columns two spaces apart, each at least two wider than its header, cells
/// left-aligned, trailing spaces dropped). Args and kwargs are Python's `str`
/// of the node's tuple and dict (`(getitem,)`, `{'dim': 1}`); a call_function
/// shows its torch.fx face, as `str(graph)` does.
///
///     opcode         name    target      args     kwargs
///     -------------  ------  ----------  -------  --------
///     placeholder    x       x           ()       {}
///     call_function  relu    torch.relu  (x,)     {}
///     output         output  output      (relu,)  {}
///
/// Differences from Python: a builtin target prints as the name `str(graph)`
/// shows (`torch.relu`), where Python prints its object (`<built-in method relu
/// of type object at 0x7f…>`, an address that differs in every process);
/// control characters in a target are escaped (`\n`) so a cell never spans
/// lines; widths count code points, as tabulate does without the wcwidth
/// package; and a column whose every cell reads as a number (possible only in a
/// graph without an output node) stays left-aligned, where tabulate would
/// right-align it.
///
/// With `options.effects`, a sixth column, `effects`, says what each node does besides giving
/// its result (effect_of in effects.h: mutates, running stats, random, asserts, uninitialised):
/// what eliminate_dead_code keeps, and an allocation whose value means nothing until written.
/// torch.fx has no such column.
std::string print_tabular(const Graph& graph, const TabularOptions& options = {});

}  // namespace tdfx
