// GraphModule runs graphs with results bit-identical to calling the ops directly.
#include <doctest/doctest.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>

#include <functional>

#include "tdfx/core/error.h"
#include "tdfx/graph/graph_module.h"

using namespace tdfx;

namespace {

// A root with one Linear at "0.module.fc1", as a traced sequential's root.
std::shared_ptr<torch::nn::Module> make_root() {
  auto inner = std::make_shared<torch::nn::Module>();
  inner->register_module("fc1", torch::nn::Linear(4, 3));
  auto wrapper = std::make_shared<torch::nn::Module>();
  wrapper->register_module("module", inner);
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("0", wrapper);
  return root;
}

}  // namespace

TEST_CASE("graph module: runs aten ops, getitem on chunks and scalars like eager code") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* mask = g.placeholder("mask");
  Node* mul = g.call_function(Target::aten("aten::mul.Tensor"), {x, mask});
  Node* add = g.call_function(Target::aten("aten::add.Scalar"), {mul, 0.5});
  Node* softmax = g.call_function(Target::aten("aten::softmax.int"), {add}, {{"dim", 1}});
  Node* chunk = g.call_function(Target::aten("aten::chunk"), {softmax, 2, -1});
  Node* first = g.call_function(Target::getitem(), {chunk, 0});
  Node* second = g.call_function(Target::getitem(), {chunk, -1});
  Node* clamp = g.call_function(Target::aten("aten::clamp_min"), {second, 1e-4});
  Node* cat = g.call_function(Target::aten("aten::cat"), {list({first, clamp}), 1});
  g.output(tuple({cat, first}));
  GraphModule gm(nullptr, std::move(g));

  const auto xs = at::randn({5, 6});
  const auto ms = at::randn({5, 6});
  const auto out = gm.run({xs, ms});
  REQUIRE(out.size() == 2);
  const auto s = at::softmax(xs * ms + 0.5, 1);
  const auto parts = s.chunk(2, -1);
  const auto expected = at::cat({parts[0], parts[1].clamp_min(1e-4)}, 1);
  CHECK(at::equal(out[0].toTensor(), expected));
  CHECK(at::equal(out[1].toTensor(), parts[0]));
}

TEST_CASE(
    "graph module: memory formats and layouts reach the ops, bit for bit and stride for stride") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* clone = g.call_function(Target::aten("aten::clone"), {x},
                                {{"memory_format", c10::MemoryFormat::ChannelsLast}});
  Node* zeros = g.call_function(
      Target::aten("aten::zeros_like"), {x},
      {{"layout", c10::Layout::Strided}, {"memory_format", c10::MemoryFormat::ChannelsLast}});
  Node* to = g.call_function(Target::aten("aten::to.dtype_layout"), {clone},
                             {{"dtype", c10::ScalarType::Double},
                              {"layout", c10::Layout::Strided},
                              {"memory_format", c10::MemoryFormat::Contiguous}});
  Node* contiguous = g.call_function(Target::aten("aten::contiguous"), {clone},
                                     {{"memory_format", c10::MemoryFormat::Contiguous}});
  g.output(tuple({clone, zeros, to, contiguous}));
  GraphModule gm(nullptr, std::move(g));

  const auto xs = at::randn({2, 3, 4, 5});
  const auto out = gm.run({xs});
  const auto eager_clone = xs.clone(at::MemoryFormat::ChannelsLast);
  const std::vector<at::Tensor> expected = {
      eager_clone,
      at::zeros_like(xs, at::TensorOptions().layout(at::kStrided), at::MemoryFormat::ChannelsLast),
      eager_clone.to(at::TensorOptions().dtype(at::kDouble).layout(at::kStrided), false, false,
                     at::MemoryFormat::Contiguous),
      eager_clone.contiguous(at::MemoryFormat::Contiguous)};
  REQUIRE(out.size() == expected.size());
  for (size_t i = 0; i < out.size(); ++i) {
    CAPTURE(i);
    const at::Tensor got = out[i].toTensor();
    CHECK(got.dtype() == expected[i].dtype());
    CHECK(got.strides() == expected[i].strides());
    CHECK(at::equal(got, expected[i]));
  }
  CHECK(out[0].toTensor().is_contiguous(at::MemoryFormat::ChannelsLast));
  CHECK(out[3].toTensor().is_contiguous());
}

