// Gradients of a training step through the traced graph: parameter gradients bit-equal to
// eager's, the first non-finite gradient found where it starts (golden reports from real
// runs), a NaN loss said first, exploding and vanishing gradients visible in the tables.
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/modules/transformerlayer.h>

#include <cmath>
#include <set>
#include <sstream>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/debug/gradients.h"
#include "tdfx/diagram/overlay.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/export/program.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/support/golden.h"

using namespace tdfx;

namespace {

using samples::rms_input;
using samples::rms_pipeline;

std::shared_ptr<TensorDictSequential> chain(int64_t depth, double scale, bool sigmoid) {
  at::manual_seed(1);
  std::vector<TensorDictModuleBasePtr> modules;
  for (int64_t i = 0; i < depth; ++i) {
    torch::nn::Linear fc(8, 8);
    {
      torch::NoGradGuard no_grad;
      fc->weight.mul_(scale);
    }
    const std::string in = "h" + std::to_string(i), out = "h" + std::to_string(i + 1);
    modules.push_back(make_td_module(fc, {in}, {"z" + std::to_string(i)}));
    if (sigmoid) {
      modules.push_back(make_td_module([](const at::Tensor& z) { return at::sigmoid(z); },
                                       {"z" + std::to_string(i)}, {out}));
    } else {
      modules.push_back(make_td_module([](const at::Tensor& z) { return z * 1; },
                                       {"z" + std::to_string(i)}, {out}));
    }
  }
  auto seq = make_td_sequential(modules);
  seq->select_out_keys(std::vector<NestedKey>{NestedKey("h" + std::to_string(depth))});
  return seq;
}

/// The output-gradient norms of the call_module nodes (the Linear layers), in backward order.
std::vector<double> layer_grad_norms(const GradReport& report) {
  std::vector<double> norms;
  for (const NodeGrad& entry : report.nodes) {
    if (entry.op.rfind("call_module", 0) == 0) norms.push_back(entry.grad.norm);
  }
  return norms;
}

}  // namespace

TEST_CASE("gradients: parameter gradients are bit-equal to an eager backward") {
  const auto pipeline = rms_pipeline();
  TensorDict td({{"obs", at::randn({5, 3})}}, {5});
  TDGraphModule gm = symbolic_trace(pipeline, td);
  const GradReport report =
      grad_stats(debuggee(gm, td), Loss::output("action", Loss::Reduction::kMean));
  // No parameter's .grad was touched by the report.
  for (const auto& parameter : pipeline->parameters()) CHECK_FALSE(parameter.grad().defined());
  TensorDict eager(td);
  pipeline->forward(eager);
  eager.get("action").mean().backward();
  const auto named = pipeline->named_parameters(true);
  REQUIRE(report.parameters.size() == named.size());
  for (const ParameterGrad& entry : report.parameters) {
    CAPTURE(entry.name);
    const at::Tensor* parameter = named.find(entry.name);
    REQUIRE(parameter != nullptr);
    CHECK(at::equal(entry.gradient, parameter->grad()));
  }
  // The same from the exported program, on copies of its state.
  const ExportedProgram program = export_program(gm);
  const GradReport exported = grad_stats(debuggee(program, {td.get("obs")}),
                                         Loss::output("action", Loss::Reduction::kMean));
  REQUIRE(exported.parameters.size() == named.size());
  for (const ParameterGrad& entry : exported.parameters) {
    CAPTURE(entry.name);
    CHECK(at::equal(entry.gradient, named.find(entry.name)->grad()));
  }
  for (auto& parameter : pipeline->parameters()) parameter.mutable_grad().reset();
}

TEST_CASE("gradients: the RMS normaliser's NaN gradient starts at the sqrt's input") {
  const auto pipeline = rms_pipeline();
  const TensorDict td = rms_input(*pipeline);
  TDGraphModule gm = symbolic_trace(pipeline, td);
  const auto bad = first_nonfinite_grad(debuggee(gm, td), Loss::output("action"));
  REQUIRE(bad.has_value());
  CHECK(bad->node == "mean");
  CHECK(bad->grad_fns == std::vector<std::string>{"SqrtBackward0"});
  CHECK(bad->rows == std::vector<int64_t>{1});
  testing::check_golden("tests/debug/golden", "rms_nonfinite_grad.txt", bad->str());
  // From the exported program too, at the same node.
  const ExportedProgram program = export_program(gm);
  const auto from_program = first_nonfinite_grad(debuggee(program, {td.get("obs")}));
  REQUIRE(from_program.has_value());
  CHECK(from_program->grad_fns == std::vector<std::string>{"SqrtBackward0"});
}

