// ONNX export: each pipeline is exported, written as ONNX (checked by ONNX's checker and shape
// inference in onnx_model), run in ONNX Runtime (onnxruntime-node, driven by run_onnx.js) and
// compared with tdfx's own run of the same program.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>
#include <torch/nn/functional/upsampling.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/modules/transformer.h>
#include <torch/nn/modules/transformerlayer.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "samples/attention.h"
#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/onnx/onnx_export.h"
#include "tdfx/onnx/rules/rules.h"
#include "tests/export/nn_layer_cases.h"
#include "tests/onnx/ort_runner.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

using namespace tdfx;
using tdfx::testing::ScratchDir;
namespace nn = torch::nn;

namespace {

using Inputs = tdfx::testing::NamedTensors;

/// What ONNX Runtime computes for `model` on `inputs` (by graph input name), in output order;
/// fails the test when ONNX Runtime is missing or fails.
tdfx::testing::NamedTensors run_in_ort(const std::string& model, const Inputs& inputs) {
  try {
    return tdfx::testing::run_in_ort(model, inputs).outputs;
  } catch (const std::runtime_error& e) {
    FAIL(std::string(e.what()));
  }
  return {};
}

/// True when `actual` is `expected` within 1e-5 relative (integers and bools: equal).
bool close(const at::Tensor& actual, const at::Tensor& expected) {
  if (actual.sizes() != expected.sizes() || actual.scalar_type() != expected.scalar_type()) {
    return false;
  }
  if (!at::isFloatingType(expected.scalar_type())) return at::equal(actual, expected);
  return at::allclose(actual, expected, 1e-5, 1e-6, /*equal_nan=*/true);
}

/// Exports `program` to ONNX, runs it in ONNX Runtime on `inputs` and checks each output against
/// tdfx's run: same names (the joined out keys), shapes, and values within 1e-5 relative.
void check_against_ort(const ExportedProgram& program, const Inputs& inputs) {
  ScratchDir dir("tdfx_onnx");
  const std::string model = (dir / "model.onnx").string();
  save_onnx(program, model);
  const std::vector<at::Tensor> expected = program.module()(inputs);
  const auto actual = run_in_ort(model, inputs);
  REQUIRE(actual.size() == expected.size());
  const auto& signature = program.graph_signature();
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(actual[i].first);
    // The joined key, or `<key>_out` when an input has that name.
    std::string name = signature.outputs[i].key.joined("_");
    for (const auto& in : signature.inputs) {
      if (in.kind == InputKind::kUserInput && in.target == name) name += "_out";
    }
    CHECK(actual[i].first == name);
    REQUIRE(actual[i].second.sizes() == expected[i].sizes());
    CHECK(close(actual[i].second, expected[i]));
  }
}

/// The model as a text: inputs, outputs and initializers with their types, then one line per
/// node (name, op, inputs, outputs, doc string).
std::string describe_model(const std::string& bytes) {
  onnx::ModelProto model;
  REQUIRE(model.ParseFromString(bytes));
  auto type = [](const onnx::ValueInfoProto& v) {
    std::string s = onnx::TensorProto_DataType_Name(v.type().tensor_type().elem_type()) + "[";
    const auto& shape = v.type().tensor_type().shape();
    for (int i = 0; i < shape.dim_size(); ++i) {
      if (i) s += ", ";
      s += shape.dim(i).has_dim_param() ? shape.dim(i).dim_param()
                                        : std::to_string(shape.dim(i).dim_value());
    }
    return s + "]";
  };
  std::string out = "opset " + std::to_string(model.opset_import(0).version()) + ", producer " +
                    model.producer_name() + "\n";
  for (const auto& in : model.graph().input()) out += "input " + in.name() + ": " + type(in) + "\n";
  for (const auto& o : model.graph().output()) out += "output " + o.name() + ": " + type(o) + "\n";
  for (const auto& init : model.graph().initializer()) {
    out += "initializer " + init.name() + " [";
    for (int i = 0; i < init.dims_size(); ++i)
      out += (i ? ", " : "") + std::to_string(init.dims(i));
    out += "]\n";
  }
  for (const auto& node : model.graph().node()) {
    out += node.name() + " = " + node.op_type() + "(";
    for (int i = 0; i < node.input_size(); ++i) out += (i ? ", " : "") + node.input(i);
    out += ") -> ";
    for (int i = 0; i < node.output_size(); ++i) out += (i ? ", " : "") + node.output(i);
    if (!node.doc_string().empty()) out += "  # " + node.doc_string();
    out += "\n";
  }
  return out;
}

ExportedProgram export_dynamic(const TensorDictModuleBasePtr& module, const Inputs& inputs) {
  ExportOptions options;
  options.dynamic_batch = true;
  return export_program(module, inputs, options);
}