TEST_CASE("graph module: an enum of another kind than the schema's is refused, naming the node") {
  // It would reach the operator as an int meaning something else (strided = contiguous_format).
  Graph g;
  Node* x = g.placeholder("x");
  g.output(
      g.call_function(Target::aten("aten::clone"), {x}, {{"memory_format", c10::Layout::Strided}}));
  CHECK_THROWS_WITH_AS(GraphModule(nullptr, std::move(g)),
                       "%clone: argument 'memory_format' of aten::clone is torch.strided, where "
                       "the schema takes MemoryFormat",
                       GraphError);
}

TEST_CASE("graph module: get_attr reads parameters and call_module runs the body graph") {
  auto root = make_root();
  auto body = std::make_shared<Graph>();
  {
    Node* input = body->placeholder("input");
    Node* w = body->get_attr("weight");
    Node* b = body->get_attr("bias");
    body->output(body->call_function(Target::aten("aten::linear"), {input, w, b}));
  }
  Graph g;
  Node* x = g.placeholder("x");
  Node* fc = g.create_node(OpCode::kCallModule, Target("0.module.fc1"), {x}, {}, "_0_fc1");
  fc->set_body(body);
  Node* w = g.get_attr("0.module.fc1.weight");
  Node* relu = g.call_function(Target::aten("aten::relu"), {fc});
  g.output(tuple({relu, w}));
  GraphModule gm(root, std::move(g));

  const auto xs = at::randn({2, 4});
  const auto out = gm.run({xs});
  auto& linear = *root->named_modules()["0.module.fc1"]->as<torch::nn::LinearImpl>();
  CHECK(at::equal(out[0].toTensor(), at::relu(linear.forward(xs))));
  CHECK(out[1].toTensor().is_same(linear.weight));
}

TEST_CASE("graph module: a failing op names the node being executed") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  Node* mul = g.call_function(Target::aten("aten::mm"), {x, y});
  g.output(mul);
  GraphModule gm(nullptr, std::move(g));
  CHECK_THROWS_WITH_AS(gm.run({at::ones({2, 3}), at::ones({2, 3})}),
                       doctest::Contains("while executing %mm = torch.mm(%x, %y)"), RunError);
  CHECK_THROWS_WITH_AS(gm.run({at::ones({2, 3})}), doctest::Contains("takes 2 inputs"), RunError);
}

TEST_CASE("graph module: unresolvable targets are rejected at compile time") {
  Graph g;
  Node* w = g.get_attr("missing.weight");
  g.output(w);
  CHECK_THROWS_WITH_AS(GraphModule(make_root(), std::move(g)), doctest::Contains("missing.weight"),
                       GraphError);
  Graph h;
  Node* x = h.placeholder("x");
  h.output(h.call_module("0.module.fc2", {x}));
  CHECK_THROWS_WITH_AS(GraphModule(make_root(), std::move(h)),
                       "call_module %_0_module_fc2: the root module has no submodule "
                       "'0.module.fc2'",
                       GraphError);
}

TEST_CASE("graph module: given its attributes, a module compiles on its first run") {
  // The constructor a trace uses: nothing is checked until the plan is first needed, then the
  // same errors as a compile at construction, on every run until the graph is mended.
  auto root = make_root();
  GraphModule::Attributes attributes;
  for (const auto& item : root->named_parameters(true)) attributes[item.key()] = item.value();
  const auto xs = at::randn({2, 4});
  auto& linear = *root->named_modules()["0.module.fc1"]->as<torch::nn::LinearImpl>();
  {
    Graph g;
    Node* x = g.placeholder("x");
    Node* w = g.get_attr("0.module.fc1.weight");
    g.output(g.call_function(Target::aten("aten::mm"),
                             {x, g.call_function(Target::aten("aten::t"), {w})}));
    const GraphModule gm(root, std::move(g), {}, attributes);
    CHECK(at::equal(gm.run({xs})[0].toTensor(), at::mm(xs, linear.weight.t())));
    CHECK(at::equal(gm.run({xs})[0].toTensor(), at::mm(xs, linear.weight.t())));
  }
  {
    Graph g;
    Node* missing = g.get_attr("missing.weight");
    g.output(missing);
    GraphModule gm(root, std::move(g), {}, attributes);  // not refused yet
    for (int run = 0; run < 2; ++run) {
      CHECK_THROWS_WITH_AS(gm.run({}), doctest::Contains("missing.weight"), GraphError);
    }
    // An edit before the first successful compile is refused as after any compile.
    Graph& graph = gm.mutable_graph();
    Node* w = graph.get_attr("0.module.fc1.weight");
    graph.output_node()->set_args({w});
    graph.erase_node(missing);
    CHECK_THROWS_WITH_AS(gm.run({}), "the graph was edited after compile; call recompile()",
                         GraphError);
    gm.recompile();
    CHECK(gm.run({})[0].toTensor().is_same(linear.weight));
  }
}