TEST_CASE("gradients: a NaN loss is said first") {
  auto module = make_td_sequential(
      {make_td_module(torch::nn::Linear(2, 2), {"x"}, {"h"}),
       make_td_module([](const at::Tensor& h) { return at::log(h - 100); }, {"h"}, {"y"})});
  const TensorDict td({{"x", at::randn({2, 2})}}, {2});
  TDGraphModule gm = symbolic_trace(module, td);
  const auto bad = first_nonfinite_grad(debuggee(gm, td));
  REQUIRE(bad.has_value());
  CHECK(bad->loss_nonfinite);
  CHECK(bad->str() ==
        "the loss is not finite (nan): its NaN or Inf comes from the forward values, not from "
        "backward; look at them (first_nonfinite, tdfx run --find-nonfinite)\n");
  // A loss that masks the NaN has finite gradients everywhere.
  CHECK_FALSE(first_nonfinite_grad(debuggee(gm, td), Loss::of([](const auto& outputs) {
                                     return outputs.at(0).nan_to_num().sum();
                                   }))
                  .has_value());
}

TEST_CASE("gradients: exploding and vanishing gradients show in the tables") {
  const TensorDict td({{"h0", at::randn({4, 8})}}, {4});
  SUBCASE("exploding: a deep chain with large weights") {
    TDGraphModule gm = symbolic_trace(chain(6, 4.0, false), td);
    const GradReport report = grad_stats(debuggee(gm, td));
    // In backward order the linear layers' output gradients grow at every step.
    const std::vector<double> norms = layer_grad_norms(report);
    REQUIRE(norms.size() == 6);
    for (size_t i = 1; i < norms.size(); ++i) CHECK(norms[i] > norms[i - 1]);
    testing::check_golden(
        "tests/debug/golden", "exploding_grad_table.txt",
        grad_table(report, 100).str() + "\n" + parameter_grad_table(report, 100).str());
  }
  SUBCASE("vanishing: a sigmoid chain") {
    TDGraphModule gm = symbolic_trace(chain(6, 1.0, true), td);
    const GradReport report = grad_stats(debuggee(gm, td));
    const std::vector<double> norms = layer_grad_norms(report);
    REQUIRE(norms.size() == 6);
    for (size_t i = 1; i < norms.size(); ++i) CHECK(norms[i] < norms[i - 1]);
    testing::check_golden("tests/debug/golden", "vanishing_grad_table.txt",
                          grad_table(report, 100).str());
  }
}

TEST_CASE("gradients: a loss that names no output is an Error listing the outputs") {
  auto module = make_td_module(torch::nn::Linear(2, 2), {"x"}, {"y"});
  const TensorDict td({{"x", at::randn({2, 2})}}, {2});
  TDGraphModule gm = symbolic_trace(module, td);
  CHECK_THROWS_WITH_AS(grad_stats(debuggee(gm, td), Loss::output("z")),
                       "loss: no output is named 'z'; the outputs are 'y' (node linear)", Error);
}