/// The PPO actor-critic of the issue: a torch::nn::Sequential encoder, an actor head with
/// NormalParamExtractor and a critic head.
std::shared_ptr<TensorDictSequential> ppo_actor_critic() {
  auto encoder = nn::Sequential(nn::Linear(8, 16), nn::Tanh(), nn::Linear(16, 16), nn::Tanh());
  return make_td_sequential({make_td_module(encoder, {"observation"}, {"hidden"}),
                             make_td_module(nn::Linear(16, 4), {"hidden"}, {"param"}),
                             make_td_module(NormalParamExtractor(), {"param"}, {"loc", "scale"}),
                             make_td_module(nn::Linear(16, 1), {"hidden"}, {"state_value"})});
}

/// An LSTM policy whose recurrent state comes from and goes to keys.
struct LstmPolicyImpl : nn::Module {
  LstmPolicyImpl()
      : lstm(register_module("lstm", nn::LSTM(nn::LSTMOptions(4, 6).num_layers(2)))),
        head(register_module("head", nn::Linear(6, 2))) {}
  std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& h,
                                                         const at::Tensor& c) {
    auto [y, state] = lstm(x, std::make_tuple(h, c));
    return {head(y), std::get<0>(state), std::get<1>(state)};
  }
  nn::LSTM lstm;
  nn::Linear head;
};
TORCH_MODULE(LstmPolicy);

}  // namespace

TEST_CASE("onnx: seed 000's model runs in ONNX Runtime as in tdfx, and after select_out_keys") {
  at::manual_seed(0);
  auto model = samples::seed_000_model();
  const Inputs inputs = {{"x", at::randn({1, 3})}};
  check_against_ort(export_program(model, inputs), inputs);
  model->select_out_keys("loc");
  check_against_ort(export_program(model, inputs), inputs);
}

TEST_CASE("onnx: seed 000's model as ONNX: names, symbolic batch, module paths") {
  at::manual_seed(0);
  const auto program = export_dynamic(samples::seed_000_model(), {{"x", at::randn({5, 3})}});
  tdfx::testing::check_golden("tests/onnx/golden", "seed_000_dynamic.txt",
                              describe_model(onnx_model(program)));
}

TEST_CASE("onnx: a dynamic PPO actor-critic runs at its batch and at two others") {
  at::manual_seed(1);
  const auto program = export_dynamic(ppo_actor_critic(), {{"observation", at::randn({6, 8})}});
  for (int64_t batch : {6, 1, 13}) {
    CAPTURE(batch);
    check_against_ort(program, {{"observation", at::randn({batch, 8})}});
  }
}

TEST_CASE("onnx: attention, transformer layers and reshape(B*T) run at any batch") {
  // Their sizes that are functions of the batch (2*s0 heads, 5*s0 steps) are computed from
  // the input's shape in the model, not fixed at the traced batch.
  for (auto& [name, module] : samples::batch_sized_pipelines()) {
    CAPTURE(name);
    at::manual_seed(0);
    const auto program =
        export_dynamic(module, {{"obs", samples::batch_sized_input(4).get("obs")}});
    // The decoder's cross-attention guard (query is not key) and its comparison are left out.
    onnx::ModelProto model;
    REQUIRE(model.ParseFromString(onnx_model(program)));
    for (const auto& node : model.graph().node()) CHECK(node.op_type() != "Equal");
    for (const int64_t batch : {1, 7, 33}) {
      CAPTURE(batch);
      check_against_ort(program, {{"obs", samples::batch_sized_input(batch).get("obs")}});
    }
  }
}

TEST_CASE("onnx: sizes s0//2 and s0 - 1 are computed from the input's shape") {
  // Python's floor division on sizes is (a - a mod b) / b in the model.
  auto module = make_td_module(
      [](const at::Tensor& x) {
        const at::Tensor padded = at::cat({x, at::ones({x.size(0) / 2, 3}, x.options())});
        return x - padded.sum(0) * x.select(0, x.size(0) - 1);
      },
      {"obs"}, {"y"});
  at::manual_seed(0);
  const auto program = export_dynamic(module, {{"obs", at::randn({8, 3})}});
  const std::string code = program.code();
  CHECK(code.find(" // 2") != std::string::npos);
  CHECK(code.find(" - 1;") != std::string::npos);
  for (const int64_t batch : {1, 7, 33}) {
    CAPTURE(batch);
    const at::Tensor obs = at::randn({batch, 3});
    CHECK(program.module()({{"obs", obs}})[0].equal(module->call({obs}, {})[0]));
    check_against_ort(program, {{"obs", obs}});
  }
}

TEST_CASE("onnx: a conv encoder with BatchNorm in eval mode, dynamic") {
  at::manual_seed(2);
  auto conv = nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).stride(2).padding(1)),
                             nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d(2),
                             nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(8, 3));
  // Running statistics that are not the defaults, so that eval mode is what is compared.
  for (int i = 0; i < 3; ++i) conv->forward(at::randn({4, 3, 16, 16}));
  conv->eval();
  const auto program = export_dynamic(make_td_module(conv, {"pixels"}, {"logits"}),
                                      {{"pixels", at::randn({2, 3, 16, 16})}});
  for (int64_t batch : {2, 1, 5}) {
    CAPTURE(batch);
    check_against_ort(program, {{"pixels", at::randn({batch, 3, 16, 16})}});
  }
}