TEST_CASE("graph module: constants are read by get_attr and kept through recompile") {
  auto root = make_root();
  const at::Tensor mask = at::tensor({1.0F, 0.0F});
  Graph g;
  Node* x = g.placeholder("x");
  Node* c = g.get_attr("0.module._tensor_constant0");
  g.output(g.call_function(Target::aten("aten::mul.Tensor"), {x, c}));
  GraphModule gm =
      GraphModule::with_constants(root, std::move(g), {{"0.module._tensor_constant0", mask}});
  const at::Tensor xs = at::randn({3, 2});
  CHECK(at::equal(gm.run({xs})[0].toTensor(), xs * mask));
  gm.mutable_graph().eliminate_dead_code();
  gm.recompile();
  CHECK(at::equal(gm.run({xs})[0].toTensor(), xs * mask));
  // Without the constant the path is unknown, naming the node.
  Graph plain;
  plain.output(plain.get_attr("0.module._tensor_constant0"));
  CHECK_THROWS_WITH_AS(GraphModule(root, std::move(plain)),
                       "get_attr %_0_module__tensor_constant0: the module has no parameter, buffer "
                       "or constant '0.module._tensor_constant0'",
                       GraphError);
}

TEST_CASE("graph module: recompile after an edit runs the edited graph") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(Target::aten("aten::relu"), {x});
  g.output(r);
  GraphModule gm(nullptr, std::move(g));
  Graph& graph = gm.mutable_graph();
  Node* out = graph.output_node();
  Node* neg = nullptr;
  {
    auto guard = graph.inserting_before(out);
    neg = graph.call_function(Target::aten("aten::neg"), {r});
  }
  out->set_args({neg});
  gm.recompile();
  const auto xs = at::randn({3});
  CHECK(at::equal(gm.run({xs})[0].toTensor(), -at::relu(xs)));
}

TEST_CASE("graph module: a run after an edit without recompile is refused, never stale") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(Target::aten("aten::relu"), {x});
  Node* n = g.call_function(Target::aten("aten::neg"), {r});
  g.output(n);
  GraphModule gm(nullptr, std::move(g));
  const auto xs = at::randn({3});
  // Point the output at %relu and erase %neg: the old plan would read the
  // freed %neg (reported by ASan before the generation check).
  Graph& graph = gm.mutable_graph();
  graph.output_node()->set_args({r});
  graph.erase_node(n);
  CHECK_THROWS_WITH_AS(gm.run({xs}), "the graph was edited after compile; call recompile()",
                       GraphError);
  CHECK_THROWS_AS(gm.forward({xs}), GraphError);
  gm.recompile();
  CHECK(at::equal(gm.run({xs})[0].toTensor(), at::relu(xs)));

  // Every kind of edit counts; meta does not; a moved module keeps its plan.
  const auto refused_after = [&](const std::function<void(Graph&)>& edit) {
    edit(gm.mutable_graph());
    const bool refused = [&] {
      try {
        gm.run({xs});
        return false;
      } catch (const GraphError&) {
        return true;
      }
    }();
    gm.recompile();
    return refused;
  };
  CHECK(refused_after([&](Graph& g2) { g2.rename(r, "r"); }));
  CHECK(refused_after([&](Graph&) { r->set_target(Target::aten("aten::relu")); }));
  CHECK(refused_after([&](Graph& g2) { g2.output_node()->set_arg(0, x); }));
  CHECK(refused_after([&](Graph& g2) { g2.output_node()->replace_input_with(x, r); }));
  CHECK(refused_after([&](Graph&) { r->replace_all_uses_with(x); }));
  CHECK(refused_after([&](Graph& g2) { g2.output_node()->set_args({r}); }));
  CHECK(refused_after([&](Graph& g2) { g2.output_node()->set_kwargs({}); }));
  CHECK(refused_after([&](Graph& g2) {
    auto guard = g2.inserting_before(g2.output_node());
    g2.call_function(Target::aten("aten::neg"), {r});
  }));
  CHECK(refused_after([&](Graph& g2) { CHECK(g2.eliminate_dead_code() == 1); }));
  CHECK(!refused_after([&](Graph&) { r->meta().module_path = "edited"; }));
  GraphModule moved = std::move(gm);
  CHECK(at::equal(moved.run({xs})[0].toTensor(), at::relu(xs)));
  // The graph taken out of the module leaves an empty one that must be recompiled.
  Graph taken = std::move(moved.mutable_graph());
  CHECK_THROWS_AS(moved.run({xs}), GraphError);
  moved.mutable_graph() = std::move(taken);
  CHECK(at::equal(moved.run({xs})[0].toTensor(), at::relu(xs)));
}