namespace {

/// A user module with two Linear leaves and a tanh between them.
struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(8, 8))),
        fc2(register_module("fc2", torch::nn::Linear(8, 8))) {}
  at::Tensor forward(const at::Tensor& x) { return fc2(at::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

}  // namespace

TEST_CASE("gradients: the flow per module marks where the gradient blows up or dies") {
  at::manual_seed(2);
  const TensorDict td({{"h0", at::randn({4, 8})}}, {4});
  SUBCASE("exploding: each module's output gradient grows on the way back") {
    TDGraphModule gm = symbolic_trace(chain(8, 4.0, false), td);
    const GradFlow flow = grad_stats(debuggee(gm, td)).flow;
    std::vector<double> linear_scales;
    for (const ModuleFlow& f : flow.modules) {
      if (f.type == "Linear") linear_scales.push_back(f.scale.value_or(0));
    }
    REQUIRE(linear_scales.size() == 8);
    // In pipeline order, the earlier a module the larger its gradient.
    for (size_t i = 1; i < linear_scales.size(); ++i)
      CHECK(linear_scales[i] < linear_scales[i - 1]);
    CHECK(flow.modules.front().mark == ModuleFlow::Mark::kExploding);
    testing::check_golden("tests/debug/golden", "exploding_flow_table.txt",
                          flow_table(flow, 100).str());
  }
  SUBCASE("vanishing: a sigmoid chain") {
    TDGraphModule gm = symbolic_trace(chain(8, 1.0, true), td);
    const GradFlow flow = grad_stats(debuggee(gm, td)).flow;
    CHECK(flow.modules.front().mark == ModuleFlow::Mark::kVanishing);
    testing::check_golden("tests/debug/golden", "vanishing_flow_table.txt",
                          flow_table(flow, 100).str());
  }
  SUBCASE("the RMS normaliser: the origin of the NaN and the modules it reaches") {
    const auto pipeline = rms_pipeline();
    const TensorDict input = rms_input(*pipeline);
    TDGraphModule gm = symbolic_trace(pipeline, input);
    const GradReport report = grad_stats(debuggee(gm, input), Loss::output("action"));
    CHECK(report.nonfinite_origin == "mean");
    testing::check_golden("tests/debug/golden", "rms_flow_table.txt",
                          flow_table(report.flow, 100).str());
  }
  SUBCASE("modules inside a TensorDictModule, and parameters named in an exported program") {
    at::manual_seed(3);
    auto pipeline = make_td_sequential(
        {make_td_module(Mlp(), {"x"}, {"h"}),
         make_td_module(torch::nn::Sequential(torch::nn::Linear(8, 4), torch::nn::ReLU()), {"h"},
                        {"y"})});
    const TensorDict input({{"x", at::randn({4, 8})}}, {4});
    TDGraphModule gm = symbolic_trace(pipeline, input);
    const GradFlow flow = grad_stats(debuggee(gm, input)).flow;
    testing::check_golden("tests/debug/golden", "inner_flow_table.txt",
                          flow_table(flow, 100).str());
    // The exported program's paths start at the pipeline (`module.0`); the flow is the same.
    const ExportedProgram program = export_program(gm);
    const GradFlow exported = grad_stats(debuggee(program, {input.get("x")})).flow;
    REQUIRE(exported.modules.size() == flow.modules.size());
    for (size_t i = 0; i < flow.modules.size(); ++i) {
      const ModuleFlow &a = flow.modules[i], &b = exported.modules[i];
      CHECK(b.path == "module." + a.path);
      CHECK(b.type == a.type);
      CHECK(b.parameter_grad_norm == a.parameter_grad_norm);
      CHECK(b.output_grad_norm == a.output_grad_norm);
      CHECK(b.mark == a.mark);
    }
  }
}

TEST_CASE("gradients: the flow drawn on both views, the origin of the NaN ringed (golden DOT)") {
  SUBCASE("exploding: red grows towards the input") {
    at::manual_seed(2);
    const TensorDict td({{"h0", at::randn({4, 8})}}, {4});
    TDGraphModule gm = symbolic_trace(chain(5, 8.0, false), td);
    const GradReport report = grad_stats(debuggee(gm, td));
    RenderOptions options = diagram_options(gm);
    options.overlay = grad_overlay(report);
    options.module_overlay = flow_overlay(report.flow);
    const std::vector<std::string>& first = options.module_overlay.at("0").lines;
    CHECK(std::find(first.begin(), first.end(), "exploding") != first.end());
    testing::check_golden("tests/debug/golden", "exploding_grad_ops.dot",
                          to_dot(gm.graph(), options));
    options.view = View::kModules;
    testing::check_golden("tests/debug/golden", "exploding_grad_modules.dot",
                          to_dot(gm.graph(), options));
  }
  SUBCASE("the RMS normaliser: %mean and its module ringed") {
    const auto pipeline = rms_pipeline();
    const TensorDict input = rms_input(*pipeline);
    TDGraphModule gm = symbolic_trace(pipeline, input);
    const GradReport report = grad_stats(debuggee(gm, input), Loss::output("action"));
    RenderOptions options = diagram_options(gm);
    options.overlay = grad_overlay(report);
    options.module_overlay = flow_overlay(report.flow);
    CHECK(options.overlay.at("mean").marked);
    CHECK(options.module_overlay.at("1").marked);
    CHECK_FALSE(options.module_overlay.at("0").marked);
    testing::check_golden("tests/debug/golden", "rms_grad_ops.dot", to_dot(gm.graph(), options));
    options.view = View::kModules;
    testing::check_golden("tests/debug/golden", "rms_grad_modules.dot",
                          to_dot(gm.graph(), options));
  }
}

TEST_CASE("gradients: what a stranger's pipelines found") {
  SUBCASE("an exported BatchNorm: its buffers get no gradient and keep their values") {
    at::manual_seed(4);
    auto bn = torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4),
                                    torch::nn::ReLU());
    auto pipeline = make_td_sequential({make_td_module(bn, {"x"}, {"y"})});
    const TensorDict td({{"x", at::randn({5, 3})}}, {5});
    TDGraphModule gm = symbolic_trace(pipeline, td);
    const ExportedProgram program = export_program(gm);
    const at::Tensor mean_before = bn[1]->as<torch::nn::BatchNorm1d>()->running_mean.clone();
    const GradReport traced = grad_stats(debuggee(gm, td));
    const GradReport exported = grad_stats(debuggee(program, {td.get("x")}));
    REQUIRE(traced.parameters.size() == exported.parameters.size());
    for (size_t i = 0; i < traced.parameters.size(); ++i) {
      CAPTURE(traced.parameters[i].name);
      CHECK(traced.parameters[i].name == exported.parameters[i].name);
      CHECK(at::equal(traced.parameters[i].gradient, exported.parameters[i].gradient));
    }
    // In training mode BatchNorm updates its running mean as it runs: put back after.
    CHECK(at::equal(bn[1]->as<torch::nn::BatchNorm1d>()->running_mean, mean_before));
  }
  SUBCASE("a loss named like a key and like another output's node takes the key") {
    at::manual_seed(5);
    auto pipeline =
        make_td_sequential({make_td_module(torch::nn::Linear(2, 2), {"x"}, {"linear_1"}),
                            make_td_module(torch::nn::Linear(2, 2), {"linear_1"}, {"linear"})});
    const TensorDict td({{"x", at::randn({3, 2})}}, {3});
    TDGraphModule gm = symbolic_trace(pipeline, td);
    const Debuggee run = debuggee(gm, td);
    TensorDict eager(td);
    pipeline->forward(eager);
    CHECK(grad_stats(run, Loss::output("linear")).loss ==
          doctest::Approx(eager.get("linear").sum().item<double>()));
  }
  SUBCASE("a module the loss does not reach has no gradient, and is not vanishing") {
    at::manual_seed(6);
    auto pipeline = make_td_sequential({make_td_module(torch::nn::Linear(2, 2), {"x"}, {"a"}),
                                        make_td_module(torch::nn::Linear(2, 2), {"x"}, {"b"})});
    const TensorDict td({{"x", at::randn({3, 2})}}, {3});
    TDGraphModule gm = symbolic_trace(pipeline, td);
    const GradReport report = grad_stats(debuggee(gm, td), Loss::output("b"));
    REQUIRE(report.flow.modules.size() == 2);
    CHECK(report.flow.modules[0].mark == ModuleFlow::Mark::kNone);
    CHECK_FALSE(report.flow.modules[0].scale.has_value());
    const auto overlay = flow_overlay(report.flow);
    CHECK(overlay.at("0").fill.empty());
    CHECK(overlay.at("0").lines == std::vector<std::string>{"no gradient"});
  }
  SUBCASE("a shared layer's parameter is counted once, traced or exported") {
    at::manual_seed(7);
    torch::nn::Linear shared(2, 2);
    auto pipeline = make_td_sequential(
        {make_td_module(shared, {"x"}, {"h"}), make_td_module(shared, {"h"}, {"y"})});
    const TensorDict td({{"x", at::randn({3, 2})}}, {3});
    TDGraphModule gm = symbolic_trace(pipeline, td);
    const GradReport traced = grad_stats(debuggee(gm, td), Loss::output("y"));
    const GradReport exported =
        grad_stats(debuggee(export_program(gm), {td.get("x")}), Loss::output("y"));
    REQUIRE(traced.parameters.size() == 2);
    REQUIRE(exported.parameters.size() == 2);
    for (size_t i = 0; i < 2; ++i) {
      CHECK(traced.parameters[i].name == exported.parameters[i].name);
      CHECK(at::equal(traced.parameters[i].gradient, exported.parameters[i].gradient));
    }
  }
  SUBCASE("a NaN weight: the gradient's origin says the forward values hold NaN") {
    at::manual_seed(8);
    torch::nn::Linear second(2, 2);
    {
      torch::NoGradGuard no_grad;
      second->weight[1][0] = NAN;
    }
    auto pipeline = make_td_sequential({make_td_module(torch::nn::Linear(2, 2), {"x"}, {"h"}),
                                        make_td_module(second, {"h"}, {"y"})});
    const TensorDict td({{"x", at::randn({3, 2})}}, {3});
    TDGraphModule gm = symbolic_trace(pipeline, td);
    const auto bad = first_nonfinite_grad(
        debuggee(gm, td), Loss::of([](const auto& o) { return o[1].select(1, 0).sum(); }));
    REQUIRE(bad.has_value());
    CHECK(bad->node == "_0_linear");
    CHECK(bad->nonfinite_users == std::vector<std::string>{"_1_linear_1"});
  }
  SUBCASE("losses that cannot be: not floating, not connected; limits that cannot be") {
    auto module = make_td_module(torch::nn::Linear(2, 2), {"x"}, {"y"});
    const TensorDict td({{"x", at::randn({2, 2})}}, {2});
    TDGraphModule gm = symbolic_trace(module, td);
    const Debuggee run = debuggee(gm, td);
    CHECK_THROWS_WITH_AS(
        grad_stats(run, Loss::of([](const auto& o) { return o[0].sum().to(at::kLong); })),
        "loss: the loss function must return a floating tensor with one element", Error);
    CHECK_THROWS_WITH_AS(
        grad_stats(run,
                   Loss::of([](const auto&) { return at::ones({}).requires_grad_(true) * 2; })),
        "loss (a function of the outputs) does not depend on the graph: no node or parameter "
        "got a gradient",
        Error);
    CHECK_THROWS_WITH_AS(grad_stats(run, Loss::sum(), FlowLimits{10, 0.1}),
                         "FlowLimits: vanishing must be in (0, 1] and exploding a finite number "
                         "of at least 1; got vanishing 10 and exploding 0.1",
                         Error);
  }
}

