// The debugging tools against hand-computed expectations: statistics equal to ATen's,
// a NaN planted at a known node found there, profiles that add up, tables that fit.
#include <ATen/CPUGeneratorImpl.h>
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <map>
#include <set>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/debug/first_nonfinite.h"
#include "tdfx/debug/gradients.h"
#include "tdfx/debug/node_stats.h"
#include "tdfx/debug/profile.h"
#include "tdfx/diagram/overlay.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/export/program.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/support/golden.h"

using namespace tdfx;

namespace {

// Linear "x"→"h"; log "h"→"y"; y * 2 "y"→"z". A negative h gives NaN at %log only.
std::shared_ptr<TensorDictSequential> log_pipeline() {
  torch::nn::Linear fc(3, 2);
  {
    torch::NoGradGuard no_grad;
    fc->weight.copy_(at::tensor({1.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f}).view({2, 3}));
    fc->bias.zero_();
  }
  return make_td_sequential(
      {make_td_module(fc, {"x"}, {"h"}),
       make_td_module([](const at::Tensor& h) { return at::log(h); }, {"h"}, {"y"}),
       make_td_module([](const at::Tensor& y) { return y * 2; }, {"y"}, {"z"})});
}

TensorDict log_input(float first) {
  return TensorDict({{"x", at::tensor({first, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}).view({2, 3})}}, {2});
}

}  // namespace

TEST_CASE("debug: tensor statistics equal ATen's min, max, mean and std") {
  const auto t = at::randn({37, 11});
  const TensorStats s = tensor_stats(t);
  CHECK(s.min == at::min(t).item<float>());
  CHECK(s.max == at::max(t).item<float>());
  const auto d = t.to(at::kDouble);
  CHECK(s.mean == doctest::Approx(at::mean(d).item<double>()).epsilon(1e-12));
  CHECK(s.std == doctest::Approx(at::std(d).item<double>()).epsilon(1e-12));
  CHECK(s.shape == std::vector<int64_t>{37, 11});
  CHECK(s.numel == 407);
  CHECK(s.finite());

  const auto odd = at::tensor({0.0f, NAN, INFINITY, -INFINITY, 0.0f, 1.0f});
  const TensorStats o = tensor_stats(odd);
  CHECK(o.nan_count == 1);
  CHECK(o.inf_count == 2);
  CHECK(o.zero_fraction == doctest::Approx(2.0 / 6));
  CHECK(std::isnan(o.min));
  CHECK(std::isnan(o.max));

  const TensorStats ints = tensor_stats(at::arange(10, at::kLong).view({2, 5}).t());
  CHECK(ints.min == 0);
  CHECK(ints.max == 9);
  CHECK(ints.mean == 4.5);
  CHECK(ints.zero_fraction == doctest::Approx(0.1));
  CHECK(std::isnan(tensor_stats(at::zeros({0, 3})).mean));
  CHECK_THROWS_WITH_AS(tensor_stats(at::Tensor()), "tensor_stats: the tensor is undefined", Error);
  CHECK_THROWS_WITH_AS(tensor_stats(at::empty({2}, at::TensorOptions().device(at::kMeta))),
                       "tensor_stats: a meta tensor has no values to summarise", Error);
}

