// Every built-in torch::nn layer a pipeline commonly uses, as a member of a user module: a
// layer with parameters is one call_module node (list arguments, recurrent results and padding
// included); a parameterless one shows as the op it records. The Python twins are in
// fx_pipelines.py (LAYERS).
#include <doctest/doctest.h>
#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/rnn.h>
#include <torch/utils.h>

#include <functional>
#include <string>

#include "tdfx/core/error.h"
#include "tests/tracer/tracer_test_support.h"

using namespace tdfx;
using tdfx::testing::bit_equal;
using tdfx::testing::fx_reference;
namespace nn = torch::nn;

namespace {

/// A user module holding one layer as `layer` (or none); forward is `call`.
struct HolderImpl : nn::Module {
  using Call = std::function<at::Tensor(nn::Module*, const at::Tensor&)>;
  HolderImpl(std::shared_ptr<nn::Module> layer, Call call) : call_(std::move(call)) {
    if (layer) layer_ = register_module("layer", std::move(layer));
  }
  at::Tensor forward(const at::Tensor& x) { return call_(layer_.get(), x); }
  std::shared_ptr<nn::Module> layer_;
  Call call_;
};
TORCH_MODULE(Holder);

struct LayerCase {
  std::string name;
  std::function<Holder()> make;
  std::vector<int64_t> shape;  // of "x" at batch 2
  bool indices = false;        // "x" holds int64 indices below 10
  /// The op's torch.fx target is torch._C._nn.<op>.
  bool nn_namespace = false;
};

/// A holder calling `layer` (a module holder such as nn::Linear) on x, or `call` on it.
template <typename Layer>
std::function<Holder()> holding(
    std::function<Layer()> make, std::function<at::Tensor(Layer&, const at::Tensor&)> call =
                                     [](Layer& layer, const at::Tensor& x) { return layer(x); }) {
  return [make, call] {
    Layer layer = make();
    return Holder(layer.ptr(), [layer, call](nn::Module*, const at::Tensor& x) mutable {
      return call(layer, x);
    });
  };
}

std::vector<LayerCase> layer_cases() {
  using T = const at::Tensor&;
  return {
      {"linear_3d", holding<nn::Linear>([] { return nn::Linear(3, 4); }), {2, 5, 3}},
      {"conv1d", holding<nn::Conv1d>([] { return nn::Conv1d(3, 4, 3); }), {2, 3, 8}},
      {"conv2d",
       holding<nn::Conv2d>([] { return nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)); }),
       {2, 3, 5, 5}},
      {"conv2d_reflect",
       holding<nn::Conv2d>([] {
         return nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1).padding_mode(torch::kReflect));
       }),
       {2, 3, 5, 5}},
      {"conv_transpose2d",
       holding<nn::ConvTranspose2d>([] { return nn::ConvTranspose2d(3, 4, 3); }),
       {2, 3, 5, 5}},
      {"batch_norm1d", holding<nn::BatchNorm1d>([] { return nn::BatchNorm1d(4); }), {2, 4}},
      {"batch_norm2d_eval",
       holding<nn::BatchNorm2d>([] {
         nn::BatchNorm2d norm(3);
         norm->eval();
         return norm;
       }),
       {2, 3, 4, 4}},
      {"layer_norm",
       holding<nn::LayerNorm>([] { return nn::LayerNorm(nn::LayerNormOptions({4})); }),
       {2, 4}},
      {"group_norm", holding<nn::GroupNorm>([] { return nn::GroupNorm(2, 4); }), {2, 4, 3}},
      {"instance_norm2d",
       holding<nn::InstanceNorm2d>(
           [] { return nn::InstanceNorm2d(nn::InstanceNorm2dOptions(3).affine(true)); }),
       {2, 3, 4, 4}},
      {"embedding", holding<nn::Embedding>([] { return nn::Embedding(10, 3); }), {2, 4}, true},
      {"prelu", holding<nn::PReLU>([] { return nn::PReLU(); }), {2, 4}},
      {"bilinear",
       holding<nn::Bilinear>([] { return nn::Bilinear(4, 4, 2); },
                             [](nn::Bilinear& layer, T x) { return layer(x, x * 2); }),
       {2, 4}},
      {"lstm",
       holding<nn::LSTM>([] { return nn::LSTM(nn::LSTMOptions(3, 4).batch_first(true)); },
                         [](nn::LSTM& layer, T x) { return std::get<0>(layer(x)); }),
       {2, 5, 3}},
      {"lstm_hidden",
       holding<nn::LSTM>([] { return nn::LSTM(nn::LSTMOptions(3, 4).batch_first(true)); },
                         [](nn::LSTM& layer, T x) {
                           return torch::squeeze(std::get<0>(std::get<1>(layer(x))), 0);
                         }),
       {2, 5, 3}},
      {"gru",
       holding<nn::GRU>([] { return nn::GRU(nn::GRUOptions(3, 4).batch_first(true)); },
                        [](nn::GRU& layer, T x) { return std::get<0>(layer(x)); }),
       {2, 5, 3}},
      {"gru_cell", holding<nn::GRUCell>([] { return nn::GRUCell(3, 4); }), {2, 3}},
      {"lstm_cell",
       holding<nn::LSTMCell>([] { return nn::LSTMCell(3, 4); },
                             [](nn::LSTMCell& layer, T x) { return std::get<0>(layer(x)); }),
       {2, 3}},
      {"rnn_cell", holding<nn::RNNCell>([] { return nn::RNNCell(3, 4); }), {2, 3}},
      {"dropout", holding<nn::Dropout>([] { return nn::Dropout(0.5); }), {2, 4}},
      {"relu", holding<nn::ReLU>([] { return nn::ReLU(); }), {2, 4}},
      {"tanh", holding<nn::Tanh>([] { return nn::Tanh(); }), {2, 4}},
      {"sigmoid", holding<nn::Sigmoid>([] { return nn::Sigmoid(); }), {2, 4}},
      {"softmax", holding<nn::Softmax>([] { return nn::Softmax(1); }), {2, 4}},
      {"gelu", holding<nn::GELU>([] { return nn::GELU(); }), {2, 4}, false, true},
      {"elu", holding<nn::ELU>([] { return nn::ELU(); }), {2, 4}, false, true},
      {"leaky_relu", holding<nn::LeakyReLU>([] { return nn::LeakyReLU(); }), {2, 4}, false, true},
      {"silu", holding<nn::SiLU>([] { return nn::SiLU(); }), {2, 4}, false, true},
      {"softplus", holding<nn::Softplus>([] { return nn::Softplus(); }), {2, 4}, false, true},
      {"max_pool2d", holding<nn::MaxPool2d>([] { return nn::MaxPool2d(2); }), {2, 3, 4, 4}},
      {"avg_pool2d",
       holding<nn::AvgPool2d>([] { return nn::AvgPool2d(2); }),
       {2, 3, 4, 4},
       false,
       true},
      {"adaptive_avg_pool2d",
       holding<nn::AdaptiveAvgPool2d>([] { return nn::AdaptiveAvgPool2d(1); }),
       {2, 3, 4, 4},
       false,
       true},
      {"flatten", holding<nn::Flatten>([] { return nn::Flatten(); }), {2, 3, 4, 4}},
      {"identity", holding<nn::Identity>([] { return nn::Identity(); }), {2, 3}},
  };
}