TEST_CASE("onnx: a two-layer LSTM policy with its state in keys") {
  at::manual_seed(3);
  const Inputs inputs = {
      {"x", at::randn({5, 3, 4})}, {"h", at::randn({2, 3, 6})}, {"c", at::randn({2, 3, 6})}};
  const auto program = export_program(
      make_td_module(LstmPolicy(), {"x", "h", "c"}, {"y", {"next", "h"}, {"next", "c"}}), inputs);
  check_against_ort(program, inputs);
}

TEST_CASE("onnx: a transformer encoder block") {
  at::manual_seed(4);
  auto block = nn::TransformerEncoderLayer(
      nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.1));
  block->eval();
  const Inputs inputs = {{"tokens", at::randn({5, 3, 8})}};
  check_against_ort(export_program(make_td_module(block, {"tokens"}, {"out"}), inputs), inputs);
}

TEST_CASE("onnx: keys that are not identifiers name the graph's inputs and outputs as spelled") {
  auto module = make_td_module([](const at::Tensor& x) { return at::relu(x) * 2; },
                               {{"obs.v1", "\"quoted\""}}, {{"naïve", "out.put"}});
  const Inputs inputs = {{"obs.v1_\"quoted\"", at::randn({4, 2})}};
  const auto program = export_program(module, inputs);
  check_against_ort(program, inputs);
  onnx::ModelProto model;
  REQUIRE(model.ParseFromString(onnx_model(program)));
  CHECK(model.graph().input(0).name() == "obs.v1_\"quoted\"");
  CHECK(model.graph().output(0).name() == "naïve_out.put");
}

TEST_CASE("onnx: a key read and written names the output <key>_out") {
  auto module = make_td_module([](const at::Tensor& x) { return x + 1; }, {"x"}, {"x"});
  const Inputs inputs = {{"x", at::randn({3})}};
  const auto program = export_program(module, inputs);
  onnx::ModelProto model;
  REQUIRE(model.ParseFromString(onnx_model(program)));
  CHECK(model.graph().input(0).name() == "x");
  CHECK(model.graph().output(0).name() == "x_out");
  check_against_ort(program, inputs);
}

