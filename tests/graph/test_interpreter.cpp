// Interpreter and ShapeProp: node-by-node runs that equal the compiled plan, overridable
// per opcode, and shape propagation that fills the meta of hand-built graphs.
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <map>

#include "tdfx/codegen/python_code.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/interpreter.h"

using namespace tdfx;

namespace {

// x -> fc (Linear 4->3, no body: the root's layer runs) -> relu -> add 1 -> (fc, add)
struct HandBuilt {
  std::shared_ptr<torch::nn::Module> root = std::make_shared<torch::nn::Module>();
  torch::nn::Linear fc{4, 3};
  Graph graph;
  HandBuilt() {
    root->register_module("fc", fc);
    Node* x = graph.placeholder("x");
    Node* lin = graph.call_module("fc", {x});
    Node* relu = graph.call_function(Target::aten("aten::relu"), {lin});
    Node* add = graph.call_function(Target::aten("aten::add.Scalar"), {relu, 1.0});
    graph.output(tuple({lin, add}));
  }
};

std::vector<std::string> names_in_order(const std::vector<const Node*>& nodes) {
  std::vector<std::string> out;
  for (const Node* n : nodes) out.push_back(n->name());
  return out;
}

}  // namespace

TEST_CASE("interpreter: runs a graph node by node to the plan's result, bit for bit") {
  HandBuilt h;
  GraphModule gm(h.root, std::move(h.graph));
  const auto x = at::randn({5, 4});
  const auto planned = gm.run({x});
  const auto interpreted = Interpreter(gm).run({x}).toTupleRef().elements();
  REQUIRE(interpreted.size() == 2);
  CHECK(at::equal(planned[0].toTensor(), interpreted[0].toTensor()));
  CHECK(at::equal(planned[1].toTensor(), interpreted[1].toTensor()));
  const auto eager = h.fc->forward(x);
  CHECK(at::equal(interpreted[0].toTensor(), eager));
  CHECK(at::equal(interpreted[1].toTensor(), at::relu(eager) + 1.0));
}

TEST_CASE("interpreter: a call_module without a body runs the root's built-in layer") {
  HandBuilt h;
  GraphModule gm(h.root, std::move(h.graph));
  const auto x = at::randn({2, 4});
  CHECK(at::equal(gm.run({x})[0].toTensor(), h.fc->forward(x)));
}

TEST_CASE("interpreter: a call_module of a user module without a body is refused by name") {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("mine", std::make_shared<torch::nn::Module>());
  Graph g;
  Node* x = g.placeholder("x");
  g.output(g.call_module("mine", {x}));
  CHECK_THROWS_WITH_AS(GraphModule(root, std::move(g)),
                       "call_module %mine: 'mine' is a torch::nn::Module, which has no body graph "
                       "and is not a built-in layer tdfx can call; record the call with the "
                       "tracer, or override Interpreter::call_module",
                       GraphError);
  Graph missing;
  Node* y = missing.placeholder("y");
  missing.output(missing.call_module("nope", {y}));
  CHECK_THROWS_WITH_AS(GraphModule(root, std::move(missing)),
                       "call_module %nope: the root module has no submodule 'nope'", GraphError);
}

TEST_CASE("interpreter: each opcode's method sees its node and arguments, and can change them") {
  HandBuilt h;
  GraphModule gm(h.root, std::move(h.graph));
  struct Recorder : Interpreter {
    using Interpreter::Interpreter;
    std::vector<const Node*> seen;
    std::map<std::string, size_t> arg_counts;
    c10::IValue run_node(const Node& node) override {
      seen.push_back(&node);
      return Interpreter::run_node(node);
    }
    c10::IValue call_function(const Node& node, std::vector<c10::IValue> args) override {
      arg_counts[node.name()] = args.size();
      if (node.name() == "relu") return at::zeros({1});  // replaces relu's value
      return Interpreter::call_function(node, std::move(args));
    }
    c10::IValue call_module(const Node& node, std::vector<c10::IValue> args) override {
      arg_counts[node.name()] = args.size();
      return Interpreter::call_module(node, std::move(args));
    }
  };
  Recorder r(gm);
  const auto out = r.run({at::randn({3, 4})}).toTupleRef().elements();
  CHECK(names_in_order(r.seen) == std::vector<std::string>{"x", "fc", "relu", "add", "output"});
  // aten::add.Scalar(self, other, alpha=1): the schema's arguments, the default included.
  CHECK(r.arg_counts == std::map<std::string, size_t>{{"add", 3}, {"fc", 1}, {"relu", 1}});
  CHECK(at::equal(out[1].toTensor(), at::ones({1})));
}