TEST_CASE("debug: node statistics are those of each node's eager value") {
  auto module = samples::seed_sequential();
  const TensorDict input = samples::seed_sequential_input();
  const TDGraphModule gm = symbolic_trace(module, input);
  const auto stats = node_stats(debuggee(gm, input));
  std::vector<std::string> names;
  for (const auto& s : stats) names.push_back(s.node);
  CHECK(names == std::vector<std::string>{"tensordict", "getitem", "_0_fc1", "relu", "_0_fc2",
                                          "getitem_1", "mul", "softmax"});
  CHECK_FALSE(stats[0].stats.has_value());  // the tensordict
  CHECK(stats[0].kind == "dict");
  // The eager values, computed by hand from the root's parameters.
  const auto& root = *gm.root();
  const auto p = root.named_parameters();
  const auto x = input.get(NestedKey{"input", "x"});
  const auto fc1 = at::linear(x, p["0.module.fc1.weight"], p["0.module.fc1.bias"]);
  const auto relu = at::relu(fc1);
  const std::vector<std::pair<size_t, at::Tensor>> eager = {{1, x}, {2, fc1}, {3, relu}};
  for (const auto& [index, value] : eager) {
    CAPTURE(stats[index].node);
    REQUIRE(stats[index].stats.has_value());
    const TensorStats& s = *stats[index].stats;
    CHECK(s.min == at::min(value).item<float>());
    CHECK(s.max == at::max(value).item<float>());
    CHECK(s.mean == doctest::Approx(at::mean(value.to(at::kDouble)).item<double>()));
    CHECK(s.shape == value.sizes().vec());
  }
  CHECK(stats[3].stats->zero_fraction ==
        doctest::Approx((relu == 0).sum().item<double>() / relu.numel()));
  CHECK(stats[2].op == "call_module 0.module.fc1");
}

TEST_CASE("debug: a NaN planted at a known node is found there, with its module, key and line") {
  auto module = log_pipeline();
  const TensorDict input = log_input(-1.0f);  // h[0, 0] = -1: log gives NaN
  const TDGraphModule gm = symbolic_trace(module, input);
  const auto found = first_nonfinite(debuggee(gm, input));
  REQUIRE(found.has_value());
  CHECK(found->str() ==
        "first non-finite value: %log (1 NaN, 0 Inf of 4 values)\n"
        "  node:   %log = torch.log(%_0_linear)\n"
        "  in:     TensorDictModule 1\n"
        "  module: 1.module\n"
        "  feeds:  'y'\n"
        "  code:   log = torch.log(_0_linear)\n"
        "  rows:   1 of dim 0 (0)\n"
        "  at:     [0, 0]\n");
  // All finite: nothing found.
  CHECK_FALSE(first_nonfinite(debuggee(gm, log_input(1.0f))).has_value());
}

namespace {

/// Divides each row by its sum: no parameters, and a row of zeros gives NaN.
struct SumNormImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) { return x / x.sum(-1, true); }
};
TORCH_MODULE(SumNorm);

}  // namespace

TEST_CASE("debug: a parameterless module inside a wrapped Sequential is named by its own path") {
  at::manual_seed(0);
  torch::nn::Linear fc(3, 4);
  {
    torch::NoGradGuard no_grad;
    fc->bias.zero_();
  }
  auto module = make_td_sequential(
      {make_td_module([](const at::Tensor& x) { return x * 1; }, {"obs"}, {"x"}),
       make_td_module(torch::nn::Sequential(fc, torch::nn::ReLU(), SumNorm()), {"x"}, {"y"})});
  at::Tensor obs = at::rand({2, 3});
  obs[1].zero_();  // row 1 of the Linear is its zero bias: the normaliser divides 0 by 0
  const TensorDict input({{"obs", obs}}, {2});
  const TDGraphModule gm = symbolic_trace(module, input);
  const auto found = first_nonfinite(debuggee(gm, input));
  REQUIRE(found.has_value());
  CHECK(found->str() ==
        "first non-finite value: %truediv (4 NaN, 0 Inf of 8 values)\n"
        "  node:   %truediv = operator.truediv(%relu, %sum_1)\n"
        "  in:     TensorDictModule 1\n"
        "  module: 1.module.2\n"
        "  feeds:  'y'\n"
        "  code:   truediv = relu / sum_1;  relu = sum_1 = None\n"
        "  rows:   1 of dim 0 (1)\n"
        "  at:     [1, 0], [1, 1], [1, 2], [1, 3]\n");
  // The ReLU between them is its own child too; the Linear is its call_module.
  std::vector<std::string> paths;
  for (const Node* node : gm.graph().nodes()) {
    paths.push_back(node->name() + " " + node->meta().module_path);
  }
  CHECK(paths == std::vector<std::string>{"tensordict ", "getitem ", "mul 0.module",
                                          "_1__0 1.module.0", "relu 1.module.1", "sum_1 1.module.2",
                                          "truediv 1.module.2", "output "});
}