TEST_CASE("graph module: a 100000-node chain runs without deep recursion") {
  Graph g;
  Node* v = g.placeholder("x");
  for (int i = 0; i < 100000; ++i) v = g.call_function(Target::aten("aten::relu"), {v});
  g.output(v);
  GraphModule gm(nullptr, std::move(g));
  const auto xs = at::randn({2});
  CHECK(at::equal(gm.run({xs})[0].toTensor(), at::relu(xs)));
}

TEST_CASE("graph module: an index past a list's end is a RunError naming the node") {
  // chunk(x, 2) of 4 columns gives 2 parts: the graph, as a file could say, asks for part 7.
  Graph g;
  Node* x = g.placeholder("x");
  Node* chunk = g.call_function(Target::aten("aten::chunk"), {x, 2, -1});
  g.output(g.call_function(Target::getitem(), {chunk, 7}));
  GraphModule gm(nullptr, std::move(g));
  CHECK_THROWS_WITH_AS(gm.run({at::ones({2, 4})}),
                       doctest::Contains("while executing %getitem = operator.getitem(%chunk, 7): "
                                         "index 7 out of range for a list of 2 values"),
                       RunError);
}

TEST_CASE("graph module: a number or string of another kind than the schema's is refused") {
  // Each would reach LibTorch as an IValue it cannot read (an internal assert, or "IValue is
  // not a Scalar"), as a file could have it: refused when the plan is built, naming the node.
  // `make(g, x)` adds to a graph of one placeholder %x the node the output returns.
  auto refusal = [](const std::function<Node*(Graph&, Node*)>& make) {
    Graph g;
    Node* x = g.placeholder("x");
    g.output(make(g, x));
    try {
      GraphModule(nullptr, std::move(g));
    } catch (const GraphError& e) {
      return std::string(e.what());
    }
    return std::string("built");
  };
  CHECK(refusal([](Graph& g, Node* x) {
          return g.call_function(Target::aten("aten::softmax.int"), {x, 1.5});
        }) == "%softmax: argument 'dim' of aten::softmax.int is 1.5, where the schema takes int");
  CHECK(
      refusal([](Graph& g, Node* x) {
        return g.call_function(Target::aten("aten::masked_fill.Scalar"), {x, x, std::string("x")});
      }) ==
      "%masked_fill: argument 'value' of aten::masked_fill.Scalar is 'x', where the schema "
      "takes Scalar");
  CHECK(refusal([](Graph& g, Node* x) {
          Node* relu = g.call_function(Target::aten("aten::relu"), {x});
          return g.call_function(Target::aten("aten::sub.Scalar"), {x, relu});
        }) ==
        "%sub: argument 'other' of aten::sub.Scalar is %relu, a tensor, where the schema takes "
        "Scalar");
  // An int where a Scalar is due passes, as in Python: leaky_relu(x, 0).
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.call_function(Target::aten("aten::leaky_relu"), {x, int64_t{0}}));
  GraphModule gm(nullptr, std::move(g));
  CHECK(at::equal(gm.run({at::ones({2})})[0].toTensor(), at::ones({2})));
}