TEST_CASE("onnx: an operator with no ONNX form is refused by name and nothing is written") {
  auto module = make_td_module(
      [](const at::Tensor& x, const at::Tensor& y) { return at::cdist(x, y); }, {"x", "y"}, {"d"});
  const auto program = export_program(module, {{"x", at::randn({3, 2})}, {"y", at::randn({4, 2})}});
  ScratchDir dir("tdfx_onnx_refused");
  const std::string path = (dir / "model.onnx").string();
  try {
    save_onnx(program, path);
    FAIL("written");
  } catch (const OnnxError& e) {
    CHECK(std::string(e.what()) ==
          "cannot write node 'cdist' (aten::cdist) as ONNX: aten::cdist has no ONNX form at "
          "opset 17 (see onnx_operators())");
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("onnx: a node that takes a value of the wrong type is refused by name, by its type") {
  // A program tdfx's own passes could not make, built as a stranger could (a program made
  // with CompileOnFirstRun is not compiled, so nothing checked it before).
  Graph g;
  Node* x = g.placeholder("x");
  x->meta().tensor.dtype = c10::kFloat;
  x->meta().tensor.shape = std::vector<int64_t>{2, 3};
  Node* item = g.call_function(Target::getitem(), {x, 0});
  g.output(tuple({item}));
  GraphSignature signature;
  signature.inputs = {{InputKind::kUserInput, "x", "x", {}}};
  signature.outputs = {{"getitem", NestedKey("y")}};
  const ExportedProgram program(ExportedProgram::CompileOnFirstRun{}, std::move(g),
                                std::move(signature), {}, std::nullopt, {});
  CHECK_THROWS_WITH_AS(onnx_model(program),
                       "cannot write the program as ONNX: %getitem takes %x, a Tensor, where "
                       "operator.getitem takes a list or a tuple",
                       OnnxError);
}

TEST_CASE("onnx: a user input named like a weight stays two values") {
  // The key `w` names the graph input; the parameter placeholder `w` is an initializer of
  // another name. One name for both made ONNX Runtime add the weight to itself.
  Graph g;
  Node* w = g.placeholder("w");
  w->meta().tensor.dtype = c10::kFloat;
  w->meta().tensor.shape = std::vector<int64_t>{3};
  Node* x = g.placeholder("x");
  x->meta().tensor.dtype = c10::kFloat;
  x->meta().tensor.shape = std::vector<int64_t>{3};
  Node* sum = g.call_function(Target::aten("aten::add.Tensor"), {x, w});
  sum->meta().tensor = x->meta().tensor;
  g.output(tuple({sum}));
  GraphSignature signature;
  signature.inputs = {{InputKind::kParameter, "w", "module.w", {}},
                      {InputKind::kUserInput, "x", "w", {}}};
  signature.outputs = {{"add", NestedKey("y")}};
  const ExportedProgram program(std::move(g), std::move(signature),
                                {{"w", at::tensor({10.0f, 20.0f, 30.0f})}});
  const Inputs inputs = {{"w", at::tensor({1.0f, 2.0f, 3.0f})}};
  CHECK(program.module()(inputs)[0].equal(at::tensor({11.0f, 22.0f, 33.0f})));
  check_against_ort(program, inputs);
  onnx::ModelProto model;
  REQUIRE(model.ParseFromString(onnx_model(program)));
  REQUIRE(model.graph().input_size() == 1);
  CHECK(model.graph().input(0).name() == "w");
  REQUIRE(model.graph().initializer_size() == 1);
  CHECK(model.graph().initializer(0).name() == "w_1");
}

TEST_CASE("onnx: training-mode layers are refused, naming the node") {
  // BatchNorm tracking statistics updates its buffers in place first; without them it still
  // normalises by the batch's statistics. Dropout draws a mask.
  auto refusal = [](const TensorDictModuleBasePtr& module) {
    const auto program = export_program(module, {{"x", at::randn({8, 4})}});
    try {
      onnx_model(program);
    } catch (const OnnxError& e) {
      return std::string(e.what());
    }
    return std::string("written");
  };
  CHECK(refusal(make_td_module(nn::BatchNorm1d(4), {"x"}, {"y"})) ==
        "cannot write node 'add_' (aten::add_.Scalar) as ONNX: it updates its input in place, "
        "which an ONNX model cannot: a buffer (BatchNorm's statistics in training mode: export "
        "the pipeline in eval mode; a counter of the module's own: keep it out of the exported "
        "pipeline), or a view of another tensor (write the op out of place: `y = x.sigmoid()`, "
        "not `x.sigmoid_()`)");
  CHECK(refusal(make_td_module(
            nn::BatchNorm1d(nn::BatchNorm1dOptions(4).track_running_stats(false)), {"x"}, {"y"})) ==
        "cannot write node 'batch_norm' (aten::batch_norm) as ONNX: batch norm in training "
        "mode; export the pipeline in eval mode");
  CHECK(refusal(make_td_module(nn::Dropout(0.5), {"x"}, {"y"})) ==
        "cannot write node 'dropout' (aten::dropout) as ONNX: dropout with p > 0 in training "
        "mode; export the pipeline in eval mode");
}

TEST_CASE("onnx: C++'s `1 - done` (empty_like, fill_, sub_) runs in ONNX Runtime") {
  auto module = make_td_module([](at::Tensor r, at::Tensor done) { return r * (1 - done); },
                               {"r", "done"}, {"out"});
  const at::Tensor r = at::randn({32});
  const at::Tensor done = (at::rand({32}) > 0.5).to(at::kFloat);
  const auto program = export_program(module, {{"r", r}, {"done", done}});
  check_against_ort(program, {{"r", r}, {"done", done}});
}

TEST_CASE("onnx: a captured tensor is an initializer") {
  const at::Tensor mask = (at::rand({8}) > 0.5).to(at::kFloat);
  auto module = make_td_module([mask](const at::Tensor& x) { return x * mask + 1; }, {"x"}, {"y"});
  const at::Tensor x = at::randn({4, 8});
  const auto program = export_program(module, {{"x", x}});
  CHECK(program.graph_signature().inputs.at(0).kind == InputKind::kConstant);
  check_against_ort(program, {{"x", x}});
}

TEST_CASE("onnx: dropout with p = 0 in training mode is the identity, as in ATen") {
  auto module = make_td_module(nn::Dropout(0.0), {"x"}, {"y"});
  module->train();
  const at::Tensor x = at::randn({8, 4});
  const auto program = export_program(module, {{"x", x}});
  CHECK(at::equal(program.module()({x})[0], x));
  check_against_ort(program, {{"x", x}});
}

namespace {

// The edge cases of the operator table's third column: each was once written as a model
// ONNX's checker passed and ONNX Runtime ran differently from tdfx (or was refused without
// need). `check` exports a program and runs it in ONNX Runtime against tdfx, or checks that
// the converter refuses it by name; the table shows `what` beside `op`, so the column says
// exactly what this list runs.
struct EdgeCase {
  const char* op;    // the operator table's row
  const char* what;  // what is checked, for the table
  std::function<void()> check;
};

void check_module(const TensorDictModuleBasePtr& module, const Inputs& inputs) {
  check_against_ort(export_program(module, inputs), inputs);
}

using UnaryFn = std::function<at::Tensor(const at::Tensor&)>;

void check_unary(UnaryFn f, const Inputs& inputs) {
  check_module(make_td_module(std::move(f), {"x"}, {"y"}), inputs);
}

// NaN among ordinary values, infinities and zeros, in rows.
Inputs with_nan() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  return {{"x", at::tensor({0.5f, nan, -2.0f, 3.0f, inf, nan, -inf, 0.0f, 1.0f, -0.25f, 2.0f, nan})
                    .reshape({3, 4})}};
}

Inputs large_values() {
  return {{"x", at::tensor({-200.0f, -30.0f, 0.0f, 30.0f, 100.0f, 200.0f})}};
}

Inputs hundreds() {
  at::manual_seed(12);
  return {{"x", at::randn({4, 6}) * 100}};
}

Inputs image_9x9() {
  at::manual_seed(12);
  return {{"x", at::randn({2, 1, 9, 9})}};
}

void check_interpolate(const torch::nn::functional::InterpolateFuncOptions& options) {
  check_unary(
      [options](const at::Tensor& x) { return torch::nn::functional::interpolate(x, options); },
      image_9x9());
}

const std::vector<EdgeCase>& edge_cases() {
  namespace F = torch::nn::functional;
  static const std::vector<EdgeCase> cases = {
      {"round.decimals", "decimals 1 and -1; 40 and -40 (10^40 is past float: NaN, as ATen)",
       [] {
         for (int64_t decimals : {1, -1, 40, -40}) {
           check_unary([decimals](const at::Tensor& x) { return at::round(x, decimals); },
                       hundreds());
         }
       }},
      {"div", "rounding_mode='floor' of floats (1 // 0.1 is 9), signs mixed, by 0",
       [] {
         const Inputs ratios = {
             {"x", at::tensor({1.0f, -1.0f, 7.0f, -7.0f, 0.0f, 5.0f, 0.3f, -0.3f})}};
         check_unary([](const at::Tensor& x) { return at::div(x, 0.1, "floor"); }, ratios);
         check_unary([](const at::Tensor& x) { return at::div(x, 0.1, "floor"); }, hundreds());
         check_module(
             make_td_module(
                 [](const at::Tensor& x, const at::Tensor& d) { return at::div(x, d, "floor"); },
                 {"x", "d"}, {"y"}),
             {ratios[0], {"d", at::tensor({0.1f, 0.1f, -2.0f, 2.0f, 3.0f, 0.0f, -0.1f, 0.1f})}});
       }},
      {"mean", "over a dimension of no elements (NaN)",
       [] {
         check_unary([](const at::Tensor& x) { return x.narrow(1, 0, 0).mean(1); }, hundreds());
       }},
      {"all", "over a dimension of no elements (true); over every element",
       [] {
         check_unary([](const at::Tensor& x) { return (x.narrow(1, 0, 0) > 0).all(1); },
                     hundreds());
         check_unary([](const at::Tensor& x) { return (x > -500).all(); }, hundreds());
         check_unary(
             [](const at::Tensor& x) {
               return at::stack({(x > -100).all(1), (x > 0).all(1)});
             },
             hundreds());
       }},
      {"any", "over a dimension of no elements (false)",
       [] {
         check_unary([](const at::Tensor& x) { return (x.narrow(1, 0, 0) > 0).any(1); },
                     hundreds());
         check_unary([](const at::Tensor& x) { return (x > 0).any(1); }, hundreds());
       }},
      {"narrow", "a negative start, from the dimension's end",
       [] {
         check_unary([](const at::Tensor& x) { return x.narrow(1, -2, 2); }, hundreds());
         check_unary([](const at::Tensor& x) { return x.narrow(0, -3, 1); }, hundreds());
       }},
      {"var", "over every dimension",
       [] { check_unary([](const at::Tensor& x) { return x * x.var(); }, hundreds()); }},
      {"std", "over every dimension, uncorrected",
       [] { check_unary([](const at::Tensor& x) { return x + x.std(false); }, hundreds()); }},
      {"avg_pool2d",
       "ceil_mode with a last window past the input (divided by what is inside), with and "
       "without count_include_pad; past the padding too: refused",
       [] {
         check_module(
             make_td_module(nn::AvgPool2d(nn::AvgPool2dOptions(2).ceil_mode(true)), {"x"}, {"y"}),
             image_9x9());
         check_module(
             make_td_module(
                 nn::AvgPool2d(nn::AvgPool2dOptions(2).ceil_mode(true).count_include_pad(false)),
                 {"x"}, {"y"}),
             image_9x9());
         const auto padded = export_program(
             make_td_module(
                 nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1).ceil_mode(true)), {"x"},
                 {"y"}),
             {{"x", at::randn({2, 1, 10, 10})}});
         CHECK_THROWS_WITH_AS(onnx_model(padded),
                              "cannot write node 'avg_pool2d' (aten::avg_pool2d) as ONNX: average "
                              "pooling with ceil_mode whose last window passes the padding, "
                              "counting the padding: ONNX divides that window by the whole kernel",
                              OnnxError);
       }},
      {"upsample_bilinear2d", "a scale of 1.5 that gives no whole size; a size of 13 from 9",
       [] {
         check_interpolate(F::InterpolateFuncOptions()
                               .scale_factor(std::vector<double>{1.5, 1.5})
                               .mode(torch::kBilinear)
                               .align_corners(false));
         check_interpolate(F::InterpolateFuncOptions()
                               .size(std::vector<int64_t>{13, 13})
                               .mode(torch::kBilinear)
                               .align_corners(false));
       }},
      {"upsample_nearest2d", "a scale of 0.6 that gives no whole size",
       [] {
         check_interpolate(F::InterpolateFuncOptions()
                               .scale_factor(std::vector<double>{0.6, 0.6})
                               .mode(torch::kNearest));
       }},
      {"threshold", "NaN kept",
       [] {
         check_unary([](const at::Tensor& x) { return at::threshold(x, 0.5, -1.0); }, with_nan());
       }},
      {"hardshrink", "NaN kept",
       [] { check_unary([](const at::Tensor& x) { return at::hardshrink(x, 0.5); }, with_nan()); }},
      {"sign", "NaN is 0, ±inf",
       [] { check_unary([](const at::Tensor& x) { return at::sign(x); }, with_nan()); }},
      {"erf", "NaN, ±inf",
       [] { check_unary([](const at::Tensor& x) { return at::erf(x); }, with_nan()); }},
      {"argmax", "the first NaN's index",
       [] { check_unary([](const at::Tensor& x) { return at::argmax(x, 1); }, with_nan()); }},
      {"argmin", "the first NaN's index",
       [] { check_unary([](const at::Tensor& x) { return at::argmin(x, 1); }, with_nan()); }},
      {"amax", "NaN where a slice holds one",
       [] { check_unary([](const at::Tensor& x) { return at::amax(x, {1}); }, with_nan()); }},
      {"amin", "NaN where a slice holds one; over several dimensions",
       [] {
         check_unary(
             [](const at::Tensor& x) {
               return at::cat({at::amin(x, {0, 1}).reshape({1}),
                               at::amin(x.narrow(1, 2, 2), {0, 1}).reshape({1})});
             },
             with_nan());
       }},
      {"max.dim", "NaN and the first NaN's index",
       [] {
         check_unary(
             [](const at::Tensor& x) {
               auto [values, indices] = at::max(x, 1);
               return values + indices.to(at::kFloat);
             },
             with_nan());
       }},
      {"min.dim", "NaN and the first NaN's index",
       [] {
         check_unary(
             [](const at::Tensor& x) {
               auto [values, indices] = at::min(x, 0);
               return at::cat({values, indices.to(at::kFloat)});
             },
             with_nan());
       }},
      {"softplus", "overflow past the threshold (beta 1 and 2, ±200)",
       [] {
         check_unary([](const at::Tensor& x) { return at::softplus(x * 5, 1.0, 20.0); },
                     large_values());
         check_unary([](const at::Tensor& x) { return at::softplus(x, 2.0, 5.0); }, large_values());
       }},
      {"soft_margin_loss", "exp overflowing to inf",
       [] {
         check_unary(
             [](const at::Tensor& x) { return at::soft_margin_loss(x * 5, at::ones_like(x), 0); },
             large_values());
       }},
      {"max_pool2d", "ceil_mode with a last window past the input, with padding and without",
       [] {
         at::manual_seed(3);
         check_module(
             make_td_module(
                 nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1).ceil_mode(true)), {"x"},
                 {"y"}),
             {{"x", at::randn({1, 1, 10, 10})}});
         check_module(
             make_td_module(nn::MaxPool2d(nn::MaxPool2dOptions(2).ceil_mode(true)), {"x"}, {"y"}),
             {{"x", at::randn({1, 1, 9, 9})}});
       }},
      {"pow",
       "int64 powers wrapping past 2^63 as ATen's; a power of 0; a tensor exponent of ints: "
       "refused",
       [] {
         const Inputs ints = {{"x", at::tensor({3, -3, 2, 0}, at::kLong)}};
         check_unary([](const at::Tensor& x) { return at::pow(x, 40); }, ints);
         check_unary([](const at::Tensor& x) { return at::pow(x, 0); }, ints);
         const auto by_tensor = export_program(
             make_td_module([](const at::Tensor& x) { return at::pow(x, x); }, {"x"}, {"y"}), ints);
         CHECK_THROWS_WITH_AS(onnx_model(by_tensor),
                              "cannot write node 'pow_1' (aten::pow.Tensor_Tensor) as ONNX: an "
                              "integer power whose exponent is not a constant of at least 0 (ONNX "
                              "Runtime computes integer powers in floating point, which differs "
                              "from ATen's wrapping int64 arithmetic past 2^53)",
                              OnnxError);
       }},
  };
  return cases;
}

}  // namespace

