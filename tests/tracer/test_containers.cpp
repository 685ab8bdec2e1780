// symbolic_trace through torch::nn containers, and leaves called more than once: each call of a
// leaf is its own call_module node named as torch.fx names it. The Python twins of these
// modules are in fx_pipelines.py.
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "tests/tracer/tracer_test_support.h"

using namespace tdfx;
using tdfx::testing::batch_of;
using tdfx::testing::check_runs_like_eager;
using tdfx::testing::dynamic_batch;
using tdfx::testing::fx_reference;

namespace {

using torch::nn::Linear;

/// net = Sequential(Linear(3, 4), ReLU(), Linear(4, 2)); forward: net(x).
struct SequentialMemberImpl : torch::nn::Module {
  SequentialMemberImpl()
      : net(register_module(
            "net", torch::nn::Sequential(Linear(3, 4), torch::nn::ReLU(), Linear(4, 2)))) {}
  at::Tensor forward(const at::Tensor& x) { return net->forward(x); }
  torch::nn::Sequential net;
};
TORCH_MODULE(SequentialMember);

/// blocks = ModuleList(Sequential(Linear(3, 4), Tanh()), Linear(4, 2)), called in turn.
struct NestedContainersImpl : torch::nn::Module {
  NestedContainersImpl()
      : blocks(register_module(
            "blocks", torch::nn::ModuleList(torch::nn::Sequential(Linear(3, 4), torch::nn::Tanh()),
                                            Linear(4, 2)))) {}
  at::Tensor forward(const at::Tensor& x) {
    return blocks[1]->as<Linear>()->forward(blocks[0]->as<torch::nn::Sequential>()->forward(x));
  }
  torch::nn::ModuleList blocks;
};
TORCH_MODULE(NestedContainers);

/// layers = ModuleList(Linear(3, 4), Linear(4, 4)); forward: x = relu(layer(x)) for each.
struct ModuleListMemberImpl : torch::nn::Module {
  ModuleListMemberImpl()
      : layers(register_module("layers", torch::nn::ModuleList(Linear(3, 4), Linear(4, 4)))) {}
  at::Tensor forward(at::Tensor x) {
    for (const auto& layer : *layers) x = torch::relu(layer->as<Linear>()->forward(x));
    return x;
  }
  torch::nn::ModuleList layers;
};
TORCH_MODULE(ModuleListMember);

/// trunk = Linear(3, 4); heads = ModuleDict({mu: Linear(4, 2), sigma: Linear(4, 2)}).
struct ModuleDictMemberImpl : torch::nn::Module {
  ModuleDictMemberImpl()
      : trunk(register_module("trunk", Linear(3, 4))),
        heads(register_module(
            "heads",
            torch::nn::ModuleDict(std::vector<std::pair<std::string, std::shared_ptr<Module>>>{
                {"mu", Linear(4, 2).ptr()}, {"sigma", Linear(4, 2).ptr()}}))) {}
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x) {
    const at::Tensor h = torch::relu(trunk(x));
    return {heads["mu"]->as<Linear>()->forward(h),
            torch::exp(heads["sigma"]->as<Linear>()->forward(h))};
  }
  Linear trunk;
  torch::nn::ModuleDict heads;
};
TORCH_MODULE(ModuleDictMember);

/// lin(relu(lin(x))): one Linear called twice.
struct LeafTwiceImpl : torch::nn::Module {
  LeafTwiceImpl() : lin(register_module("lin", Linear(4, 4))) {}
  at::Tensor forward(const at::Tensor& x) { return lin(torch::relu(lin(x))); }
  Linear lin;
};
TORCH_MODULE(LeafTwice);

/// relu(x + fc2(relu(fc1(x)))).
struct ResidualImpl : torch::nn::Module {
  ResidualImpl()
      : fc1(register_module("fc1", Linear(4, 4))), fc2(register_module("fc2", Linear(4, 4))) {}
  at::Tensor forward(const at::Tensor& x) { return torch::relu(x + fc2(torch::relu(fc1(x)))); }
  Linear fc1, fc2;
};
TORCH_MODULE(Residual);

/// x = relu(bn(lin(x))) three times, the BatchNorm in training mode (it updates its
/// statistics in place on every call).
struct LoopedLayersImpl : torch::nn::Module {
  LoopedLayersImpl()
      : lin(register_module("lin", Linear(4, 4))),
        bn(register_module("bn", torch::nn::BatchNorm1d(4))) {}
  at::Tensor forward(at::Tensor x) {
    for (int i = 0; i < 3; ++i) x = torch::relu(bn(lin(x)));
    return x;
  }
  Linear lin;
  torch::nn::BatchNorm1d bn;
};
TORCH_MODULE(LoopedLayers);