/// The example of `c` at batch `batch`.
TensorDict example(const LayerCase& c, int64_t batch) {
  std::vector<int64_t> shape = c.shape;
  shape[0] = batch;
  const at::Tensor x = c.indices ? at::randint(10, shape, at::kLong) : at::randn(shape);
  return TensorDict({{"x", x}}, {batch});
}

/// The module's outputs against the graph's on `input`, from the same random state.
void check_bit_identical(const TensorDictModulePtr& module, const TDGraphModule& gm,
                         const TensorDict& input, const NestedKey& out = "y") {
  TensorDict eager(input);
  torch::manual_seed(7);
  module->forward(eager);
  torch::manual_seed(7);
  const auto traced = gm.run(input);
  REQUIRE(traced.size() == 1);
  CHECK(bit_equal(traced[0], eager.get(out)));
}

/// Traces the layer case `name` at batch 2.
TDGraphModule trace_case(const std::string& name) {
  for (const LayerCase& c : layer_cases()) {
    if (c.name == name)
      return symbolic_trace(make_td_module(c.make(), {"x"}, {"y"}), example(c, 2));
  }
  FAIL("no layer case " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("leaves: every common layer in a user module prints as torch.fx and runs like eager") {
  const auto& reference = fx_reference();
  for (const LayerCase& c : layer_cases()) {
    CAPTURE(c.name);
    auto module = make_td_module(c.make(), {"x"}, {"y"});
    const TensorDict input = example(c, 2);
    TDGraphModule gm = symbolic_trace(module, input);
    gm.graph().lint();
    const std::string& graph = reference.at(c.name + " graph");
    CHECK((graph.find("torch._C._nn.") != std::string::npos) == c.nn_namespace);
    CHECK(to_string(gm.graph()) == graph);
    CHECK(gm.code() == reference.at(c.name + " code"));
    check_bit_identical(module, gm, input);
    const TensorDict other = example(c, 3);
    CHECK_THROWS_AS(gm.run(other), ShapeError);  // a static trace
    // Probed at 3 and 11, not 1: batch_norm1d is in training.
    TraceOptions options = tdfx::testing::dynamic_batch();
    options.batch_probes = {3, 11};
    // Every layer runs at any batch, the recurrent ones' zero initial state included.
    const TDGraphModule dynamic = symbolic_trace(module, input, options);
    CHECK(to_string(dynamic.graph()) == graph);
    CHECK_FALSE(dynamic.batch_specialisation().has_value());
    check_bit_identical(module, dynamic, other);
  }
}

TEST_CASE("leaves: layers whose ops take lists of sizes are call_module nodes with their body") {
  // These raised "comes from outside the module" while their size lists were left out.
  const std::string head =
      "graph():\n"
      "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
      "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
      "x), kwargs = {})\n"
      "    %layer : [#users=1] = call_module[target=layer](args = (%getitem,), kwargs = {})\n"
      "    return (layer,)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"conv1d",
       "    %_convolution : [#users=1] = call_function[target=torch._convolution](args = "
       "(%input_1, %weight, %bias), kwargs = {stride: [1], padding: [0], dilation: [1], "
       "transposed: False, output_padding: [0], groups: 1, benchmark: False, deterministic: "
       "False, cudnn_enabled: True, allow_tf32: True})"},
      {"layer_norm",
       "    %layer_norm : [#users=1] = call_function[target=torch.layer_norm](args = (%input_1,), "
       "kwargs = {normalized_shape: [4], weight: %weight, bias: %bias})"},
      {"group_norm",
       "    %group_norm : [#users=1] = call_function[target=torch.group_norm](args = (%input_1,), "
       "kwargs = {num_groups: 2, weight: %weight, bias: %bias})"},
      {"embedding",
       "    %embedding : [#users=1] = call_function[target=torch.embedding](args = (%weight, "
       "%input_1), kwargs = {})"},
  };
  for (const auto& [name, line] : cases) {
    CAPTURE(name);
    TDGraphModule gm = trace_case(name);
    CHECK(to_string(gm.graph()) == head);
    const Node* layer = gm.graph().node_list().at(2);
    REQUIRE(layer->body() != nullptr);
    const std::string body = to_string(*layer->body());
    CHECK(body.find("\n" + line + "\n") != std::string::npos);
  }
}

