// symbolic_trace on pipelines as users write them: value-dependent control flow is refused as
// torch.fx refuses it, and nothing a module computes and drops reaches the graph.
#include <ATen/record_function.h>
#include <doctest/doctest.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/tracer/tracer_test_support.h"

using namespace tdfx;

namespace {

/// A linear layer that also computes a statistic of its input and drops it.
struct WastefulImpl : torch::nn::Module {
  WastefulImpl() : fc(register_module("fc", torch::nn::Linear(3, 4))) {}
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor unused = (x * 2).sum();
    (void)unused;
    return torch::relu(fc(x));
  }
  torch::nn::Linear fc;
};
TORCH_MODULE(Wasteful);

/// Scales its input by its largest element, read as a C++ number.
struct ScaleByMaxImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) { return x / x.max().item<double>(); }
};
TORCH_MODULE(ScaleByMax);

/// The message for a module that turned a traced tensor into a C++ value with `op`.
std::string value_read_error(const std::string& module, const std::string& op) {
  return module + ": " + op +
         " turns a traced tensor into a C++ value; symbolically traced variables cannot be used "
         "as inputs to control flow, and the graph would keep only what this trace saw. Compute "
         "it with tensor ops instead (at::where for a branch)";
}

}  // namespace

TEST_CASE("pipelines: a branch on a tensor's value is a TraceError naming the module and op") {
  auto branch = [](const at::Tensor& h) {
    if (h.sum().item<float>() > 0) return h.relu();
    return -h;
  };
  auto pipeline = make_td_sequential({make_td_module(torch::nn::Linear(3, 4), {"x"}, {"h"}),
                                      make_td_module(branch, {"h"}, {"y"})});
  TensorDict input({{"x", at::randn({2, 3})}}, {2});
  CHECK_THROWS_WITH_AS(
      symbolic_trace(pipeline, input),
      value_read_error("TensorDictModule(module=Callable(), in_keys=['h'], out_keys=['y']) at '1'",
                       "aten::item")
          .c_str(),
      TraceError);
  CHECK_FALSE(at::hasThreadLocalCallbacks());
}

TEST_CASE("pipelines: item() on a traced tensor is a TraceError naming the module") {
  auto module = make_td_module(ScaleByMax(), {"x"}, {"y"});
  TensorDict input({{"x", at::randn({2, 3})}}, {2});
  CHECK_THROWS_WITH_AS(
      symbolic_trace(module, input),
      value_read_error(
          "TensorDictModule(module=(anonymous namespace)::ScaleByMaxImpl, in_keys=['x'], "
          "out_keys=['y'])",
          "aten::item")
          .c_str(),
      TraceError);
}

TEST_CASE("pipelines: bool conversions and comparisons of traced tensors name their op") {
  TensorDict input({{"x", at::randn({2, 3})}}, {2});
  auto is_nonzero = [](const at::Tensor& x) { return x.sum().is_nonzero() ? x : -x; };
  auto equal = [](const at::Tensor& x) { return at::equal(x, x.abs()) ? x : -x; };
  auto allclose = [](const at::Tensor& x) { return at::allclose(x, x.abs()) ? x : -x; };
  CHECK_THROWS_WITH_AS(symbolic_trace(make_td_module(is_nonzero, {"x"}, {"y"}), input),
                       doctest::Contains("out_keys=['y']): aten::is_nonzero turns a traced"),
                       TraceError);
  CHECK_THROWS_WITH_AS(symbolic_trace(make_td_module(equal, {"x"}, {"y"}), input),
                       doctest::Contains("out_keys=['y']): aten::equal turns a traced"),
                       TraceError);
  CHECK_THROWS_WITH_AS(symbolic_trace(make_td_module(allclose, {"x"}, {"y"}), input),
                       doctest::Contains("out_keys=['y']): aten::allclose turns a traced"),
                       TraceError);
}

TEST_CASE("pipelines: a module that fails after a value read is told about the read") {
  // The branch taken for these tensors multiplies shapes that do not match.
  auto branch = [](const at::Tensor& x) {
    if (x.numel() > 0 && x.abs().sum().item<double>() > 0) return x.matmul(x);
    return x;
  };
  TensorDict input({{"x", at::randn({2, 3})}}, {2});
  CHECK_THROWS_WITH_AS(symbolic_trace(make_td_module(branch, {"x"}, {"y"}), input),
                       doctest::Contains("): aten::item turns a traced tensor"), TraceError);
}