TEST_CASE("onnx: each edge case of the operator table runs in ONNX Runtime as ATen computes it") {
  for (const EdgeCase& edge : edge_cases()) {
    CAPTURE(edge.op);
    CAPTURE(edge.what);
    edge.check();
  }
}

TEST_CASE("onnx: the operator table is sorted and names what each operator becomes") {
  const auto table = onnx_operators();
  REQUIRE(table.size() > 100);
  for (size_t i = 1; i < table.size(); ++i) CHECK(table[i - 1].aten < table[i].aten);
  for (const auto& op : table) CHECK_FALSE(op.onnx.empty());

  // docs/onnx.md's table is this one, between its markers (TDFX_UPDATE_GOLDEN=1 rewrites it).
  // The third column: the edge cases this file runs in ONNX Runtime (edge_cases), by row.
  std::map<std::string, std::string> checked;
  for (const EdgeCase& edge : edge_cases()) {
    const bool listed =
        std::any_of(table.begin(), table.end(), [&](const auto& op) { return op.aten == edge.op; });
    CHECK_MESSAGE(listed, "edge case of " << edge.op << ", which the table does not list");
    std::string& cell = checked[edge.op];
    cell += (cell.empty() ? "" : "; ") + std::string(edge.what);
  }
  std::string rendered =
      "| aten operator | ONNX ops | edge cases run in ONNX Runtime |\n|---|---|---|\n";
  for (const auto& op : table) {
    const auto cell = checked.find(std::string(op.aten));
    rendered += "| `" + std::string(op.aten) + "` | " + std::string(op.onnx) + " | " +
                (cell == checked.end() ? "" : cell->second) + " |\n";
  }
  const std::string begin = "<!-- onnx_operators() begin -->\n";
  const std::string end = "<!-- onnx_operators() end -->";
  const std::string readme_path = tdfx::testing::source_dir() + "/docs/onnx.md";
  std::string readme = tdfx::testing::read_text(readme_path);
  const size_t from = readme.find(begin);
  const size_t to = readme.find(end);
  REQUIRE_MESSAGE((from != std::string::npos && to > from), "docs/onnx.md has no operator table");
  const size_t body = from + begin.size();
  if (tdfx::testing::updating_golden()) {
    readme.replace(body, to - body, rendered);
    std::ofstream(readme_path, std::ios::binary | std::ios::trunc) << readme;
  } else {
    CHECK(readme.substr(body, to - body) == rendered);
  }
}