TEST_CASE("interpreter: values are released after their last reader unless asked to keep them") {
  HandBuilt h;
  GraphModule gm(h.root, std::move(h.graph));
  const auto nodes = gm.graph().node_list();  // x fc relu add output
  struct Probe : Interpreter {
    using Interpreter::Interpreter;
    std::vector<bool> held_at_output;
    c10::IValue output(const Node& node, c10::IValue result) override {
      for (const Node* n : module().graph().nodes()) {
        if (n != &node) held_at_output.push_back(has_value(*n));
      }
      return result;
    }
  };
  Probe released(gm);
  released.run({at::randn({2, 4})});
  // x and relu are dead before the output; fc and add are what it returns.
  CHECK(released.held_at_output == std::vector<bool>{false, true, false, true});
  Probe kept(gm, Interpreter::Options{false});
  kept.run({at::randn({2, 4})});
  CHECK(kept.held_at_output == std::vector<bool>{true, true, true, true});
  CHECK_THROWS_WITH_AS(released.value(*nodes[2]),
                       "%relu has not run, or its value was released after its last reader",
                       GraphError);
}

TEST_CASE("interpreter: a failing node is a RunError naming it; wrong input counts are refused") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  g.output(g.call_function(Target::aten("aten::mm"), {a, b}));
  GraphModule gm(nullptr, std::move(g));
  Interpreter interp(gm);
  CHECK_THROWS_WITH_AS(interp.run({at::randn({2, 3}), at::randn({2, 3})}),
                       doctest::Contains("while executing %mm = torch.mm(%a, %b): "), RunError);
  CHECK_THROWS_WITH_AS(interp.run({at::randn({2, 3})}), "the graph takes 2 inputs (1 given)",
                       RunError);
}

TEST_CASE("shape prop: fills dtype, shape, strides and device of every tensor node") {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3)));
  Graph g;
  Node* x = g.placeholder("x");
  Node* conv = g.call_module("conv", {x});
  Node* flat = g.call_function(Target::aten("aten::flatten.using_ints"), {conv, 1});
  Node* half = g.call_function(Target::aten("aten::to.dtype"), {flat, c10::ScalarType::Half});
  g.output(half);
  GraphModule gm(root, std::move(g));
  ShapeProp(gm).propagate({at::randn({2, 3, 10, 10})});
  const auto nodes = gm.graph().node_list();
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 3, 10, 10}, {2, 8, 8, 8}, {2, 512}, {2, 512}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    CAPTURE(nodes[i]->name());
    CHECK(nodes[i]->meta().tensor.shape == shapes[i]);
    CHECK(nodes[i]->meta().tensor.device == c10::Device(c10::kCPU));
  }
  CHECK(nodes[1]->meta().tensor.stride == std::vector<int64_t>{512, 64, 8, 1});
  CHECK(nodes[2]->meta().tensor.dtype == c10::ScalarType::Float);
  CHECK(nodes[3]->meta().tensor.dtype == c10::ScalarType::Half);
  // As FX's ShapeProp, the output node describes the value the graph returns.
  CHECK(nodes[4]->meta().tensor.shape == std::vector<int64_t>{2, 512});
}

TEST_CASE("shape prop: a hand-built graph prints annotated readable code afterwards") {
  HandBuilt h;
  GraphModule gm(h.root, std::move(h.graph));
  ShapeProp(gm).propagate({at::randn({5, 4})});
  CHECK(print_readable(gm.graph()) == R"(class GraphModule(torch.nn.Module):
    def forward(self, x: "f32[5, 4]"):
        fc: "f32[5, 3]" = self.fc(x);  x = None
        relu: "f32[5, 3]" = torch.relu(fc)
        add: "f32[5, 3]" = relu + 1.0;  relu = None
        return (fc, add)
        )");
}