namespace {

/// Every pipeline the samples ship, with its input, traced.
struct SamplePipeline {
  std::string name;
  std::shared_ptr<TensorDictModuleBase> pipeline;
  TensorDict input;
};

std::vector<SamplePipeline> sample_pipelines() {
  at::manual_seed(9);
  std::vector<SamplePipeline> out;
  out.push_back(
      {"seed 000's model", samples::seed_000_model(), TensorDict({{"x", at::randn({4, 3})}}, {4})});
  out.push_back({"seed 000's nested model", samples::seed_000_nested_model(),
                 TensorDict({{NestedKey{"some", "key"}, at::randn({4, 3})}}, {4})});
  out.push_back({"seed 002's module", samples::seed_module(), samples::seed_module_input()});
  out.push_back(
      {"seed 002's sequential", samples::seed_sequential(), samples::seed_sequential_input()});
  out.push_back({"seed 002's nested sequential", samples::nested_sequential(),
                 samples::nested_sequential_input()});
  out.push_back({"the actor-critic", samples::actor_critic(), samples::actor_critic_input()});
  const auto rms = rms_pipeline();
  out.push_back({"the RMS normaliser", rms, rms_input(*rms)});
  return out;
}

/// Runs both gradient tools and every table and overlay made from them with `loss`: each
/// either works or throws a tdfx::Error, whose message is returned ("" when it worked).
std::string every_gradient_tool(const Debuggee& run, const Loss& loss) {
  try {
    const GradReport report = grad_stats(run, loss);
    (void)grad_table(report).str();
    (void)parameter_grad_table(report).str();
    (void)flow_table(report.flow).str();
    (void)grad_layer(report);
    (void)first_nonfinite_grad(run, loss);
    return "";
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("not a tdfx::Error: " << e.what());
  }
  return "";
}

}  // namespace