TEST_CASE("pipelines: an op that reads values inside itself traces and runs bit-identically") {
  // repeat_interleave reads its repeats to size its result: that read is part of the op,
  // which the graph runs again, not a value the module takes from the trace.
  auto module =
      make_td_module([](const at::Tensor& x) { return x.repeat_interleave(2, 0); }, {"x"}, {"y"});
  TensorDict input({{"x", at::randn({2, 3})}});  // no batch size: y has twice x's rows
  TDGraphModule gm = symbolic_trace(module, input, testing::dynamic_batch());
  TensorDict other({{"x", at::randn({5, 3})}});
  CHECK(at::equal(gm.run(other)[0], other.get("x").repeat_interleave(2, 0)));
}

TEST_CASE("pipelines: computations a module drops leave no dead nodes in the graph") {
  // Wasteful computes (x * 2).sum() and drops it; "scratch" is written by module 1 and
  // overwritten by module 2 before anything reads it.
  auto pipeline = make_td_sequential({
      make_td_module(Wasteful(), {"x"}, {"h"}),
      make_td_module([](const at::Tensor& x) { return x.exp(); }, {"x"}, {"scratch"}),
      make_td_module([](const at::Tensor& h) { return h + 1; }, {"h"}, {"scratch"}),
  });
  TensorDict input({{"x", at::randn({2, 3})}}, {2});
  TDGraphModule gm = symbolic_trace(pipeline, input);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = "
        "(%tensordict, x), kwargs = {})\n"
        "    %_0_fc : [#users=1] = call_module[target=0.module.fc](args = (%getitem,), kwargs "
        "= {})\n"
        "    %relu : [#users=2] = call_function[target=torch.relu](args = (%_0_fc,), kwargs = "
        "{})\n"
        "    %add : [#users=1] = call_function[target=operator.add](args = (%relu, 1), kwargs "
        "= {})\n"
        "    return (relu, add)");
  gm.graph().lint();
  TensorDict eager(input);
  pipeline->forward(eager);
  std::vector<at::Tensor> traced = gm.run(input);
  REQUIRE(traced.size() == 2);
  CHECK(at::equal(traced[0], eager.get("h")));
  CHECK(at::equal(traced[1], eager.get("scratch")));
}

TEST_CASE("pipelines: an output overwritten before it is read leaves no node behind") {
  // Module 0 writes "a" and "b"; module 1 writes "b" again, so exp is never needed.
  auto pipeline = make_td_sequential({
      make_td_module([](const at::Tensor& x) { return std::make_tuple(x.relu(), x.exp()); }, {"x"},
                     {"a", "b"}),
      make_td_module([](const at::Tensor& x) { return x.sigmoid(); }, {"x"}, {"b"}),
  });
  TensorDict input({{"x", at::randn({2, 3})}}, {2});
  TDGraphModule gm = symbolic_trace(pipeline, input);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=2] = call_function[target=operator.getitem](args = "
        "(%tensordict, x), kwargs = {})\n"
        "    %relu : [#users=1] = call_function[target=torch.relu](args = (%getitem,), kwargs = "
        "{})\n"
        "    %sigmoid : [#users=1] = call_function[target=torch.sigmoid](args = (%getitem,), "
        "kwargs = {})\n"
        "    return (relu, sigmoid)");
}

TEST_CASE("pipelines: dropped in-place and random ops stay in the graph") {
  // Without them the graph would change a tensor less, or draw different random numbers
  // for the ops after them, than the module does.
  auto module = make_td_module(
      [](const at::Tensor& x) {
        at::Tensor copy = x.clone();
        copy.add_(1);
        at::Tensor noise = at::dropout(x, 0.5, /*train=*/true);
        (void)noise;
        return x.relu();
      },
      {"x"}, {"y"});
  TensorDict input({{"x", at::randn({2, 3})}}, {2});
  const std::string text = to_string(symbolic_trace(module, input).graph());
  CHECK(text.find("\n    %clone : [#users=1] = ") != std::string::npos);
  CHECK(text.find("\n    %add_ : [#users=0] = ") != std::string::npos);
  CHECK(text.find("\n    %dropout : [#users=0] = ") != std::string::npos);
}

