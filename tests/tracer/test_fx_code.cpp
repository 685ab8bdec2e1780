// The forward code a trace prints is valid Python: ops that Python has only as Tensor methods
// become call_method nodes (TraceOptions::method_calls), as torch.fx records `x.view(...)`.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "tdfx/codegen/python_code.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/tracer/method_calls.h"
#include "tests/tracer/fx_views.h"
#include "tests/tracer/tracer_test_support.h"

using namespace tdfx;
using tdfx::testing::batch_of;
using tdfx::testing::fx_reference;
using tdfx::testing::run_command;
using tdfx::testing::source_dir;

namespace {

/// The C++ twin of fx_pipelines.py's MethodCalls.
at::Tensor method_calls(const at::Tensor& x) {
  at::Tensor v = x.flatten(1).view({2, -1});
  v.sub_(1);
  at::Tensor d = v.repeat({1, 1}).to(at::kDouble);
  return d.add_(v.expand({2, 12}).to(at::kDouble), 2);
}

/// The FX view `options` give of one recording of `module` on `input`.
tdfx::detail::FxView build(const TensorDictModulePtr& module, const TensorDict& input,
                           const TraceOptions& options) {
  return tdfx::testing::record_for_view(module, input, options).view(options);
}

/// What tests/tracer/check_forward.py says of `code` (run on an "x" of `shape` if given).
tdfx::testing::CommandResult check_in_python(const std::string& code, const std::string& shape) {
  char path[] = "/tmp/tdfx_forward_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(path) << code;
  auto result = run_command("/usr/bin/python3 " + source_dir() + "/tests/tracer/check_forward.py " +
                            path + " " + shape + " 2>&1");
  std::remove(path);
  return result;
}

}  // namespace

namespace {

// Checks `predicate` against Python for every aten op name: fx_pipelines.py `flag` prints each
// name with 1 where Python's answer is yes. Returns how many names Python says yes for.
size_t check_against_python(const std::string& flag, bool (*predicate)(const std::string&)) {
  const auto result =
      run_command("/usr/bin/python3 " + source_dir() + "/tests/tracer/fx_pipelines.py " + flag);
  REQUIRE_MESSAGE(result.status == 0, result.out);
  std::istringstream lines(result.out);
  std::string name;
  int yes = 0;
  size_t names = 0, yeses = 0;
  while (lines >> name >> yes) {
    CAPTURE(name);
    CHECK(predicate(name) == (yes == 1));
    ++names;
    yeses += static_cast<size_t>(yes);
  }
  CHECK(names > 1000);  // every aten op torch 1.13 has
  return yeses;
}

}  // namespace

TEST_CASE("fx code: prints_as_method names exactly the ops Python calls as Tensor methods") {
  CHECK(check_against_python("--method-faces", tdfx::detail::prints_as_method) > 200);
}

TEST_CASE("fx code: is_nn_function names exactly the ops Python has in torch._C._nn only") {
  CHECK(check_against_python("--nn-functions", is_nn_function) == 94);
}

TEST_CASE("fx code: is_aten_only names exactly the ops Python has only as torch.ops.aten") {
  CHECK(check_against_python("--aten-only", is_aten_only) == 446);
}

TEST_CASE("fx code: an op Python has only in torch.ops.aten prints there, and the code runs") {
  // x.index({Slice(), 0}) records aten::slice, which is no torch function.
  auto module = make_td_module(
      [](const at::Tensor& x) {
        using at::indexing::Slice;
        return x.index({Slice(), 0});
      },
      {"x"}, {"y"});
  const TDGraphModule gm = symbolic_trace(module, batch_of(at::randn({2, 3})));
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    slice_1 = torch.ops.aten.slice(getitem, start = 0, end = 9223372036854775807);  "
        "getitem = None\n"
        "    select = torch.select(slice_1, dim = 1, index = 0);  slice_1 = None\n"
        "    return (select,)\n"
        "    ");
  const auto checked = check_in_python(gm.code(), "2,3");
  CHECK(checked.out == "compiled\nran [[2]]\n");
}