/// An Embedding whose weight the head reads again: h @ t(emb.weight), h = tanh(emb(x)).
struct TiedWeightsImpl : torch::nn::Module {
  TiedWeightsImpl() : emb(register_module("emb", torch::nn::Embedding(10, 4))) {}
  at::Tensor forward(const at::Tensor& x) { return torch::tanh(emb(x)).matmul(emb->weight.t()); }
  torch::nn::Embedding emb;
};
TORCH_MODULE(TiedWeights);

/// Traces `module` on a batch of 2, checks graph text and lint, and runs it bit-identically
/// to eager at batch 2; traced with a dynamic batch, the same graph runs so at batch 5.
TDGraphModule trace_and_run(const TensorDictModulePtr& module, int64_t features,
                            const std::string& expected_graph) {
  const TensorDict input = batch_of(at::randn({2, features}));
  TDGraphModule gm = symbolic_trace(module, input);
  CHECK(to_string(gm.graph()) == expected_graph);
  gm.graph().lint();
  CHECK(gm.batch_specialisation().has_value());
  check_runs_like_eager(module, gm, input);
  const TDGraphModule dynamic = symbolic_trace(module, input, dynamic_batch());
  CHECK(to_string(dynamic.graph()) == expected_graph);
  CHECK_FALSE(dynamic.batch_specialisation().has_value());
  check_runs_like_eager(module, dynamic, batch_of(at::randn({5, features})));
  return gm;
}

/// The module of each case in fx_pipelines.py, with its input width (0: indices below 10).
std::vector<std::tuple<std::string, TensorDictModulePtr, int64_t>> python_twins() {
  return {
      {"sequential_member", make_td_module(SequentialMember(), {"x"}, {"y"}), 3},
      {"sequential_root",
       make_td_module(torch::nn::Sequential(Linear(3, 4), torch::nn::ReLU(), Linear(4, 2)), {"x"},
                      {"y"}),
       3},
      {"nested_containers", make_td_module(NestedContainers(), {"x"}, {"y"}), 3},
      {"module_list_member", make_td_module(ModuleListMember(), {"x"}, {"y"}), 3},
      {"module_dict_member", make_td_module(ModuleDictMember(), {"x"}, {"mu", "sigma"}), 3},
      {"leaf_twice", make_td_module(LeafTwice(), {"x"}, {"y"}), 4},
      {"residual", make_td_module(Residual(), {"x"}, {"y"}), 4},
      {"tied_weights", make_td_module(TiedWeights(), {"x"}, {"y"}), 0},
      {"looped_layers", make_td_module(LoopedLayers(), {"x"}, {"y"}), 4},
  };
}

}  // namespace

TEST_CASE("containers: a Sequential member's leaves are call_module nodes named by their path") {
  // torch.fx's graph of the Python twin; the ReLU child shows as its op (see README, Limits).
  trace_and_run(make_td_module(SequentialMember(), {"x"}, {"y"}), 3,
                "graph():\n"
                "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
                "    %getitem : [#users=1] = call_function[target=operator.getitem](args = "
                "(%tensordict, x), kwargs = {})\n"
                "    %net_0 : [#users=1] = call_module[target=net.0](args = (%getitem,), kwargs = "
                "{})\n"
                "    %relu : [#users=1] = call_function[target=torch.relu](args = (%net_0,), "
                "kwargs = {})\n"
                "    %net_2 : [#users=1] = call_module[target=net.2](args = (%relu,), kwargs = "
                "{})\n"
                "    return (net_2,)");
}

TEST_CASE("containers: a Sequential wrapped directly is the root, its children named _0, _2") {
  TDGraphModule gm = trace_and_run(
      make_td_module(torch::nn::Sequential(Linear(3, 4), torch::nn::ReLU(), Linear(4, 2)), {"x"},
                     {"y"}),
      3,
      "graph():\n"
      "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
      "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
      "x), kwargs = {})\n"
      "    %_0 : [#users=1] = call_module[target=0](args = (%getitem,), kwargs = {})\n"
      "    %relu : [#users=1] = call_function[target=torch.relu](args = (%_0,), kwargs = {})\n"
      "    %_2 : [#users=1] = call_module[target=2](args = (%relu,), kwargs = {})\n"
      "    return (_2,)");
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    _0 = getattr(self, \"0\")(getitem);  getitem = None\n"
        "    relu = torch.relu(_0);  _0 = None\n"
        "    _2 = getattr(self, \"2\")(relu);  relu = None\n"
        "    return (_2,)\n"
        "    ");
}