TEST_CASE(
    "gradients: a loss on one output of seed 000's model: the other's nodes read no gradient") {
  at::manual_seed(10);
  const TensorDict td({{"x", at::randn({2, 3})}}, {2});
  TDGraphModule gm = symbolic_trace(samples::seed_000_model(), td);
  const ExportedProgram program = export_program(gm);
  for (const std::string output : {"loc", "scale"}) {
    CAPTURE(output);
    const GradReport traced = grad_stats(debuggee(gm, td), Loss::output(output));
    const GradReport exported = grad_stats(debuggee(program, {td.get("x")}), Loss::output(output));
    CHECK_FALSE(traced.nodes_without_gradient.empty());
    CHECK(traced.nodes_without_gradient.size() == exported.nodes_without_gradient.size());
    CHECK_FALSE(first_nonfinite_grad(debuggee(gm, td), Loss::output(output)).has_value());
    CHECK_FALSE(
        first_nonfinite_grad(debuggee(program, {td.get("x")}), Loss::output(output)).has_value());
    // The overlay says it too, on the node.
    const auto overlay = grad_overlay(traced);
    CHECK(overlay.at(traced.nodes_without_gradient.front()).lines ==
          std::vector<std::string>{"no gradient"});
    testing::check_golden("tests/debug/golden", "seed_000_loss_" + output + "_grads.txt",
                          grad_table(traced, 100).str() + "\n" +
                              parameter_grad_table(traced, 100).str() + "\n" +
                              flow_table(traced.flow, 100).str());
  }
}

