// An Interpreter and ShapeProp over traced pipelines, and editing a traced module.
#include <doctest/doctest.h>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/interpreter.h"
#include "tests/tracer/tracer_test_support.h"

using namespace tdfx;
using namespace tdfx::testing;

TEST_CASE("interpret traced: an Interpreter runs the printed graph to forward's values") {
  auto module = samples::seed_sequential();
  const TensorDict input = samples::seed_sequential_input();
  const TDGraphModule gm = symbolic_trace(module, input);
  struct Names : Interpreter {
    using Interpreter::Interpreter;
    std::vector<std::string> seen;
    c10::IValue run_node(const Node& node) override {
      seen.push_back(node.name());
      return Interpreter::run_node(node);
    }
  };
  Names interp(gm.graph_module());
  const auto out = interp.run(gm.graph_inputs(input)).toTupleRef().elements();
  std::vector<std::string> printed;
  for (const Node* node : gm.graph().nodes()) printed.push_back(node->name());
  CHECK(interp.seen == printed);
  const auto expected = gm.run(input);
  REQUIRE(out.size() == expected.size());
  for (size_t i = 0; i < out.size(); ++i) CHECK(bit_equal(out[i].toTensor(), expected[i]));
}

TEST_CASE("interpret traced: ShapeProp at the traced inputs gives every node its traced meta") {
  auto module = samples::nested_sequential();
  const TensorDict input = samples::nested_sequential_input();
  const TDGraphModule gm = symbolic_trace(module, input);
  GraphModule copy(gm.root(), gm.graph().copy());
  for (Node* node : copy.mutable_graph().nodes()) node->meta().tensor = TensorMeta{};
  ShapeProp(copy).propagate(gm.graph_inputs(input));
  const auto traced = gm.graph().node_list();
  const auto propagated = copy.graph().node_list();
  REQUIRE(traced.size() == propagated.size());
  for (size_t i = 0; i < traced.size(); ++i) {
    CAPTURE(traced[i]->name());
    if (!traced[i]->meta().tensor.shape) continue;  // the tensordict placeholder, the output
    CHECK(propagated[i]->meta().tensor.shape == traced[i]->meta().tensor.shape);
    CHECK(propagated[i]->meta().tensor.dtype == traced[i]->meta().tensor.dtype);
  }
}

TEST_CASE("interpret traced: an edited traced module runs the edit after recompile") {
  auto module = samples::seed_sequential();
  const TensorDict input = samples::seed_sequential_input();
  TDGraphModule gm = symbolic_trace(module, input);
  Graph& graph = gm.mutable_graph();
  Node* relu = nullptr;
  for (Node* node : graph.nodes()) {
    if (node->name() == "relu") relu = node;
  }
  REQUIRE(relu);
  Node* neg;
  {
    auto guard = graph.inserting_after(relu);
    neg = graph.call_function(Target::aten("aten::neg"), {relu});
  }
  for (Node* user : relu->users()) {
    if (user != neg) user->replace_input_with(relu, neg);
  }
  CHECK_THROWS_WITH_AS(gm.run(input), "the graph was edited; call recompile() before running it",
                       GraphError);
  gm.recompile();
  // The inserted node gets its dtype and shape from shape propagation.
  CHECK(neg->meta().tensor.shape == relu->meta().tensor.shape);
  CHECK(neg->meta().tensor.dtype == relu->meta().tensor.dtype);
  // What the edit computes, by hand: fc2(-relu(fc1(x))) * mask, then softmax.
  const auto x = input.get(NestedKey{"input", "x"});
  const auto mask = input.get(NestedKey{"input", "mask"});
  const auto& root = *gm.root();
  at::Tensor w1, b1, w2, b2;
  for (const auto& p : root.named_parameters()) {
    if (p.key() == "0.module.fc1.weight") w1 = p.value();
    if (p.key() == "0.module.fc1.bias") b1 = p.value();
    if (p.key() == "0.module.fc2.weight") w2 = p.value();
    if (p.key() == "0.module.fc2.bias") b2 = p.value();
  }
  const auto hidden = at::linear(at::neg(at::relu(at::linear(x, w1, b1))), w2, b2);
  const auto out = gm.run(input);
  CHECK(bit_equal(out[0], hidden));
  CHECK(bit_equal(out[1], at::softmax(hidden * mask, 1)));
  CHECK(gm.code() == R"(


def forward(self, tensordict):
    getitem = tensordict[('input', 'x')]
    _0_fc1 = getattr(self, "0").module.fc1(getitem);  getitem = None
    relu = torch.relu(_0_fc1);  _0_fc1 = None
    neg = -relu;  relu = None
    _0_fc2 = getattr(self, "0").module.fc2(neg);  neg = None
    getitem_1 = tensordict[('input', 'mask')];  tensordict = None
    mul = _0_fc2 * getitem_1;  getitem_1 = None
    softmax = torch.softmax(mul, dim = 1);  mul = None
    return (_0_fc2, softmax)
    )");
}

TEST_CASE("interpret traced: a recompile is refused when the output no longer fits the keys") {
  auto module = samples::seed_sequential();
  TDGraphModule gm = symbolic_trace(module, samples::seed_sequential_input());
  Graph& graph = gm.mutable_graph();
  Node* output = graph.output_node();
  output->set_args({output->args()[0].as<ArgumentList>().items[0]});
  CHECK_THROWS_WITH_AS(gm.recompile(),
                       "the edited graph returns 1 value(s); the module writes 2 out key(s)",
                       GraphError);
}

TEST_CASE("interpret traced: an edit through a kept reference is refused until recompile") {
  auto module = samples::seed_sequential();
  const TensorDict input = samples::seed_sequential_input();
  TDGraphModule gm = symbolic_trace(module, input);
  Graph& graph = gm.mutable_graph();
  gm.recompile();
  for (Node* node : graph.nodes()) {
    if (node->name() == "relu") node->set_target(Target::aten("aten::sigmoid"));
  }
  CHECK_THROWS_WITH_AS(gm.run(input), "the graph was edited; call recompile() before running it",
                       GraphError);
  CHECK_THROWS_WITH_AS(gm.graph_module(),
                       "the graph was edited; call recompile() before running it", GraphError);
  gm.recompile();
  CHECK(gm.code().find("relu = torch.sigmoid(_0_fc1)") != std::string::npos);
}