TEST_CASE("leaves: a Conv that pads by reflection keeps its padding inside its call") {
  TDGraphModule gm = trace_case("conv2d_reflect");
  const Node* layer = gm.graph().node_list().at(2);
  REQUIRE(layer->body() != nullptr);
  CHECK(to_string(*layer->body()) ==
        "graph():\n"
        "    %input_1 : [#users=1] = placeholder[target=input]\n"
        "    %_pad_enum : [#users=1] = call_function[target=torch._C._nn._pad_enum](args = "
        "(%input_1,), "
        "kwargs = {pad: [1, 1, 1, 1], mode: 0})\n"
        "    %weight : [#users=1] = get_attr[target=weight]\n"
        "    %bias : [#users=1] = get_attr[target=bias]\n"
        "    %_convolution : [#users=1] = call_function[target=torch._convolution](args = "
        "(%_pad_enum, %weight, %bias), kwargs = {stride: [1, 1], padding: [0, 0], dilation: [1, "
        "1], transposed: False, output_padding: [0, 0], groups: 1, benchmark: False, "
        "deterministic: False, cudnn_enabled: True, allow_tf32: True})\n"
        "    return _convolution");
}

TEST_CASE("leaves: an LSTM's call returns (output, (h, c)) and its users pick with getitem") {
  TDGraphModule gm = trace_case("lstm_hidden");
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %layer : [#users=1] = call_module[target=layer](args = (%getitem,), kwargs = {})\n"
        "    %getitem_1 : [#users=1] = call_function[target=operator.getitem](args = (%layer, "
        "1), kwargs = {})\n"
        "    %getitem_2 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%getitem_1, 0), kwargs = {})\n"
        "    %squeeze : [#users=1] = call_function[target=torch.squeeze](args = (%getitem_2,), "
        "kwargs = {dim: 0})\n"
        "    return (squeeze,)");
  const Node* layer = gm.graph().node_list().at(2);
  REQUIRE(layer->body() != nullptr);
  const std::string body = to_string(*layer->body());
  // The zero initial state is part of the call: it is made from constants, for the call alone.
  CHECK(body.find("%zeros : [#users=1] = call_function[target=torch.zeros]") != std::string::npos);
  CHECK(body.substr(body.rfind('\n') + 1) == "    return (getitem, (getitem_1, getitem_2))");
}