TEST_CASE("containers: ModuleList and ModuleDict members are traced through") {
  trace_and_run(make_td_module(ModuleListMember(), {"x"}, {"y"}), 3,
                "graph():\n"
                "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
                "    %getitem : [#users=1] = call_function[target=operator.getitem](args = "
                "(%tensordict, x), kwargs = {})\n"
                "    %layers_0 : [#users=1] = call_module[target=layers.0](args = (%getitem,), "
                "kwargs = {})\n"
                "    %relu : [#users=1] = call_function[target=torch.relu](args = (%layers_0,), "
                "kwargs = {})\n"
                "    %layers_1 : [#users=1] = call_module[target=layers.1](args = (%relu,), "
                "kwargs = {})\n"
                "    %relu_1 : [#users=1] = call_function[target=torch.relu](args = "
                "(%layers_1,), kwargs = {})\n"
                "    return (relu_1,)");
  TDGraphModule gm = trace_and_run(
      make_td_module(ModuleDictMember(), {"x"}, {"mu", "sigma"}), 3,
      "graph():\n"
      "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
      "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
      "x), kwargs = {})\n"
      "    %trunk : [#users=1] = call_module[target=trunk](args = (%getitem,), kwargs = {})\n"
      "    %relu : [#users=2] = call_function[target=torch.relu](args = (%trunk,), kwargs = {})\n"
      "    %heads_mu : [#users=1] = call_module[target=heads.mu](args = (%relu,), kwargs = {})\n"
      "    %heads_sigma : [#users=1] = call_module[target=heads.sigma](args = (%relu,), kwargs = "
      "{})\n"
      "    %exp : [#users=1] = call_function[target=torch.exp](args = (%heads_sigma,), kwargs = "
      "{})\n"
      "    return (heads_mu, exp)");
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    trunk = self.trunk(getitem);  getitem = None\n"
        "    relu = torch.relu(trunk);  trunk = None\n"
        "    heads_mu = self.heads.mu(relu)\n"
        "    heads_sigma = self.heads.sigma(relu);  relu = None\n"
        "    exp = torch.exp(heads_sigma);  heads_sigma = None\n"
        "    return (heads_mu, exp)\n"
        "    ");
}

TEST_CASE("containers: a leaf called twice gives two nodes with the ops between them") {
  TDGraphModule gm = trace_and_run(
      make_td_module(LeafTwice(), {"x"}, {"y"}), 4,
      "graph():\n"
      "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
      "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
      "x), kwargs = {})\n"
      "    %lin : [#users=1] = call_module[target=lin](args = (%getitem,), kwargs = {})\n"
      "    %relu : [#users=1] = call_function[target=torch.relu](args = (%lin,), kwargs = {})\n"
      "    %lin_1 : [#users=1] = call_module[target=lin](args = (%relu,), kwargs = {})\n"
      "    return (lin_1,)");
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    lin = self.lin(getitem);  getitem = None\n"
        "    relu = torch.relu(lin);  lin = None\n"
        "    lin_1 = self.lin(relu);  relu = None\n"
        "    return (lin_1,)\n"
        "    ");
  // Each call keeps its own op-level body.
  for (const Node* node : gm.graph().nodes()) {
    if (node->op() != OpCode::kCallModule) continue;
    CAPTURE(node->name());
    REQUIRE(node->body() != nullptr);
    CHECK(to_string(*node->body()).find("torch.addmm") != std::string::npos);
  }
}

TEST_CASE("containers: layers called in a loop give a node per call, statistics updated alike") {
  // BatchNorm's num_batches_tracked.add_(1) gives the buffer a new jit value on every call;
  // it is still the buffer, and reading it again starts the next call.
  auto module = make_td_module(LoopedLayers(), {"x"}, {"y"});
  const TensorDict input = batch_of(at::randn({3, 4}));
  TDGraphModule gm = symbolic_trace(module, input);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %lin : [#users=1] = call_module[target=lin](args = (%getitem,), kwargs = {})\n"
        "    %bn : [#users=1] = call_module[target=bn](args = (%lin,), kwargs = {})\n"
        "    %relu : [#users=1] = call_function[target=torch.relu](args = (%bn,), kwargs = {})\n"
        "    %lin_1 : [#users=1] = call_module[target=lin](args = (%relu,), kwargs = {})\n"
        "    %bn_1 : [#users=1] = call_module[target=bn](args = (%lin_1,), kwargs = {})\n"
        "    %relu_1 : [#users=1] = call_function[target=torch.relu](args = (%bn_1,), kwargs = "
        "{})\n"
        "    %lin_2 : [#users=1] = call_module[target=lin](args = (%relu_1,), kwargs = {})\n"
        "    %bn_2 : [#users=1] = call_module[target=bn](args = (%lin_2,), kwargs = {})\n"
        "    %relu_2 : [#users=1] = call_function[target=torch.relu](args = (%bn_2,), kwargs = "
        "{})\n"
        "    return (relu_2,)");
  gm.graph().lint();
  // Eager and traced runs from the same statistics end with the same statistics.
  auto buffers = [&] {
    std::vector<at::Tensor> out;
    for (const auto& item : module->named_buffers(true)) out.push_back(item.value().clone());
    return out;
  };
  const auto before = buffers();
  TensorDict eager(input);
  module->forward(eager);
  const auto after_eager = buffers();
  {
    at::NoGradGuard no_grad;
    size_t i = 0;
    for (const auto& item : module->named_buffers(true)) item.value().copy_(before[i++]);
  }
  const auto traced = gm.run(input);
  CHECK(tdfx::testing::bit_equal(traced.at(0), eager.get("y")));
  const auto after_traced = buffers();
  REQUIRE(after_traced.size() == 3);
  for (size_t i = 0; i < after_traced.size(); ++i) {
    CHECK(tdfx::testing::bit_equal(after_traced[i], after_eager[i]));
  }
  CHECK(after_traced[2].item<int64_t>() == 3);  // num_batches_tracked, once per call
}