TEST_CASE("gradients: every gradient tool takes a loss on every output of the samples' pipelines") {
  for (SamplePipeline& sample : sample_pipelines()) {
    CAPTURE(sample.name);
    TDGraphModule gm = symbolic_trace(sample.pipeline, sample.input);
    const ExportedProgram program = export_program(gm);
    std::vector<at::Tensor> user_inputs;
    for (const InputSpec& spec : program.graph_signature().inputs) {
      if (spec.kind != InputKind::kUserInput) continue;
      for (const NestedKey& key : sample.input.keys(true, true)) {
        if (key.joined("_") == spec.target) user_inputs.push_back(sample.input.get(key));
      }
    }
    const Debuggee traced = debuggee(gm, sample.input);
    const Debuggee exported = debuggee(program, user_inputs);
    std::vector<Loss> losses = {Loss::sum()};
    for (const NestedKey& key : traced.output_keys) {
      losses.push_back(Loss::output(key.joined("_")));
      losses.push_back(Loss::output(key.joined("_"), Loss::Reduction::kMean));
    }
    for (const Loss& loss : losses) {
      CAPTURE(loss.describe());
      const std::string traced_error = every_gradient_tool(traced, loss);
      CHECK(traced_error == every_gradient_tool(exported, loss));
      // Only seed 000's nested model, whose outputs depend on no parameter, has no gradient.
      if (sample.name == "seed 000's nested model") {
        CHECK(traced_error == "loss (" + loss.describe() +
                                  ") does not require grad: nothing it depends on has a gradient");
      } else {
        CHECK(traced_error == "");
      }
    }
  }
}

namespace {

/// Layers whose parameter paths differ only in the middle (`layers.0.linear1.weight`).
struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : linear1(register_module("linear1", torch::nn::Linear(4, 4))),
        linear2(register_module("linear2", torch::nn::Linear(4, 4))) {}
  at::Tensor forward(const at::Tensor& x) { return linear2(at::relu(linear1(x))); }
  torch::nn::Linear linear1, linear2;
};
TORCH_MODULE(Block);

struct StackImpl : torch::nn::Module {
  StackImpl() {
    for (int i = 0; i < 3; ++i) layers->push_back(Block());
    register_module("layers", layers);
  }
  at::Tensor forward(at::Tensor x) {
    for (const auto& layer : *layers) x = layer->as<Block>()->forward(x);
    return x;
  }
  torch::nn::ModuleList layers;
};
TORCH_MODULE(Stack);

}  // namespace

TEST_CASE("gradients: the parameter table at its default width tells every parameter apart") {
  at::manual_seed(11);
  auto pipeline = make_td_sequential({make_td_module(torch::nn::Linear(4, 4), {"x"}, {"h"}),
                                      make_td_module(Stack(), {"h"}, {"y"})});
  const TensorDict td({{"x", at::randn({2, 4})}}, {2});
  TDGraphModule gm = symbolic_trace(pipeline, td);
  const GradReport report = grad_stats(debuggee(gm, td));
  REQUIRE(report.parameters.size() == 14);
  std::istringstream lines(parameter_grad_table(report).str());
  std::set<std::string> shown;
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) shown.insert(line.substr(0, line.find(' ')));
  CHECK(shown.size() == 14);
}

TEST_CASE("gradients: a parameter whose value is zero has no ratio in the table, not nan") {
  torch::nn::Linear linear(4, 2);
  {
    torch::NoGradGuard no_grad;
    linear->bias.zero_();  // as a bias is often initialised
  }
  auto pipeline = make_td_module(linear, {"x"}, {"y"});
  const TensorDict td({{"x", at::randn({3, 4})}}, {3});
  const GradReport report = grad_stats(debuggee(symbolic_trace(pipeline, td), td));
  REQUIRE(report.parameters.size() == 2);
  const std::string table = parameter_grad_table(report).str();
  CHECK(table.find("nan ") == table.find("nan  inf"));  // only the header's "nan" column
  std::istringstream lines(table);
  std::string header, weight, bias;
  std::getline(lines, header);
  std::getline(lines, weight);
  std::getline(lines, bias);
  CHECK(bias.rfind("module.bias", 0) == 0);
  // The ratio column is blank: its header's end holds spaces in the bias row.
  const size_t ratio_end = header.find("ratio") + std::string("ratio").size();
  CHECK(bias.substr(header.find("ratio"), ratio_end - header.find("ratio")) == "     ");
}