TEST_CASE("leaves: attention's comparison of key and value is a guard checked on every run") {
  // LibTorch's MultiheadAttention compares query, key and value with aten::equal to pick its
  // fused path. Traced with distinct key and value, the graph holds the separate path and a
  // guard; a run where key equals value, which eager runs on the other path, is refused.
  auto module = make_td_module(nn::MultiheadAttention(4, 2), {"q", "k", "v"}, {"y", "w"});
  module->eval();
  at::manual_seed(0);
  const TensorDict td(
      {{"q", at::randn({3, 2, 4})}, {"k", at::randn({5, 2, 4})}, {"v", at::randn({5, 2, 4})}});
  TDGraphModule gm = symbolic_trace(module, td);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=3] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "q), kwargs = {})\n"
        "    %getitem_1 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%tensordict, k), kwargs = {})\n"
        "    %getitem_2 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%tensordict, v), kwargs = {})\n"
        "    %multihead_attention : [#users=2] = call_module[target=module](args = (%getitem, "
        "%getitem_1, %getitem_2), kwargs = {})\n"
        "    %getitem_3 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%multihead_attention, 0), kwargs = {})\n"
        "    %getitem_4 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%multihead_attention, 1), kwargs = {})\n"
        "    return (getitem_3, getitem_4)");
  TensorDict same(td);
  CHECK_NOTHROW(gm.forward(same));
  TensorDict shared({{"q", td.get("q")}, {"k", td.get("k")}, {"v", td.get("k").clone()}});
  try {
    gm.forward(shared);
    FAIL("ran");
  } catch (const RunError& e) {
    CHECK(std::string(e.what()) ==
          "while executing %multihead_attention = call_module[module](%getitem, %getitem_1, "
          "%getitem_2): the guard %_assert_async failed: a comparison of tensors inside this "
          "layer (attention's query, key and value) comes out otherwise for these inputs than "
          "when the graph was traced, so they take another path through it; trace with inputs "
          "like these");
  }
}