TEST_CASE("interpreter: an edited graph is refused until recompiled, then runs the edit") {
  HandBuilt h;
  GraphModule gm(h.root, std::move(h.graph));
  Interpreter interp(gm);
  const auto x = at::randn({2, 4});
  Graph& g = gm.mutable_graph();
  Node* add = g.node_list()[3];
  add->set_arg(1, 2.0);
  CHECK_THROWS_WITH_AS(interp.run({x}), "the graph was edited after compile; call recompile()",
                       GraphError);
  gm.recompile();
  const auto out = interp.run({x}).toTupleRef().elements();
  CHECK(at::equal(out[1].toTensor(), at::relu(h.fc->forward(x)) + 2.0));
}

TEST_CASE("interpreter: an edit and recompile during a run stops it with a GraphError") {
  HandBuilt h;
  GraphModule gm(h.root, std::move(h.graph));
  struct Editor : Interpreter {
    Editor(GraphModule& m) : Interpreter(m), gm(m) {}
    GraphModule& gm;
    c10::IValue run_node(const Node& node) override {
      if (node.name() == "relu") {
        // Return relu itself and drop %add, which is still ahead in the run.
        Graph& g = gm.mutable_graph();
        Node* out = g.output_node();
        Node* add = g.node_list()[3];
        out->set_args({tuple({g.node_list()[1], g.node_list()[2]})});
        g.erase_node(add);
        gm.recompile();
      }
      return Interpreter::run_node(node);
    }
  };
  Editor editor(gm);
  CHECK_THROWS_WITH_AS(editor.run({at::randn({2, 4})}),
                       "the graph was edited during the run; recompile it and run again",
                       GraphError);
  // The next run runs the edited graph.
  struct Plain : Interpreter {
    using Interpreter::Interpreter;
  };
  const auto x = at::randn({2, 4});
  const auto out = Plain(gm).run({x}).toTupleRef().elements();
  CHECK(at::equal(out[1].toTensor(), at::relu(h.fc->forward(x))));
}

TEST_CASE("interpreter: a call_module given another target calls that module, not the old body") {
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("a", torch::nn::Linear(4, 3));
  torch::nn::Linear b(4, 3);
  root->register_module("b", b);
  Graph body;
  Node* input = body.placeholder("input");
  body.output(body.call_function(Target::aten("aten::neg"), {input}));
  Graph g;
  Node* x = g.placeholder("x");
  Node* call = g.call_module("a", {x});
  call->set_body(std::make_shared<const Graph>(std::move(body)));
  g.output(call);
  call->set_target(Target("b"));
  CHECK(call->body() == nullptr);
  GraphModule gm(root, std::move(g));
  const auto xs = at::randn({2, 4});
  CHECK(at::equal(gm.run({xs})[0].toTensor(), b->forward(xs)));
}

TEST_CASE("interpreter: a LibTorch failure names the node; tdfx's own errors pass through") {
  HandBuilt h;
  GraphModule gm(h.root, std::move(h.graph));
  struct Failing : Interpreter {
    Failing(const GraphModule& m, int kind) : Interpreter(m), kind(kind) {}
    int kind;
    c10::IValue call_function(const Node& node, std::vector<c10::IValue> args) override {
      if (node.name() == "relu") {
        if (kind == 0) throw std::runtime_error("out of luck");
        if (kind == 1) throw InternalError("a bug");
        throw KeyError("no such key");
      }
      return Interpreter::call_function(node, std::move(args));
    }
  };
  const auto x = at::randn({2, 4});
  CHECK_THROWS_WITH_AS(Failing(gm, 0).run({x}),
                       "while executing %relu = torch.relu(%fc): out of luck", RunError);
  CHECK_THROWS_WITH_AS(Failing(gm, 1).run({x}), "a bug", InternalError);
  CHECK_THROWS_WITH_AS(Failing(gm, 2).run({x}), "no such key", KeyError);
}