TEST_CASE("debug: a NaN in an input is found where the pipeline reads it") {
  auto module = log_pipeline();
  const TDGraphModule gm = symbolic_trace(module, log_input(1.0f));
  const auto found = first_nonfinite(debuggee(gm, log_input(NAN)));
  REQUIRE(found.has_value());
  CHECK(found->node == "getitem");
  CHECK(found->code_line == "getitem = tensordict['x'];  tensordict = None");
  CHECK(found->key == NestedKey("h"));
}

TEST_CASE("debug: a NaN in a layer's parameter is named where the layer's call is one node") {
  torch::nn::Linear first(3, 3), second(3, 2);
  auto module = make_td_sequential(
      {make_td_module(first, {"x"}, {"h"}), make_td_module(second, {"h"}, {"y"})});
  const TensorDict input({{"x", at::randn({4, 3})}}, {4});
  const TDGraphModule gm = symbolic_trace(module, input);
  {
    torch::NoGradGuard no_grad;
    second->bias[1] = NAN;
  }
  const auto found = first_nonfinite(debuggee(gm, input));
  REQUIRE(found.has_value());
  CHECK(found->node == "_1_linear_1");
  CHECK(found->state == "1.module.bias");
  CHECK(found->str().find("  reads:  1.module.bias, which holds NaN or Inf\n") !=
        std::string::npos);
  // Where the layer's ops are nodes of their own, the parameter is the origin itself.
  const ExportedProgram program = export_program(gm);
  const auto exported = first_nonfinite(debuggee(program, {input.get("x")}));
  REQUIRE(exported.has_value());
  CHECK(exported->node == "p_module_1_module_bias");
  CHECK(exported->state.empty());
}

TEST_CASE("debug: the first non-finite node of an exported program") {
  auto module = log_pipeline();
  const ExportedProgram program =
      export_program(module, {{"x", log_input(1.0f).get(NestedKey("x"))}});
  const auto found = first_nonfinite(debuggee(program, {log_input(-1.0f).get(NestedKey("x"))}));
  REQUIRE(found.has_value());
  CHECK(found->node == "log");
  CHECK(found->key == NestedKey("y"));
  CHECK(found->code_line == "log = torch.ops.aten.log.default(linear)");
}

TEST_CASE("debug: a profile times every node, shares add up, slowest first") {
  auto module = samples::nested_sequential();
  const TensorDict input = samples::nested_sequential_input();
  const TDGraphModule gm = symbolic_trace(module, input);
  const Profile p = profile(debuggee(gm, input), 5);
  CHECK(p.repeats == 5);
  CHECK(p.nodes.size() == gm.graph().size() - 1);  // every node but the output
  double shares = 0;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    shares += p.nodes[i].share;
    if (i) CHECK(p.nodes[i - 1].median_us >= p.nodes[i].median_us);
  }
  CHECK(shares == doctest::Approx(1.0));
  std::set<std::string> modules;
  for (const auto& m : p.modules) modules.insert(m.name);
  CHECK(modules == std::set<std::string>{"(outside modules)", "0.module.0", "0.module.1", "1"});
}

TEST_CASE("debug: statistics and the non-finite origin drawn on the diagram (golden DOT)") {
  auto module = log_pipeline();
  const TensorDict input = log_input(-1.0f);
  const TDGraphModule gm = symbolic_trace(module, input);
  const Debuggee run = debuggee(gm, input);
  RenderOptions options = diagram_options(gm);
  options.overlay = stats_overlay(node_stats(run));
  mark_nonfinite(options.overlay, *first_nonfinite(run));
  testing::check_golden("tests/debug/golden", "log_pipeline_overlay.dot",
                        to_dot(gm.graph(), options));
}

