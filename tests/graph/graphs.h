#pragma once
// Graphs the graph and codegen tests share, built by hand with tdfx's API.

#include "tdfx/graph/graph.h"

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

/// Every argument kind, as tests/graph/fx_reference.py builds it in Python.
inline Graph all_kinds() {
  Graph g;
  Node* x = g.placeholder("x");
  Node* input = g.placeholder("input");
  Node* td = g.placeholder("tensordict");
  Node* w = g.get_attr("0.module.fc1.weight");
  Node* key = g.call_function(Target::getitem(), {td, NestedKey{"input", "x"}});
  Node* quoted = g.call_function(Target::getitem(), {td, NestedKey("it's")});
  Node* mul = g.call_function(Target::aten("aten::mul.Tensor"), {x, input});
  Node* add = g.call_function(Target::aten("aten::add.Scalar"), {mul, 0.5});
  Node* softmax = g.call_function(Target::aten("aten::softmax.int"), {add, 1});
  Node* matmul = g.call_function(Target::aten("aten::matmul"), {softmax, w});
  Node* neg = g.call_function(Target::aten("aten::neg"), {matmul});
  Node* sub = g.call_function(Target::aten("aten::sub.Tensor"), {neg, key, 1});
  Node* fc1 = g.call_module("0.module.fc1", {sub, quoted},
                            {{"scale", None{}},
                             {"flag", false},
                             {"name", "it's"},
                             {"dims", tuple({1, 2})},
                             {"dtype", c10::ScalarType::Double},
                             {"dev", c10::Device("cpu")},
                             {"fmt", c10::MemoryFormat::ChannelsLast},
                             {"layout", c10::Layout::Sparse}});
  Node* clamp = g.call_function(Target::aten("aten::clamp_min"), {fc1, 1e-05});
  Node* big = g.call_function(Target::aten("aten::add.Scalar"), {clamp, 1e16});
  Node* chunk = g.call_function(Target::aten("aten::chunk"), {big, 2, -1});
  Node* first = g.call_function(Target::getitem(), {chunk, 0});
  Node* sum = g.call_function(Target::aten("aten::sum.dim_IntList"), {first, list({1}), true},
                              {{"dtype", c10::ScalarType::Float}});
  Node* ones = g.call_function(Target::aten("aten::ones"), {list({2, 3})},
                               {{"dtype", c10::ScalarType::Float}, {"device", c10::Device("cpu")}});
  Node* cat = g.call_function(Target::aten("aten::cat"), {list({sum, ones}), 1});
  Node* clone = g.call_function(Target::aten("aten::clone"), {first},
                                {{"memory_format", c10::MemoryFormat::Contiguous}});
  Node* zeros = g.call_function(
      Target::aten("aten::zeros_like"), {clone},
      {{"layout", c10::Layout::Strided}, {"memory_format", c10::MemoryFormat::Preserve}});
  g.output(tuple({cat, first, zeros}));
  return g;
}

/// x → relu → relu → output, as fx_reference.py builds it.
inline Graph single_output() {
  Graph g;
  Node* x = g.placeholder("x");
  Node* relu = g.call_function(Target::aten("aten::relu"), {x});
  g.output(g.call_function(Target::aten("aten::relu"), {relu}));
  return g;
}

}  // namespace tdfx::testing