TEST_CASE("pipelines: an unpacked output that is not selected leaves no getitem behind") {
  // NormalParamExtractor's chunk unpacks into loc and scale; with only loc selected, scale's
  // getitem would have no users.
  auto model = samples::seed_000_model();
  model->select_out_keys("loc");
  const TensorDict input({{"x", at::randn({1, 3})}}, {1});
  TDGraphModule gm = symbolic_trace(model, input);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %_0_linear : [#users=1] = call_module[target=0.module](args = (%getitem,), kwargs = "
        "{})\n"
        "    %_1_re_lu : [#users=1] = call_module[target=1.module](args = (%_0_linear,), kwargs = "
        "{})\n"
        "    %_2_linear_1 : [#users=1] = call_module[target=2.module](args = (%_1_re_lu,), "
        "kwargs = {})\n"
        "    %chunk : [#users=1] = call_function[target=torch.chunk](args = (%_2_linear_1,), "
        "kwargs = {chunks: 2, dim: -1})\n"
        "    %getitem_1 : [#users=1] = call_function[target=operator.getitem](args = (%chunk, 0), "
        "kwargs = {})\n"
        "    return (getitem_1,)");
  gm.graph().lint();
  tdfx::testing::check_runs_like_eager(model, gm, input);
  const TDGraphModule dynamic = symbolic_trace(model, input, testing::dynamic_batch());
  CHECK(to_string(dynamic.graph()) == to_string(gm.graph()));
  tdfx::testing::check_runs_like_eager(model, dynamic, TensorDict({{"x", at::randn({4, 3})}}, {4}));
}

TEST_CASE("pipelines: the trace runs the modules' own forward, key semantics included") {
  // An inner module whose second out key is not selected: as in eager, the key is gone when
  // the next module reads it. The trace gives the same KeyError, naming that module.
  auto split = make_td_module([](const at::Tensor& x) { return std::make_tuple(x + 1, x - 1); },
                              {"x"}, {"a", "b"});
  split->select_out_keys(NestedKey("a"));
  auto reader = make_td_module([](const at::Tensor& b) { return b * 2; }, {"b"}, {"c"});
  auto pipeline = make_td_sequential({split, reader});
  const TensorDict input = testing::batch_of(at::randn({3, 2}));
  std::string eager_error;
  try {
    TensorDict td(input);
    pipeline->forward(td);
  } catch (const KeyError& e) {
    eager_error = e.what();
  }
  REQUIRE_FALSE(eager_error.empty());
  CHECK(eager_error.rfind(reader->describe() + " reads 'b'", 0) == 0);
  CHECK_THROWS_WITH_AS(symbolic_trace(pipeline, input), eager_error.c_str(), KeyError);
}

TEST_CASE("pipelines: one TensorDictModule placed twice in a sequential is a call per place") {
  auto step = make_td_module(torch::nn::Linear(2, 2), {"h"}, {"h"});
  auto pipeline = make_td_sequential({step, step});
  const TensorDict input({{"h", at::randn({3, 2})}}, {3});
  TDGraphModule gm = symbolic_trace(pipeline, input);
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['h'];  tensordict = None\n"
        "    _0_linear = getattr(self, \"0\").module(getitem);  getitem = None\n"
        "    _1_linear_1 = getattr(self, \"1\").module(_0_linear);  _0_linear = None\n"
        "    return (_1_linear_1,)\n"
        "    ");
  REQUIRE(gm.modules().size() == 2);
  CHECK(gm.modules()[0].path == "0");
  CHECK(gm.modules()[1].path == "1");
  testing::check_runs_like_eager(pipeline, gm, input);
}

TEST_CASE("pipelines: a run after train() or eval() changed a module's mode is refused") {
  torch::nn::Sequential net(torch::nn::Linear(3, 3), torch::nn::Dropout(0.5));
  net->eval();
  auto module = make_td_module(net, {"x"}, {"y"});
  const TensorDict input = testing::batch_of(at::randn({4, 3}));
  TDGraphModule gm = symbolic_trace(module, input);
  testing::check_runs_like_eager(module, gm, input);
  net->train();
  CHECK_THROWS_WITH_AS(gm.run(input),
                       "module '1' was in eval mode when traced and is in training mode now; the "
                       "graph holds the ops of the traced mode (dropout, batch statistics): trace "
                       "it again after train() or eval()",
                       RunError);
  net->eval();
  testing::check_runs_like_eager(module, gm, input);

  // The error names the layer that acts by its mode, wherever it is; without one, the
  // outermost module that changed.
  torch::nn::Sequential dropout_first(torch::nn::Dropout(0.5), torch::nn::Linear(3, 3));
  dropout_first->eval();
  auto first = make_td_module(dropout_first, {"x"}, {"y"});
  const TDGraphModule traced_first = symbolic_trace(first, input);
  dropout_first->train();
  CHECK_THROWS_WITH_AS(traced_first.run(input),
                       doctest::Contains("module '0' was in eval mode when traced"), RunError);
  torch::nn::Sequential linears(torch::nn::Linear(3, 3), torch::nn::Linear(3, 3));
  linears->eval();
  auto plain = make_td_module(linears, {"x"}, {"y"});
  const TDGraphModule traced_plain = symbolic_trace(plain, input);
  linears->train();
  CHECK_THROWS_WITH_AS(traced_plain.run(input),
                       doctest::Contains("the traced module was in eval mode when traced"),
                       RunError);
}