namespace {

/// A PPO-style encoder: a transformer layer over the observation sequence, a GRU carrying a
/// recurrent state, the last step's features out, and the next state.
struct EncoderImpl : torch::nn::Module {
  EncoderImpl()
      : attention(register_module(
            "attention", torch::nn::TransformerEncoderLayer(
                             torch::nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16)))),
        gru(register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(8, 8)))) {
    attention->eval();  // dropout off: a policy acting
  }
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& obs, const at::Tensor& h) {
    // obs [B, T, 8] → [T, B, 8] for the sequence-first layers.
    const at::Tensor seq = attention(obs.transpose(0, 1));
    auto [out, next] = gru(seq, h.transpose(0, 1).contiguous());
    return {out.select(0, -1), next.transpose(0, 1)};
  }
  torch::nn::TransformerEncoderLayer attention;
  torch::nn::GRU gru;
};
TORCH_MODULE(Encoder);

}  // namespace

TEST_CASE("gradients: a PPO policy with attention, a GRU and nested keys, a loss on each output") {
  at::manual_seed(12);
  auto policy = make_td_sequential(
      {make_td_module(Encoder(), {"observation", {"memory", "h"}}, {"features", {"next", "h"}}),
       make_td_module(torch::nn::Linear(8, 4), {"features"}, {"params"}),
       make_td_module(NormalParamExtractor(), {"params"}, {{"action", "loc"}, {"action", "scale"}}),
       make_td_module(torch::nn::Linear(8, 1), {"features"}, {"value"})});
  const TensorDict td(
      {{"observation", at::randn({3, 5, 8})}, {NestedKey{"memory", "h"}, at::randn({3, 1, 8})}},
      {3});
  TDGraphModule gm = symbolic_trace(policy, td);
  const ExportedProgram program = export_program(gm);
  const Debuggee traced = debuggee(gm, td);
  const Debuggee exported = debuggee(program, {td.get("observation"), td.get({"memory", "h"})});
  for (const NestedKey& key : traced.output_keys) {
    CAPTURE(key.repr());
    const Loss loss = Loss::output(key.joined("_"));
    CHECK(every_gradient_tool(traced, loss) == "");
    CHECK(every_gradient_tool(exported, loss) == "");
  }
  // A loss on the value alone leaves the actor head without a gradient, and says so.
  const GradReport value = grad_stats(traced, Loss::output("value"));
  CHECK(std::find(value.parameters_without_gradient.begin(),
                  value.parameters_without_gradient.end(),
                  "module.1.module.weight") != value.parameters_without_gradient.end());
  // A NaN planted in the recurrent state: the gradient's origin is named.
  TensorDict bad(td);
  at::Tensor h = td.get({"memory", "h"}).clone();
  h[1][0][3] = NAN;
  bad.set({"memory", "h"}, h);
  const auto found = first_nonfinite_grad(
      debuggee(gm, bad), Loss::of([](const auto& o) { return o[0].nan_to_num().sum(); }));
  // It starts at the attention's output, whose user, the GRU, returns NaN in its tuple: the
  // report points at the forward values.
  REQUIRE(found.has_value());
  CHECK(found->node == "_0_attention");
  CHECK(found->nonfinite_users == std::vector<std::string>{"_0_gru"});
}

TEST_CASE("gradients: the flow of a pipeline that is one TensorDictModule has its rows") {
  at::manual_seed(3);
  auto pipeline = make_td_module(Mlp(), {"x"}, {"h"});
  const TensorDict input({{"x", at::randn({4, 8})}}, {4});
  const GradFlow flow = grad_stats(debuggee(symbolic_trace(pipeline, input), input)).flow;
  std::vector<std::string> paths;
  for (const ModuleFlow& f : flow.modules) paths.push_back(f.path);
  CHECK(paths == std::vector<std::string>{"", "fc1", "fc2"});
  REQUIRE(flow.modules[0].parameter_grad_norm);
  REQUIRE(flow.modules[1].parameter_grad_norm);
  REQUIRE(flow.modules[2].parameter_grad_norm);
  // The root's parameters are its modules' together.
  CHECK(*flow.modules[0].parameter_grad_norm ==
        doctest::Approx(std::hypot(*flow.modules[1].parameter_grad_norm,
                                   *flow.modules[2].parameter_grad_norm)));
  const std::string table = flow_table(flow, 100).str();
  CHECK(table.find("\n(root)") != std::string::npos);
  CHECK(table.find("\n  fc1") != std::string::npos);
}

