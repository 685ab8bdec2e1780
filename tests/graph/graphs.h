#pragma once
// Graphs the graph and codegen tests share, built by hand with tdfx's API.

#include "graph/graph.h"

namespace tdfx::testing {

/// The graph of seed 002's first example (golden/seed_module.*).
inline Graph seed_module_graph() {
  Graph g;
  Node* td = g.placeholder("tensordict");
  Node* input = g.call_function(Target::getitem(), {td, NestedKey("input")});
  Node* linear = g.call_module("linear", {input});
  Node* sigmoid = g.call_function(Target::aten("aten::sigmoid"), {linear});
  g.output(tuple({linear, sigmoid}));
  return g;
}

/// The graph of seed 002's second example (golden/seed_sequential.*).
inline Graph seed_sequential_graph() {
  Graph g;
  Node* td = g.placeholder("tensordict");
  Node* x = g.call_function(Target::getitem(), {td, NestedKey{"input", "x"}});
  Node* fc1 = g.create_node(OpCode::kCallModule, Target("0.module.fc1"), {x}, {}, "_0_fc1");
  Node* relu = g.call_function(Target::aten("aten::relu"), {fc1});
  Node* fc2 = g.create_node(OpCode::kCallModule, Target("0.module.fc2"), {relu}, {}, "_0_fc2");
  Node* mask = g.call_function(Target::getitem(), {td, NestedKey{"input", "mask"}});
  Node* mul = g.call_function(Target::aten("aten::mul.Tensor"), {fc2, mask});
  Node* softmax = g.call_function(Target::aten("aten::softmax.int"), {mul}, {{"dim", 1}});
  g.output(tuple({fc2, softmax}));
  return g;
}

/// The graph of the nested sequential (golden/nested_sequential.*).
inline Graph nested_sequential_graph() {
  Graph g;
  Node* td = g.placeholder("tensordict");
  Node* input = g.call_function(Target::getitem(), {td, NestedKey("input")});
  Node* fc0 =
      g.create_node(OpCode::kCallModule, Target("0.module.0.module.fc"), {input}, {}, "_0__0_fc");
  Node* relu = g.call_function(Target::aten("aten::relu"), {fc0});
  Node* fc1 =
      g.create_node(OpCode::kCallModule, Target("0.module.1.module.fc"), {relu}, {}, "_0__1_fc_1");
  Node* relu1 = g.call_function(Target::aten("aten::relu"), {fc1});
  Node* fc = g.create_node(OpCode::kCallModule, Target("1.module.fc"), {relu1}, {}, "_1_fc");
  Node* softmax = g.call_function(Target::aten("aten::softmax.int"), {fc, 1});
  g.output(tuple({relu1, softmax}));
  return g;
}

}  // namespace tdfx::testing
