#pragma once

/// \file
/// profile: where a run spends its time — each node's median time over
/// repeated runs, its share of the total, and the same grouped by
/// TensorDictModule — sorted, slowest first.
///
///     auto p = profile(debuggee(gm, td), 20);
///     std::cout << p.node_table().str() << p.module_table().str();

#include <string>
#include <vector>

#include "tdfx/core/text_table.h"
#include "tdfx/debug/debuggee.h"

namespace tdfx {

/// One node's time, or one module's.
struct ProfileEntry {
  /// The node name, or the module (`0`, `0.module.1`; "(outside modules)" for nodes of none).
  std::string name;
  /// For a node: its opcode and target (`call_module 0.module.fc1`); for a module: its node
  /// count (`3 nodes`).
  std::string what;
  /// The median over the runs, in microseconds; for a module, the sum of its nodes' medians.
  double median_us = 0;
  /// Its share of the sum of every node's median.
  double share = 0;
};

/// A profile of a run.
struct Profile {
  /// How many runs each node's median is taken over.
  size_t repeats = 0;
  /// Every node but the output, slowest first (program order among equals).
  std::vector<ProfileEntry> nodes;
  /// The nodes grouped by TensorDictModule (NodeMeta::td_module, else the module path),
  /// slowest first.
  std::vector<ProfileEntry> modules;
  /// The sum of the node medians, in microseconds.
  double total_us = 0;

  /// The time per node, slowest first: node, op, median µs and share (`tdfx run --profile`).
  Table node_table(size_t width = kTerminalWidth) const;
  /// The time per TensorDictModule: module, node count, median µs and share, with the nodes outside
  /// any module as one row.
  Table module_table(size_t width = kTerminalWidth) const;
};

/// Runs `debuggee` `repeats` times (at least 1) after one warm-up run, timing each node
/// (steady clock, around Interpreter::run_node).
Profile profile(const Debuggee& debuggee, size_t repeats = 10);

}  // namespace tdfx