TEST_CASE("leaves: a value read by user code stays a TraceError beside a built-in layer") {
  auto module = make_td_module(Holder(nn::MultiheadAttention(4, 2).ptr(),
                                      [](nn::Module* layer, const at::Tensor& x) {
                                        auto& attention =
                                            dynamic_cast<nn::MultiheadAttentionImpl&>(*layer);
                                        if (x.sum().item<float>() > 0)
                                          return std::get<0>(attention.forward(x, x, x));
                                        return x;
                                      }),
                               {"x"}, {"y"});
  CHECK_THROWS_WITH_AS(symbolic_trace(module, TensorDict({{"x", at::randn({2, 5, 4})}}, {2})),
                       doctest::Contains("aten::item turns a traced tensor into a C++ value"),
                       TraceError);
}

TEST_CASE("leaves: a layer's weight used by user code is not a call of the layer") {
  // `F::linear(x, lin->weight)` reads the weight alone (C++ records it as t and matmul): a
  // get_attr and the ops, not a second `self.lin(x)`, which would add the bias. (GCC
  // evaluates the right operand of + first.)
  struct TiedImpl : torch::nn::Module {
    TiedImpl() : lin(register_module("lin", torch::nn::Linear(3, 3))) {}
    at::Tensor forward(const at::Tensor& x) {
      return lin(x) + torch::nn::functional::linear(x, lin->weight);
    }
    torch::nn::Linear lin;
  };
  auto module = make_td_module(std::make_shared<TiedImpl>(), {"x"}, {"y"});
  const TensorDict input = testing::batch_of(at::randn({2, 3}));
  TDGraphModule gm = symbolic_trace(module, input);
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    lin_weight = self.lin.weight\n"
        "    t = torch.t(lin_weight);  lin_weight = None\n"
        "    matmul = getitem @ t;  t = None\n"
        "    lin = self.lin(getitem);  getitem = None\n"
        "    add = lin + matmul;  lin = matmul = None\n"
        "    return (add,)\n"
        "    ");
  check_bit_identical(module, gm, input);
}

TEST_CASE("leaves: a layer's weight read after a call of the layer is a get_attr") {
  struct AfterImpl : torch::nn::Module {
    AfterImpl() : lin(register_module("lin", torch::nn::Linear(3, 3))) {}
    at::Tensor forward(const at::Tensor& x) {
      at::Tensor h = lin(x);
      return h + lin->weight.sum();
    }
    torch::nn::Linear lin;
  };
  auto module = make_td_module(std::make_shared<AfterImpl>(), {"x"}, {"y"});
  const TensorDict input = testing::batch_of(at::randn({2, 3}));
  TDGraphModule gm = symbolic_trace(module, input);
  // It was refused as "a value of the trace comes from outside the module".
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    lin = self.lin(getitem);  getitem = None\n"
        "    lin_weight = self.lin.weight\n"
        "    sum_1 = torch.sum(lin_weight);  lin_weight = None\n"
        "    add = lin + sum_1;  lin = sum_1 = None\n"
        "    return (add,)\n"
        "    ");
  check_bit_identical(module, gm, input);
}

