// print_tabular against Python's torch.fx 1.13 Graph.print_tabular() and Debian's
// python3-tabulate: tests/graph/tabular_reference.py builds the same graphs in Python.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "tdfx/graph/tabular.h"
#include "tests/graph/graphs.h"
#include "tests/support/test_support.h"

using namespace tdfx;

namespace {

// Runs the reference script; returns its sections by name, or fails the test
// with what Python printed (python3, torch or tabulate missing).
std::map<std::string, std::string> python_tables() {
  const std::string command =
      "/usr/bin/python3 " + tdfx::testing::source_dir() + "/tests/graph/tabular_reference.py 2>&1";
  const auto result = tdfx::testing::run_command(command);
  const auto sections = tdfx::testing::sections(result.out);
  if (result.status != 0 || sections.count("end") == 0) {
    FAIL(
        "tests/graph/tabular_reference.py needs /usr/bin/python3 with Debian's python3-torch "
        "and python3-tabulate (scripts/bootstrap.sh installs them); it exited with "
        << result.status << " and printed:\n"
        << result.out);
  }
  return sections;
}

Graph long_names() {
  Graph g;
  Node* x = g.placeholder("a_rather_long_placeholder_name_that_widens_its_column");
  Node* w = g.get_attr("encoder.layers.11.self_attention.output_projection.weight");
  Node* p = g.call_module("encoder.layers.11.self_attention.output_projection", {x},
                          {{"note", "a long keyword argument, with 'quotes' and \"both\""}});
  Node* v = g.call_method("view", {p, list({-1, 128})});
  Node* t = g.call_method("transpose", {v, 0, 1});
  Node* mm = g.call_function(Target::aten("aten::matmul"), {t, w});
  g.output(list({mm, v}));
  return g;
}

Graph empty() { return Graph(); }

}  // namespace

TEST_CASE("tabular: print_tabular matches torch.fx's print_tabular for seed and edge graphs") {
  const auto reference = python_tables();
  const std::vector<std::pair<std::string, Graph (*)()>> cases = {
      {"seed_module", testing::seed_module_graph},
      {"seed_sequential", testing::seed_sequential_graph},
      {"nested_sequential", testing::nested_sequential_graph},
      {"all_kinds", testing::all_kinds},
      {"single_output", testing::single_output},
      {"long_names", long_names},
      {"empty", empty}};
  for (const auto& [name, build] : cases) {
    CAPTURE(name);
    const Graph g = build();
    g.lint();
    REQUIRE(reference.count(name) == 1);
    CHECK(print_tabular(g) == reference.at(name));
  }
}

TEST_CASE("tabular: print_tabular shows a graph's rows under FX's headers") {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.call_function(Target::aten("aten::relu"), {x}));
  CHECK(print_tabular(g) ==
        "opcode         name    target      args     kwargs\n"
        "-------------  ------  ----------  -------  --------\n"
        "placeholder    x       x           ()       {}\n"
        "call_function  relu    torch.relu  (x,)     {}\n"
        "output         output  output      (relu,)  {}");
}

TEST_CASE("tabular: a control character in a target never starts a row") {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.call_module("evil\nplaceholder", {x}));
  const std::string table = print_tabular(g);
  CHECK(table.find("evil\\nplaceholder") != std::string::npos);
  CHECK(std::count(table.begin(), table.end(), '\n') == 4);
}

TEST_CASE("tabular: the effects column says what eliminate_dead_code keeps, and why") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* e = g.call_function(Target::aten("aten::empty_like"), {x});
  Node* f = g.call_method("fill_", {e, 1});
  g.call_method("add_", {x, 1});  // named, not resolved: an edit's way of writing it
  Node* r = g.call_function(Target::aten("aten::rand_like"), {x});
  Node* s = g.call_function(Target::aten("aten::sub.Tensor"), {f, r});
  g.call_method("relu", {s});  // unused, and without an effect
  g.output(g.call_function(Target::aten("aten::relu"), {s}));
  TabularOptions options;
  options.effects = true;
  CHECK(g.eliminate_dead_code() == 1);
  CHECK(print_tabular(g, options) ==
        "opcode         name        target            args                kwargs    effects\n"
        "-------------  ----------  ----------------  ------------------  --------  "
        "-------------\n"
        "placeholder    x           x                 ()                  {}\n"
        "call_function  empty_like  torch.empty_like  (x,)                {}        "
        "uninitialised\n"
        "call_method    fill_       fill_             (empty_like, 1)     {}        mutates\n"
        "call_method    add_        add_              (x, 1)              {}        mutates\n"
        "call_function  rand_like   torch.rand_like   (x,)                {}        random\n"
        "call_function  sub         operator.sub      (fill_, rand_like)  {}\n"
        "call_function  relu_1      torch.relu        (sub,)              {}\n"
        "output         output      output            (relu_1,)           {}");
  // Without the option, the table is torch.fx's.
  CHECK(print_tabular(g).find("effects") == std::string::npos);
}