TEST_CASE("debug: a profile overlay colours nodes by their share of the time") {
  Profile p;
  p.nodes = {{"a", "call_function torch.relu", 30, 0.75}, {"b", "placeholder x", 10, 0.25}};
  const auto overlay = profile_overlay(p);
  REQUIRE(overlay.size() == 2);
  CHECK(overlay.at("a").fill == "#ff4040");  // the largest share: full red
  CHECK(overlay.at("b").fill == "#ffbfbf");  // a third of it
  CHECK(overlay.at("a").lines == std::vector<std::string>{"time: 30.0 µs, 75.0%"});
}

TEST_CASE("debug: every tool leaves the state as it found it, and each pass sees the same one") {
  at::manual_seed(21);
  auto pipeline = make_td_sequential(
      {make_td_module(torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4),
                                            torch::nn::Dropout(0.5)),
                      {"x"}, {"h"})});
  pipeline->train(true);  // BatchNorm updates its running statistics, Dropout draws
  at::Tensor x = at::randn({6, 3});
  x[2][1] = NAN;
  const TensorDict td({{"x", x}}, {6});
  TDGraphModule gm = symbolic_trace(pipeline, td);
  const ExportedProgram program = export_program(gm);
  std::map<std::string, at::Tensor> buffers;
  for (const auto& item : pipeline->named_buffers(true)) buffers[item.key()] = item.value().clone();
  const at::Tensor generator = at::detail::getDefaultCPUGenerator().get_state();
  auto unchanged = [&](const char* after) {
    CAPTURE(after);
    for (const auto& item : pipeline->named_buffers(true)) {
      CAPTURE(item.key());
      CHECK(at::equal(item.value(), buffers.at(item.key())));
    }
    CHECK(at::equal(at::detail::getDefaultCPUGenerator().get_state(), generator));
  };
  for (const Debuggee& run : {debuggee(gm, td), debuggee(program, {x})}) {
    const auto stats = node_stats(run);
    unchanged("node_stats");
    // The NaN input is the origin: not a running statistic that an earlier run wrote it into.
    const auto found = first_nonfinite(run);
    REQUIRE(found.has_value());
    CHECK((found->node == "x" || found->node == "getitem"));
    unchanged("first_nonfinite");
    (void)profile(run, 2);
    unchanged("profile");
    (void)grad_stats(run, Loss::of([](const auto& o) { return o[0].nan_to_num().sum(); }));
    unchanged("grad_stats");
    // Each pass draws the same Dropout mask: two runs give the same statistics.
    const auto again = node_stats(run);
    REQUIRE(again.size() == stats.size());
    for (size_t i = 0; i < stats.size(); ++i) {
      if (!stats[i].stats || !again[i].stats) continue;
      CAPTURE(stats[i].node);
      CHECK(again[i].stats->nan_count == stats[i].stats->nan_count);
      const double a = again[i].stats->mean, b = stats[i].stats->mean;
      CHECK(((std::isnan(a) && std::isnan(b)) || a == b));
    }
  }
}

TEST_CASE("debug: a debuggee made by hand, or an undefined input, is an Error") {
  CHECK_THROWS_WITH_AS(node_stats(Debuggee{}),
                       "the debuggee has no graph: make it with debuggee(traced_module, "
                       "tensordict) or debuggee(program, user_inputs)",
                       Error);
  CHECK_THROWS_AS(grad_stats(Debuggee{}), Error);
  const ExportedProgram program =
      export_program(samples::seed_000_model(), {{"x", at::randn({1, 3})}});
  CHECK_THROWS_WITH_AS(debuggee(program, {at::Tensor()}), "input x is an undefined tensor",
                       ShapeError);
}
