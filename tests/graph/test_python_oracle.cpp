// tdfx's printers against Python's torch.fx 1.13 on graphs that use every
// argument kind: tests/graph/fx_reference.py builds the same graphs in Python.
#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <memory>

#include "tdfx/codegen/python_code.h"
#include "tdfx/core/enum_names.h"
#include "tests/graph/graphs.h"
#include "tests/support/test_support.h"

using namespace tdfx;
using tdfx::testing::all_kinds;
using tdfx::testing::single_output;

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