TEST_CASE("onnx: a rule is registered only under an operator the operator table knows") {
  namespace od = tdfx::onnx_detail;
  const od::Rule rule = [](od::Converter&) { return od::Value{}; };
  od::RuleTable table;
  // By name or by overload, as the families register them.
  od::add_rules(table, {{"relu", {"Relu", rule}}, {"max.dim", {"ReduceMax", rule}}});
  CHECK(table.size() == 2);
  CHECK_THROWS_WITH_AS(od::add_rules(table, {{"as_strided", {"Identity", rule}}}),
                       doctest::Contains("a rule for aten::as_strided, an operator "
                                         "graph/op_table.cpp has no row for"),
                       InternalError);
  CHECK_THROWS_WITH_AS(od::add_rules(table, {{"from_file.overload", {"Identity", rule}}}),
                       doctest::Contains("aten::from_file.overload"), InternalError);
  CHECK_THROWS_WITH_AS(od::add_rules(table, {{"relu", {"Relu", rule}}}),
                       doctest::Contains("two rules for aten::relu"), InternalError);
  CHECK(table.size() == 2);
  // Every rule the exporter has was registered so.
  CHECK(od::rules().size() == onnx_operators().size());
}

namespace {

// The layer table's dynamic column: the layer traced with a dynamic batch at kBatch, exported
// to ONNX and run at batch 7 in ONNX Runtime against tdfx: "runs", "DIFFERS", or the refusal.
std::string dynamic_batch_column(const tdfx::testing::nn_layers::LayerCase& layer,
                                 const TensorDictModuleBasePtr& module, const ScratchDir& dir) {
  namespace layers = tdfx::testing::nn_layers;
  TraceOptions options;
  options.dynamic_batch = true;
  std::string bytes;
  std::optional<ExportedProgram> program;
  try {
    program.emplace(
        export_program(symbolic_trace(module, layers::inputs_at(layer, layers::kBatch), options)));
    bytes = onnx_model(*program);
  } catch (const Error& e) {
    return std::string("refused: ") + e.what();
  }
  const std::string path = (dir / "layer_dynamic.onnx").string();
  std::ofstream(path, std::ios::binary) << bytes;
  const auto inputs = layers::program_inputs(layer, layers::inputs_at(layer, 7));
  at::manual_seed(11);
  const std::vector<at::Tensor> expected = program->module()(inputs);
  const auto actual = run_in_ort(path, inputs);
  bool agrees = actual.size() == expected.size();
  for (size_t i = 0; agrees && i < expected.size(); ++i) {
    agrees = close(actual[i].second, expected[i]);
  }
  CHECK_MESSAGE(agrees, layer.name << ": at batch 7, ONNX Runtime's outputs differ from tdfx's");
  return agrees ? "runs" : "DIFFERS";
}

}  // namespace

