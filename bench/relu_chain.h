#pragma once
// A graph the benchmarks run node by node: placeholder x → `length` × aten::relu → output.

#include <cstdint>

#include "tdfx/graph/graph.h"

namespace tdfx::bench {

inline Graph relu_chain(int64_t length) {
  Graph graph;
  const Target relu = Target::aten("aten::relu");
  Node* value = graph.placeholder("x");
  for (int64_t i = 0; i < length; ++i) value = graph.call_function(relu, {value});
  graph.output(value);
  return graph;
}

}  // namespace tdfx::bench
