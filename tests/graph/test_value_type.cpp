// The type of each node's result (graph/value_type.h), worked out from the graph alone.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/graph/value_type.h"

using namespace tdfx;

namespace {

Node* batch_input(Graph& g) {
  Node* x = g.placeholder("x");
  x->meta().tensor.dtype = at::kFloat;
  x->meta().tensor.shape = std::vector<int64_t>{4, 3};
  x->meta().tensor.batch_dims = {0};
  return x;
}

Target arith(Target::SizeArith op) { return Target::size_arith(op); }

}  // namespace

TEST_CASE("value types: operators, items, and sizes that are functions of the batch") {
  Graph g;
  Node* x = batch_input(g);
  Node* max = g.call_function(Target::aten("aten::max.dim"), {x, int64_t{1}});
  Node* values = g.call_function(Target::getitem(), {max, int64_t{0}});
  Node* last = g.call_function(Target::getitem(), {max, int64_t{-1}});
  Node* parts = g.call_function(Target::aten("aten::split.Tensor"), {x, int64_t{1}});
  Node* part = g.call_function(Target::getitem(), {parts, int64_t{2}});
  Node* size = g.call_function(Target::aten("aten::size.int"), {x, int64_t{0}});
  Node* width = g.call_function(Target::aten("aten::size.int"), {x, int64_t{1}});
  Node* mul = g.call_function(arith(Target::SizeArith::kMul), {size, int64_t{5}});
  Node* add = g.call_function(arith(Target::SizeArith::kAdd), {mul, int64_t{3}});
  Node* half = g.call_function(arith(Target::SizeArith::kFloorDiv), {size, int64_t{2}});
  Node* less = g.call_function(arith(Target::SizeArith::kSub), {size, int64_t{1}});
  Node* twice = g.call_function(arith(Target::SizeArith::kMul), {int64_t{2}, size});
  Node* square = g.call_function(arith(Target::SizeArith::kMul), {size, size});
  Node* flag = g.call_function(Target::aten("aten::is_nonzero"), {values});
  g.output(tuple({values, last, part, add, half, less, twice, square, width, flag}));
  const ValueTypes types(g);
  auto str = [&](const Node* n) { return types.of(n).str(); };
  CHECK(str(x) == "Tensor");
  CHECK(str(max) == "Tuple[Tensor, Tensor]");
  CHECK(str(values) == "Tensor");
  CHECK(str(last) == "Tensor");
  CHECK(str(parts) == "List[Tensor]");
  CHECK(str(part) == "Tensor");
  CHECK(str(size) == "Sym(s0)");
  CHECK(str(width) == "int");
  CHECK(str(mul) == "Sym(5*s0)");
  CHECK(str(add) == "Sym(5*s0 + 3)");
  CHECK(str(half) == "Sym((s0//2))");
  CHECK(str(less) == "Sym(s0 - 1)");
  CHECK(str(twice) == "Sym(2*s0)");
  CHECK(str(square) == "int");  // no affine function of the batch
  CHECK(str(flag) == "bool");
  CHECK(str(g.output_node()) == "None");
  CHECK_NOTHROW(check_value_types(g, types));
}

TEST_CASE("value types: a value taken as a type it is not is refused, by name") {
  SUBCASE("an item of a tensor") {
    Graph g;
    Node* x = batch_input(g);
    g.output(g.call_function(Target::getitem(), {x, int64_t{0}}));
    CHECK_THROWS_WITH_AS(check_value_types(g, ValueTypes(g)),
                         "%getitem takes %x, a Tensor, where operator.getitem takes a list or a "
                         "tuple",
                         GraphError);
  }
  SUBCASE("an item past a tuple's end") {
    Graph g;
    Node* x = batch_input(g);
    Node* max = g.call_function(Target::aten("aten::max.dim"), {x, int64_t{1}});
    g.output(g.call_function(Target::getitem(), {max, int64_t{2}}));
    CHECK_THROWS_WITH_AS(check_value_types(g, ValueTypes(g)),
                         "%getitem takes item 2 of %max_1, a Tuple[Tensor, Tensor] of 2 item(s)",
                         GraphError);
  }
  SUBCASE("size arithmetic on a tensor") {
    Graph g;
    Node* x = batch_input(g);
    g.output(g.call_function(Target::size_arith(Target::SizeArith::kMul), {x, int64_t{2}}));
    CHECK_THROWS_WITH_AS(check_value_types(g, ValueTypes(g)),
                         "%mul takes %x, a Tensor, where operator.mul takes ints", GraphError);
  }
}

TEST_CASE("value types: a placeholder a user adds may hold a tuple") {
  Graph g;
  Node* pair = g.placeholder("pair");  // no recorded tensor: its type is unknown
  g.output(g.call_function(Target::getitem(), {pair, int64_t{1}}));
  const ValueTypes types(g);
  CHECK(types.of(pair).str() == "Any");
  CHECK_NOTHROW(check_value_types(g, types));
  GraphModule gm(nullptr, std::move(g));
  const at::Tensor a = at::ones({2}), b = at::zeros({3});
  const auto out = gm.run({c10::ivalue::Tuple::create({a, b})});
  CHECK(out.at(0).toTensor().equal(b));
}

TEST_CASE("value types: a graph module refuses an item of a tensor when it compiles") {
  Graph g;
  Node* x = batch_input(g);
  g.output(g.call_function(Target::getitem(), {x, int64_t{0}}));
  CHECK_THROWS_WITH_AS(GraphModule(nullptr, std::move(g)),
                       doctest::Contains("%getitem takes %x, a Tensor"), GraphError);
}

TEST_CASE(
    "value types: a graph module refuses a list item of a type its schema's list cannot hold") {
  // view's sizes are int[]: a tensor among them is refused when the plan is made, naming the
  // node, the item and both types; a size node (an int) is taken.
  // A graph of one op on the input x and its size `size`, with the arguments `args` makes.
  auto graph_of = [](const char* op, const std::function<Args(Node * x, Node * size)>& args) {
    Graph g;
    Node* x = batch_input(g);
    Node* size = g.call_function(Target::aten("aten::size.int"), {x, int64_t{0}});
    g.output(g.call_function(Target::aten(op), args(x, size)));
    return g;
  };
  CHECK_THROWS_WITH_AS(
      GraphModule(nullptr, graph_of("aten::view",
                                    [](Node* x, Node* size) {
                                      return Args{x, list({size, x})};
                                    })),
      "%view: a list argument of aten::view holds %x, of type Tensor, where the schema takes "
      "int[]",
      GraphError);
  // cat's tensors are Tensor[]: a size is refused.
  CHECK_THROWS_WITH_AS(
      GraphModule(nullptr, graph_of("aten::cat",
                                    [](Node* x, Node* size) {
                                      return Args{list({x, size}), int64_t{0}};
                                    })),
      "%cat: a list argument of aten::cat holds %size, of type Sym(s0), where the schema takes "
      "Tensor[]",
      GraphError);
  // A size in view's sizes runs.
  GraphModule gm(nullptr, graph_of("aten::view", [](Node* x, Node* size) {
                   return Args{x, list({size, int64_t{-1}})};
                 }));
  CHECK(gm.run({at::ones({4, 3})}).at(0).toTensor().sizes() == at::IntArrayRef({4, 3}));
}
