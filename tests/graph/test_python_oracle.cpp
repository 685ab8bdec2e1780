// tdfx's printers against Python's torch.fx 1.13 on graphs that use every
// argument kind: tests/graph/fx_reference.py builds the same graphs in Python.
#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <memory>

#include "codegen/python_code.h"
#include "core/enum_names.h"
#include "tests/support/test_support.h"

using namespace tdfx;

namespace {

// Runs the reference script; returns its sections by marker (empty when
// Python's torch cannot run it: the test then fails, printing what Python said).
std::map<std::string, std::string> python_reference() {
  const std::string command =
      "/usr/bin/python3 " + tdfx::testing::source_dir() + "/tests/graph/fx_reference.py 2>&1";
  const std::string text = tdfx::testing::run_command(command).out;
  const auto sections = tdfx::testing::sections(text);
  if (sections.empty()) MESSAGE("reference script printed: " << text);
  return sections;
}

Graph all_kinds() {
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

Graph single_output() {
  Graph g;
  Node* x = g.placeholder("x");
  Node* relu = g.call_function(Target::aten("aten::relu"), {x});
  g.output(g.call_function(Target::aten("aten::relu"), {relu}));
  return g;
}

Graph one_tuple_output() {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(tuple({g.call_function(Target::aten("aten::sigmoid"), {x})}));
  return g;
}

}  // namespace

TEST_CASE("python oracle: graph text and code match torch.fx 1.13 for every argument kind") {
  const auto reference = python_reference();
  REQUIRE_MESSAGE(!reference.empty(), "Python's torch.fx (Debian python3-torch) is required");
  const std::vector<std::pair<std::string, Graph (*)()>> cases = {
      {"all_kinds", all_kinds},
      {"single_output", single_output},
      {"one_tuple_output", one_tuple_output}};
  for (const auto& [name, build] : cases) {
    CAPTURE(name);
    Graph g = build();
    g.lint();
    CHECK(to_string(g) == reference.at(name + " graph"));
    CHECK(python_code(g) == reference.at(name + " code"));
  }
}

TEST_CASE("python oracle: every memory format and layout prints as Python's torch names it") {
  // One line per value, `kind int repr`, in the order fx_reference.py sorts them.
  std::string names;
  for (int i = 0; i < static_cast<int>(c10::Layout::NumOptions); ++i)
    names += fmt::format("layout {} {}\n", i, layout_repr(static_cast<c10::Layout>(i)));
  for (int i = 0; i < static_cast<int>(c10::MemoryFormat::NumOptions); ++i) {
    names += fmt::format("memory_format {} {}\n", i,
                         memory_format_repr(static_cast<c10::MemoryFormat>(i)));
  }
  names.pop_back();
  const auto reference = python_reference();
  REQUIRE_MESSAGE(!reference.empty(), "Python's torch.fx (Debian python3-torch) is required");
  CHECK(names == reference.at("enum names"));
}