TEST_CASE("gradients: a backward past the memory budget is refused naming the node it was in") {
  // gather's backward writes into zeros the size of its input: an expanded weight, 14.4 GB
  // though the forward holds a few bytes.
  Graph g;
  Node* w = g.placeholder("p_w");
  w->meta().tensor = TensorMeta{at::kFloat, std::vector<int64_t>{1, 1}};
  Node* empty = g.placeholder("b_empty");
  empty->meta().tensor = TensorMeta{at::kFloat, std::vector<int64_t>{60000, 0}};
  Node* index = g.placeholder("b_index");
  index->meta().tensor = TensorMeta{at::kLong, std::vector<int64_t>{1, 1}};
  Node* x = g.placeholder("x");
  x->meta().tensor = TensorMeta{at::kFloat, std::vector<int64_t>{1, 1}};
  Node* n = g.call_function(Target::aten("aten::size.int"), {empty, int64_t{0}});
  Node* wide = g.call_function(Target::aten("aten::expand"), {w, list({n, n})});
  Node* picked = g.call_function(Target::aten("aten::gather"), {wide, int64_t{0}, index});
  Node* out = g.call_function(Target::aten("aten::mul.Tensor"), {picked, x});
  g.output(tuple({out}));
  GraphSignature signature;
  signature.inputs = {{InputKind::kParameter, "p_w", "module.w", {}},
                      {InputKind::kBuffer, "b_empty", "module.empty", {}},
                      {InputKind::kBuffer, "b_index", "module.index", {}},
                      {InputKind::kUserInput, "x", "x", {}}};
  signature.outputs = {{"mul", NestedKey("y")}};
  const ExportedProgram program(std::move(g), std::move(signature),
                                {{"p_w", at::ones({1, 1})},
                                 {"b_empty", at::zeros({60000, 0})},
                                 {"b_index", at::zeros({1, 1}, at::kLong)}});
  const ScopedMemoryBudget budget(uint64_t{64} << 20, "the test's budget");
  CHECK_THROWS_WITH_AS(
      grad_stats(debuggee(program, {at::ones({1, 1})}), Loss::sum()),
      doctest::Contains("backward from the loss (sum of every output), in the backward of "
                        "%gather (the last node whose gradient was computed): an allocation of "
                        "14.4 GB (14,400,000,000 bytes)"),
      RunError);
}

// Last in the file: earlier tests draw unseeded inputs (at::randn), and their goldens depend on
// the random state the tests before them leave.
TEST_CASE("gradients: a parameter's NaN gradient under finite node gradients is found (0 × Inf)") {
  // x[0, 0] is Inf: both hidden units of row 0 are ±Inf, tanh saturates there and passes a
  // gradient of 0, so every node's gradient is finite; the weight's gradient dh^T x is not:
  // 0 × Inf in column 0, both rows.
  at::manual_seed(0);
  auto module = make_td_sequential({make_td_module(torch::nn::Linear(2, 2), {"x"}, {"h"}),
                                    make_td_module(torch::nn::Tanh(), {"h"}, {"y"})});
  const TensorDict td({{"x", at::tensor({INFINITY, 1.0f, 0.5f, -1.0f}).reshape({2, 2})}}, {2});
  TDGraphModule gm = symbolic_trace(module, td);
  const ExportedProgram program = export_program(gm);
  // The loss on y: h itself holds the Inf. The trace names the TensorDictModule `0`, the
  // program `module.0`.
  const std::pair<std::optional<NonFiniteGrad>, std::string> found[] = {
      {first_nonfinite_grad(debuggee(gm, td), Loss::output("y")), "0"},
      {first_nonfinite_grad(debuggee(program, {td.get("x")}), Loss::output("y")), "module.0"}};
  for (const auto& [bad, td_module] : found) {
    REQUIRE(bad.has_value());
    CHECK_FALSE(bad->loss_nonfinite);
    CHECK(bad->parameter == "module.0.module.weight");
    CHECK(bad->grad.nan_count == 2);
    CHECK(bad->indices == std::vector<std::vector<int64_t>>{{0, 0}, {1, 0}});
    CHECK(bad->td_module == td_module);
    CHECK(bad->nonfinite_users == std::vector<std::string>{bad->node});
    CHECK(bad->str().rfind("first non-finite gradient: parameter module.0.module.weight (2 NaN, "
                           "0 Inf of 4 values); every node's gradient is finite, so the backward "
                           "of the node that reads it made it from a forward value\n",
                           0) == 0);
  }
}