TEST_CASE("onnx: every torch::nn layer runs in ONNX Runtime as in tdfx, or is refused by name") {
  // Each layer case tdfx exports (tests/export/nn_layer_cases.h), wrapped directly, at batch
  // kBatch: one line per case, "ONNX Runtime agrees" or the OnnxError, and for a layer whose
  // TensorDict has a batch, the dynamic column (dynamic_batch_column); compared whole.
  namespace layers = tdfx::testing::nn_layers;
  std::string report;
  ScratchDir dir("tdfx_onnx_layers");
  for (const layers::LayerCase& layer : layers::layer_cases()) {
    if (layer.refused != layers::LayerCase::Refused::kNo) continue;
    CAPTURE(layer.name);
    const TensorDictModuleBasePtr module = layer.module(false);
    module->train(layer.train);
    const TensorDict td = layers::inputs_at(layer, layers::kBatch);
    const auto inputs = layers::program_inputs(layer, td);
    const ExportedProgram program = export_program(symbolic_trace(module, td));
    std::string bytes;
    try {
      bytes = onnx_model(program);
    } catch (const OnnxError& e) {
      report += layer.name + (layer.train ? " (train)" : "") + ": refused: " + e.what() + "\n";
      continue;
    }
    const std::string path = (dir / "layer.onnx").string();
    std::ofstream(path, std::ios::binary) << bytes;
    at::manual_seed(11);
    const std::vector<at::Tensor> expected = program.module()(inputs);
    const auto actual = run_in_ort(path, inputs);
    bool agrees = actual.size() == expected.size();
    for (size_t i = 0; agrees && i < expected.size(); ++i)
      agrees = close(actual[i].second, expected[i]);
    CHECK_MESSAGE(agrees, layer.name << ": ONNX Runtime's outputs differ from tdfx's");
    report += layer.name + (layer.train ? " (train)" : "") +
              (agrees ? ": ONNX Runtime agrees" : ": ONNX Runtime DIFFERS");
    if (layer.batched) report += "; dynamic batch: " + dynamic_batch_column(layer, module, dir);
    report += "\n";
  }
  tdfx::testing::check_golden("tests/onnx/golden", "nn_layers.txt", report);
}