TEST_CASE("containers: in a TensorDictSequential each call is named by the prototype's rule") {
  // The prototype traces each TensorDictModule alone (lin, lin_1; a Sequential root's _0, _2)
  // and renames call_module nodes of child i to _{i}_{name} in the sequential's graph.
  auto pipeline = make_td_sequential(
      {make_td_module(LeafTwice(), {"x"}, {"h"}),
       make_td_module(torch::nn::Sequential(Linear(4, 4), torch::nn::ReLU(), Linear(4, 2)), {"h"},
                      {"y"})});
  const TensorDict input = batch_of(at::randn({2, 4}));
  TDGraphModule gm = symbolic_trace(pipeline, input);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %_0_lin : [#users=1] = call_module[target=0.module.lin](args = (%getitem,), kwargs "
        "= {})\n"
        "    %relu : [#users=1] = call_function[target=torch.relu](args = (%_0_lin,), kwargs = "
        "{})\n"
        "    %_0_lin_1 : [#users=2] = call_module[target=0.module.lin](args = (%relu,), kwargs "
        "= {})\n"
        "    %_1__0 : [#users=1] = call_module[target=1.module.0](args = (%_0_lin_1,), kwargs = "
        "{})\n"
        "    %relu_1 : [#users=1] = call_function[target=torch.relu](args = (%_1__0,), kwargs = "
        "{})\n"
        "    %_1__2 : [#users=1] = call_module[target=1.module.2](args = (%relu_1,), kwargs = "
        "{})\n"
        "    return (_0_lin_1, _1__2)");
  gm.graph().lint();
  check_runs_like_eager(pipeline, gm, input);
  const TDGraphModule dynamic = symbolic_trace(pipeline, input, dynamic_batch());
  CHECK(to_string(dynamic.graph()) == to_string(gm.graph()));
  check_runs_like_eager(pipeline, dynamic, batch_of(at::randn({7, 4})));
}

TEST_CASE("containers: graphs and code match torch.fx on the Python twins, and run like eager") {
  const auto& reference = fx_reference();
  for (const auto& [name, module, features] : python_twins()) {
    CAPTURE(name);
    auto x = [features = features](int64_t batch) {
      return features ? at::randn({batch, features}) : at::randint(10, {batch, 5}, at::kLong);
    };
    const TensorDict input = batch_of(x(2));
    TDGraphModule gm = symbolic_trace(module, input);
    CHECK(to_string(gm.graph()) == reference.at(name + " graph"));
    CHECK(gm.code() == reference.at(name + " code"));
    gm.graph().lint();
    check_runs_like_eager(module, gm, input);
    // Probed at 3 and 11, not 1: looped_layers holds a BatchNorm in training.
    TraceOptions options = dynamic_batch();
    options.batch_probes = {3, 11};
    const TDGraphModule dynamic = symbolic_trace(module, input, options);
    CHECK(to_string(dynamic.graph()) == to_string(gm.graph()));
    check_runs_like_eager(module, dynamic, batch_of(x(3)));
  }
}

TEST_CASE("containers: one layer shared by two TensorDictModules is a call of each") {
  torch::nn::Linear shared(4, 4);
  auto pipeline = make_td_sequential(
      {make_td_module(shared, {"x"}, {"h"}), make_td_module(shared, {"h"}, {"y"})});
  const TensorDict input = batch_of(at::randn({3, 4}));
  TDGraphModule gm = symbolic_trace(pipeline, input);
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    _0_linear = getattr(self, \"0\").module(getitem);  getitem = None\n"
        "    _1_linear_1 = getattr(self, \"1\").module(_0_linear)\n"
        "    return (_0_linear, _1_linear_1)\n"
        "    ");
  check_runs_like_eager(pipeline, gm, input);
}