TEST_CASE("fx code: method-only ops are call_method nodes, as torch.fx records them") {
  auto module = make_td_module(method_calls, {"x"}, {"y"});
  const TensorDict input = batch_of(at::randn({2, 3, 4}));
  TraceOptions options;
  options.method_calls = true;
  const Graph graph = build(module, input, options).graph;
  CHECK(to_string(graph) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %flatten : [#users=1] = call_function[target=torch.flatten](args = (%getitem,), "
        "kwargs = {start_dim: 1})\n"
        "    %view : [#users=1] = call_method[target=view](args = (%flatten, [2, -1]), kwargs = "
        "{})\n"
        "    %sub_ : [#users=2] = call_method[target=sub_](args = (%view, 1), kwargs = {})\n"
        "    %repeat : [#users=1] = call_method[target=repeat](args = (%sub_, [1, 1]), kwargs = "
        "{})\n"
        "    %to : [#users=1] = call_method[target=to](args = (%repeat, torch.float64), kwargs = "
        "{})\n"
        "    %expand : [#users=1] = call_method[target=expand](args = (%sub_, [2, 12]), kwargs = "
        "{})\n"
        "    %to_1 : [#users=1] = call_method[target=to](args = (%expand, torch.float64), kwargs "
        "= {})\n"
        "    %add_ : [#users=1] = call_method[target=add_](args = (%to, %to_1), kwargs = {alpha: "
        "2})\n"
        "    return (add_,)");
  const std::string code = python_code(graph);
  CHECK(code ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    flatten = torch.flatten(getitem, start_dim = 1);  getitem = None\n"
        "    view = flatten.view([2, -1]);  flatten = None\n"
        "    sub_ = view.sub_(1);  view = None\n"
        "    repeat = sub_.repeat([1, 1])\n"
        "    to = repeat.to(torch.float64);  repeat = None\n"
        "    expand = sub_.expand([2, 12]);  sub_ = None\n"
        "    to_1 = expand.to(torch.float64);  expand = None\n"
        "    add_ = to.add_(to_1, alpha = 2);  to = to_1 = None\n"
        "    return (add_,)\n"
        "    ");
  // The same as torch.fx's for the Python twin, and Python compiles and runs it.
  const auto& reference = fx_reference();
  CHECK(to_string(graph) == reference.at("method_calls graph"));
  CHECK(code == reference.at("method_calls code"));
  const auto checked = check_in_python(code, "2,3,4");
  CHECK(checked.status == 0);
  CHECK(checked.out == "compiled\nran [[2, 12]]\n");
}

TEST_CASE("fx code: without method calls the code compiles but names no torch function") {
  // What method_calls is for: `torch.view` is not a function, so the code cannot run.
  auto module = make_td_module(method_calls, {"x"}, {"y"});
  TraceOptions options;
  options.method_calls = false;
  const Graph graph = build(module, batch_of(at::randn({2, 3, 4})), options).graph;
  const std::string code = python_code(graph);
  CHECK(code.find("view = torch.view(flatten, size = [2, -1])") != std::string::npos);
  const auto checked = check_in_python(code, "2,3,4");
  CHECK(checked.status != 0);
  CHECK(checked.out.find("module 'torch' has no attribute 'view'") != std::string::npos);
}

TEST_CASE("fx code: the program graph of a method-call trace runs bit-identically as aten calls") {
  // What runs is derived from the printed graph: each call_method is the aten call of its
  // target, every key a placeholder, named as torch.export names them.
  auto module = make_td_module(method_calls, {"x"}, {"y"});
  const TensorDict input = batch_of(at::randn({2, 3, 4}));
  const TDGraphModule traced = symbolic_trace(module, input);
  const Graph& program = traced.program_graph();
  for (const Node* node : program.nodes()) CHECK(node->op() != OpCode::kCallMethod);
  REQUIRE(traced.input_keys() == std::vector<NestedKey>{"x"});
  GraphModule gm(traced.root(), program.copy());
  // sub_ writes into a view of its input: each run gets its own copy.
  const auto outputs = gm.run({input.get("x").clone()});
  REQUIRE(outputs.size() == 1);
  CHECK(tdfx::testing::bit_equal(outputs[0].toTensor(), method_calls(input.get("x").clone())));
}

TEST_CASE("fx code: an edited call_method target is what runs after recompile()") {
  auto module = make_td_module(
      [](const at::Tensor& x) {
        return x.flatten(1).view({2, -1});
      },
      {"x"}, {"y"});
  const TensorDict input = batch_of(at::randn({2, 3, 4}));
  TDGraphModule traced = symbolic_trace(module, input);
  Node* view = nullptr;
  for (Node* node : traced.mutable_graph().nodes()) {
    if (node->op() == OpCode::kCallMethod && node->target().str() == "view") view = node;
  }
  REQUIRE(view != nullptr);
  view->set_target(Target::method(Target::aten("aten::reshape")));
  CHECK_THROWS_AS(traced.run(input), GraphError);  // edited, not recompiled
  traced.recompile();
  CHECK(traced.code() ==
        "\n\n\ndef forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    flatten = torch.flatten(getitem, start_dim = 1);  getitem = None\n"
        "    view = flatten.reshape([2, -1]);  flatten = None\n"
        "    return (view,)\n    ");
  const auto outputs = traced.run(input);
  REQUIRE(outputs.size() == 1);
  CHECK(tdfx::testing::bit_equal(outputs[0], input.get("x").reshape({2, -1})));
  view->set_target("reshape");  // a method name without an operator
  CHECK_THROWS_WITH_AS(traced.recompile(),
                       "call_method %view ('reshape') cannot run: tdfx runs aten operators, and "
                       "its target names none (give it one with Target::method(Target::aten(...)))",
                       GraphError);
}

TEST_CASE("fx code: a traced graph with method calls runs them as their recorded operators") {
  auto module = make_td_module(method_calls, {"x"}, {"y"});
  const TensorDict input = batch_of(at::randn({2, 3, 4}));
  const TDGraphModule gm = symbolic_trace(module, input);
  size_t methods = 0;
  for (const Node* node : gm.graph().nodes()) methods += node->op() == OpCode::kCallMethod;
  CHECK(methods == 7);
  // sub_ writes into a view of its input: each run gets its own copy.
  const at::Tensor expected = method_calls(input.get("x").clone());
  const auto outputs = gm.run(input.clone());
  REQUIRE(outputs.size() == 1);
  CHECK(tdfx::testing::bit_equal(outputs[0], expected));
  // A call_method without a recorded operator (built by hand) names itself when compiled.
  Graph graph;
  Node* x = graph.placeholder("x");
  graph.output(graph.call_method("view", {x, list({-1})}));
  CHECK_THROWS_WITH_AS(GraphModule(nullptr, std::move(graph)),
                       "call_method %view ('view') cannot run: tdfx runs aten operators, and its "
                       "target names none (give it one with Target::method(Target::aten(...)))",
                       GraphError);
}

TEST_CASE("fx code: in-place ops print as methods, as C++ calls them") {
  // torch.relu_ exists too; x.relu_() is how C++ (and most Python) calls it.
  auto module = make_td_module(
      [](const at::Tensor& x) {
        return x.view({2, -1}).relu_();
      },
      {"x"}, {"y"});
  TraceOptions options;
  options.method_calls = true;
  const std::string code = python_code(build(module, batch_of(at::randn({2, 3})), options).graph);
  CHECK(code ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    view = getitem.view([2, -1]);  getitem = None\n"
        "    relu_ = view.relu_();  view = None\n"
        "    return (relu_,)\n"
        "    ");
  const auto checked = check_in_python(code, "2,3");
  CHECK(checked.out == "compiled\nran [[2, 3]]\n");
}

TEST_CASE("fx code: a leaf's body keeps its aten calls, which run") {
  // Bodies are inlined into the graph that runs, so nothing in them becomes a method call.
  struct FlatLinearImpl : torch::nn::Module {
    FlatLinearImpl() : weight(register_parameter("weight", at::randn({6}))) {}
    at::Tensor forward(const at::Tensor& x) { return x.matmul(weight.view({3, 2})); }
    at::Tensor weight;
  };
  struct HolderImpl : torch::nn::Module {
    HolderImpl() : flat(register_module("flat", std::make_shared<FlatLinearImpl>())) {}
    at::Tensor forward(const at::Tensor& x) { return flat->forward(x).view({-1}); }
    std::shared_ptr<FlatLinearImpl> flat;
  };
  auto module = make_td_module(std::make_shared<HolderImpl>(), {"x"}, {"y"});
  TraceOptions options;
  options.method_calls = true;
  options.is_leaf_module = [](const torch::nn::Module&, const std::string& path) {
    return path == "flat";
  };
  // No batch size: y is flattened.
  const Graph graph = build(module, TensorDict({{"x", at::randn({2, 3})}}), options).graph;
  CHECK(to_string(graph) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %flat : [#users=1] = call_module[target=flat](args = (%getitem,), kwargs = {})\n"
        "    %view : [#users=1] = call_method[target=view](args = (%flat, [-1]), kwargs = {})\n"
        "    return (view,)");
  const Node* flat = graph.node_list().at(2);
  REQUIRE(flat->body() != nullptr);
  CHECK(to_string(*flat->body()) ==
        "graph():\n"
        "    %input_1 : [#users=1] = placeholder[target=input]\n"
        "    %weight : [#users=1] = get_attr[target=weight]\n"
        "    %view : [#users=1] = call_function[target=torch.view](args = (%weight,), kwargs = "
        "{size: [3, 2]})\n"
        "    %matmul : [#users=1] = call_function[target=operator.matmul](args = (%input_1, "
        "%view), kwargs = {})\n"
        "    return matmul");
}

namespace {

at::Tensor add_one_after_pruned_exp(const at::Tensor& x) {
  at::Tensor y = x + 1;
  (void)x.exp();  // recorded, nothing reads it: the program prunes it
  return y;
}

at::Tensor relu_of(const at::Tensor& z) { return z.relu(); }

}  // namespace

TEST_CASE(
    "fx code: the printed graph, made from the program when first shown, is the view of "
    "the recording") {
  // symbolic_trace builds the view from the program, after the program pruned the recording:
  // a key read recorded after a pruned op stays where it was read.
  auto seq = std::make_shared<TensorDictSequential>(
      std::vector<TensorDictModuleBasePtr>{make_td_module(add_one_after_pruned_exp, {"x"}, {"y"}),
                                           make_td_module(relu_of, {"z"}, {"w"})});
  const TensorDict input({{"x", at::randn({2, 3})}, {"z", at::randn({2, 3})}}, {2});
  for (const KeyStyle style : {KeyStyle::kGetItem, KeyStyle::kPlaceholder}) {
    for (const bool methods : {false, true}) {
      CAPTURE(methods);
      TraceOptions options;
      options.key_style = style;
      options.method_calls = methods;
      const TDGraphModule gm = symbolic_trace(seq, input, options);
      const std::string from_recording =
          to_string(tdfx::testing::record_for_view(seq, input, options).view(options).graph);
      CHECK(to_string(gm.graph()) == from_recording);
    }
  }
  const TDGraphModule gm = symbolic_trace(seq, input);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=2] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %add : [#users=1] = call_function[target=operator.add](args = (%getitem, 1), kwargs "
        "= {})\n"
        "    %getitem_1 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%tensordict, z), kwargs = {})\n"
        "    %relu : [#users=1] = call_function[target=torch.relu](args = (%getitem_1,), kwargs "
        "= {})\n"
        "    return (add, relu)");
}