TEST_CASE("onnx: the tensors the converter makes are held to the memory budget, by node") {
  // A LayerNorm without weight over 3e8 elements would be written as 1.2 GB of ones, and a
  // BatchNorm without weight whose traced shape claims 1e9 channels as 4 GB; the programs
  // themselves are a few hundred bytes.
  auto program = [](const std::function<Node*(Graph&, Node*)>& build) {
    Graph g;
    Node* x = g.placeholder("x");
    x->meta().tensor = TensorMeta{at::kFloat, std::vector<int64_t>{2, 1000000000}};
    Node* out = build(g, x);
    out->meta().tensor = x->meta().tensor;
    g.output(tuple({out}));
    GraphSignature signature;
    signature.inputs = {{InputKind::kUserInput, "x", "x", {}}};
    signature.outputs = {{out->name(), NestedKey("y")}};
    return ExportedProgram(std::move(g), std::move(signature), {});
  };
  const ExportedProgram layer_norm = program([](Graph& g, Node* x) {
    return g.call_function(Target::aten("aten::layer_norm"),
                           {x, list({300000000}), None{}, None{}, 1e-5, false});
  });
  const ExportedProgram batch_norm = program([](Graph& g, Node* x) {
    Node* stats = g.call_function(Target::aten("aten::zeros"), {list({2})});
    stats->meta().tensor = TensorMeta{at::kFloat, std::vector<int64_t>{2}};
    return g.call_function(Target::aten("aten::batch_norm"),
                           {x, None{}, None{}, stats, stats, false, 0.1, 1e-5, false});
  });
  OnnxOptions options;
  options.memory_budget = uint64_t{64} << 20;
  const std::string budget =
      "the converter's memory budget (OnnxOptions::memory_budget, tdfx onnx --memory-budget) is "
      "67.1 MB (67,108,864 bytes)";
  CHECK_THROWS_WITH_AS(onnx_model(layer_norm, options),
                       ("cannot write node 'layer_norm' (aten::layer_norm) as ONNX: the float32 "
                        "tensor of 300000000 elements it would write takes 1.2 GB (1,200,000,000 "
                        "bytes), with 0 bytes written already; " +
                        budget)
                           .c_str(),
                       OnnxError);
  CHECK_THROWS_WITH_AS(onnx_model(batch_norm, options),
                       ("cannot write node 'batch_norm' (aten::batch_norm) as ONNX: the float32 "
                        "tensor of 1000000000 elements it would write takes 4 GB (4,000,000,000 "
                        "bytes), with 0 bytes written already; " +
                        budget)
                           .c_str(),
                       OnnxError);
}