TEST_CASE("leaves: an LSTM given its state is one call_module, lstm(x, (h, c)) as in Python") {
  struct StatefulImpl : nn::Module {
    StatefulImpl()
        : lstm(register_module("lstm", nn::LSTM(nn::LSTMOptions(4, 3).batch_first(true)))) {}
    std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& h,
                                                           const at::Tensor& c) {
      auto [y, state] = lstm->forward(x, std::make_tuple(h, c));
      return {y, std::get<0>(state), std::get<1>(state)};
    }
    nn::LSTM lstm{nullptr};
  };
  auto module =
      make_td_module(std::make_shared<StatefulImpl>(), {"x", "h0", "c0"}, {"y", "h", "c"});
  const TensorDict td(
      {{"x", at::randn({2, 5, 4})}, {"h0", at::randn({1, 2, 3})}, {"c0", at::randn({1, 2, 3})}});
  TDGraphModule gm = symbolic_trace(module, td);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=3] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %getitem_1 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%tensordict, h0), kwargs = {})\n"
        "    %getitem_2 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%tensordict, c0), kwargs = {})\n"
        "    %lstm : [#users=2] = call_module[target=lstm](args = (%getitem, (%getitem_1, "
        "%getitem_2)), kwargs = {})\n"
        "    %getitem_3 : [#users=1] = call_function[target=operator.getitem](args = (%lstm, 0), "
        "kwargs = {})\n"
        "    %getitem_4 : [#users=2] = call_function[target=operator.getitem](args = (%lstm, 1), "
        "kwargs = {})\n"
        "    %getitem_5 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%getitem_4, 0), kwargs = {})\n"
        "    %getitem_6 : [#users=1] = call_function[target=operator.getitem](args = "
        "(%getitem_4, 1), kwargs = {})\n"
        "    return (getitem_3, getitem_5, getitem_6)");
  // The code passes the state as one tuple, which the body takes apart (forward(input, hx)).
  CHECK(gm.code().find("lstm = self.lstm(getitem, (getitem_1, getitem_2));") != std::string::npos);
  // The printed graph runs too, its call_module through its body, as the eager module does.
  TensorDict eager(td), traced(td);
  module->forward(eager);
  const auto outputs = gm.graph_module().run(gm.graph_inputs(td));
  REQUIRE(outputs.size() == 3);
  CHECK(at::equal(outputs[0].toTensor(), eager.get("y")));
  CHECK(at::equal(outputs[2].toTensor(), eager.get("c")));
  // Recompiled, the view is lowered by inlining the call: the body's items of hx become h and
  // c themselves, and the program runs as the eager module does.
  gm.mutable_graph();
  gm.recompile();
  for (const Node* node : gm.program_graph().nodes()) CHECK(node->op() != OpCode::kCallModule);
  gm.forward(traced);
  for (const char* key : {"y", "h", "c"}) CHECK(at::equal(traced.get(key), eager.get(key)));
}

TEST_CASE("leaves: a GRUCell given its state is one call_module, cell(x, h), in any batch") {
  // A recurrent policy's core as users write it: the state from the TensorDict, reset where an
  // episode ended. gru_cell is recorded as the ops it calls (two linears and the gates'
  // arithmetic); the call is all of them, its arguments in the cell's order.
  struct CoreImpl : nn::Module {
    CoreImpl() : cell(register_module("cell", nn::GRUCell(3, 5))) {}
    at::Tensor forward(const at::Tensor& x, const at::Tensor& h, const at::Tensor& done) {
      return cell(x, h * (1 - done));
    }
    nn::GRUCell cell{nullptr};
  };
  auto module = make_td_module(std::make_shared<CoreImpl>(), {"x", "h", "done"}, {"next_h"});
  auto example = [](int64_t batch) {
    return TensorDict({{"x", at::randn({batch, 3})},
                       {"h", at::randn({batch, 5})},
                       {"done", at::randint(2, {batch, 1}).to(at::kFloat)}},
                      {batch});
  };
  const TensorDict td = example(2);
  const std::string expected =
      "graph():\n"
      "    %tensordict : [#users=3] = placeholder[target=tensordict]\n"
      "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
      "x), kwargs = {})\n"
      "    %getitem_1 : [#users=1] = call_function[target=operator.getitem](args = "
      "(%tensordict, h), kwargs = {})\n"
      "    %getitem_2 : [#users=1] = call_function[target=operator.getitem](args = "
      "(%tensordict, done), kwargs = {})\n"
      "    %rsub : [#users=1] = call_function[target=torch.rsub](args = (%getitem_2,), kwargs = "
      "{other: 1})\n"
      "    %mul : [#users=1] = call_function[target=operator.mul](args = (%getitem_1, %rsub), "
      "kwargs = {})\n"
      "    %cell : [#users=1] = call_module[target=cell](args = (%getitem, %mul), kwargs = {})\n"
      "    return (cell,)";
  TDGraphModule gm = symbolic_trace(module, td);
  CHECK(to_string(gm.graph()) == expected);
  check_bit_identical(module, gm, td, "next_h");
  const TDGraphModule dynamic = symbolic_trace(module, td, tdfx::testing::dynamic_batch());
  CHECK(to_string(dynamic.graph()) == expected);
  check_bit_identical(module, dynamic, example(7), "next_h");
}
