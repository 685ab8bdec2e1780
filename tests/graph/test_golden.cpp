// The graphs of seed 002 built by hand print exactly as the golden files.
#include <doctest/doctest.h>

#include "tdfx/codegen/python_code.h"
#include "tests/graph/graphs.h"
#include "tests/support/test_support.h"

using namespace tdfx;
using namespace tdfx::testing;

TEST_CASE("golden: the seed module graph prints as torch.fx prints it") {
  Graph g = seed_module_graph();
  g.lint();
  CHECK(to_string(g) == golden("seed_module.graph.txt"));
  CHECK(python_code(g) == golden("seed_module.code.txt"));
  CHECK(fmt::format("{}", g) == golden("seed_module.graph.txt"));
}

TEST_CASE("golden: the seed sequential graph prints as torch.fx prints it") {
  Graph g = seed_sequential_graph();
  g.lint();
  CHECK(to_string(g) == golden("seed_sequential.graph.txt"));
  CHECK(python_code(g) == golden("seed_sequential.code.txt"));
}

TEST_CASE("golden: the nested sequential graph prints as torch.fx prints it") {
  Graph g = nested_sequential_graph();
  g.lint();
  CHECK(to_string(g) == golden("nested_sequential.graph.txt"));
  CHECK(python_code(g) == golden("nested_sequential.code.txt"));
}

TEST_CASE("golden: a copied graph prints the same") {
  Graph g = seed_sequential_graph();
  Graph copy = g.copy();
  copy.lint();
  CHECK(to_string(copy) == to_string(g));
  CHECK(python_code(copy) == python_code(g));
}
