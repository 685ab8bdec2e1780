// symbolic_trace on seed 002's pipelines: golden graph and code, bit-identical runs.
#include <ATen/CPUGeneratorImpl.h>
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/support/test_support.h"

using namespace tdfx;
using namespace tdfx::samples;
using tdfx::testing::golden;

namespace {

void check_golden(const TDGraphModule& gm, const std::string& name) {
  CHECK(to_string(gm.graph()) == golden(name + ".graph.txt"));
  CHECK(gm.code() == golden(name + ".code.txt"));
}

void check_bit_identical(const std::shared_ptr<TensorDictModuleBase>& module,
                         const TDGraphModule& gm, const TensorDict& input) {
  TensorDict eager(input);
  module->forward(eager);
  TensorDict traced(input);
  gm.forward(traced);
  for (const NestedKey& key : module->selected_out_keys()) {
    CAPTURE(key);
    CHECK(at::equal(eager.get(key), traced.get(key)));
  }
}

/// Doubles its input in place, then normalises it with a BatchNorm1d: tracing it in training
/// mode would move the example's tensor and the running statistics.
struct InPlaceNormImpl : torch::nn::Module {
  InPlaceNormImpl() : norm(register_module("norm", torch::nn::BatchNorm1d(3))) {}
  at::Tensor forward(at::Tensor x) {
    x.mul_(2);
    return norm(x);
  }
  torch::nn::BatchNorm1d norm;
};
TORCH_MODULE(InPlaceNorm);

/// Bit-identical copies of a module's buffers, by name.
std::map<std::string, at::Tensor> buffer_copies(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : module.named_buffers(true)) out[item.key()] = item.value().clone();
  return out;
}

/// True when two tensors hold the same bytes in the same shape and dtype.
bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         at::equal(a.contiguous().reshape({-1}).view(at::kByte),
                   b.contiguous().reshape({-1}).view(at::kByte));
}

}  // namespace

TEST_CASE("trace: seed 002's module prints the golden graph and code and runs bit-identically") {
  auto module = seed_module();
  const TensorDict input = seed_module_input();
  TDGraphModule gm = symbolic_trace(module, input);
  check_golden(gm, "seed_module");
  check_bit_identical(module, gm, input);
  gm.graph().lint();
}

TEST_CASE(
    "trace: seed 002's sequential prints the golden graph and code and runs bit-identically") {
  auto module = seed_sequential();
  const TensorDict input = seed_sequential_input();
  TDGraphModule gm = symbolic_trace(module, input);
  check_golden(gm, "seed_sequential");
  check_bit_identical(module, gm, input);
  CHECK(gm.out_keys() ==
        std::vector<NestedKey>{{"intermediate", "x"}, {"output", "probabilities"}});
}

TEST_CASE("trace: a nested sequential prints the golden graph and code and runs bit-identically") {
  auto module = nested_sequential();
  const TensorDict input = nested_sequential_input();
  TDGraphModule gm = symbolic_trace(module, input);
  check_golden(gm, "nested_sequential");
  check_bit_identical(module, gm, input);
}

TEST_CASE("trace: a dynamic trace runs at another batch size and writes into tensordict_out") {
  auto module = seed_sequential();
  TraceOptions dynamic;
  dynamic.dynamic_batch = true;
  TDGraphModule gm = symbolic_trace(module, seed_sequential_input(), dynamic);
  TensorDict small({{{"input", "x"}, at::randn({3, 100})}, {{"input", "mask"}, at::ones({3, 10})}},
                   {3});
  TensorDict out({}, {3});
  gm.forward(small, out);
  CHECK(out.contains({"output", "probabilities"}));
  CHECK_FALSE(small.contains({"output", "probabilities"}));
  TensorDict eager(small);
  module->forward(eager);
  CHECK(at::equal(out.get({"output", "probabilities"}), eager.get({"output", "probabilities"})));
}

TEST_CASE("trace: call_module nodes keep the module's type and an op-level body") {
  TDGraphModule gm = symbolic_trace(seed_sequential(), seed_sequential_input());
  const Node* fc1 = nullptr;
  for (const Node* n : gm.graph().nodes()) {
    if (n->name() == "_0_fc1") fc1 = n;
  }
  REQUIRE(fc1 != nullptr);
  CHECK(fc1->meta().module_type == "Linear(in_features=100, out_features=50, bias=true)");
  CHECK(fc1->meta().td_module == "0");
  REQUIRE(fc1->meta().tensor.shape);
  CHECK(*fc1->meta().tensor.shape == std::vector<int64_t>{32, 50});
  REQUIRE(fc1->body() != nullptr);
  const std::string body = to_string(*fc1->body());
  CHECK(body.find("get_attr[target=weight]") != std::string::npos);
  CHECK(body.find("torch.addmm") != std::string::npos);
}

TEST_CASE("trace: a leaf wrapped directly and declared leaves become call_module nodes") {
  auto seq = std::make_shared<TensorDictSequential>(std::vector<TensorDictModuleBasePtr>{
      make_td_module(torch::nn::Linear(3, 4), {"x"}, {"hidden"}),
      make_td_module(torch::nn::ReLU(), {"hidden"}, {"hidden"}),
      make_td_module(Net(4, 5, 2), {"hidden"}, {"out"})});
  TensorDict input({{"x", at::randn({2, 3})}}, {2});
  TraceOptions options;
  options.is_leaf_module = [](const torch::nn::Module& m, const std::string&) {
    return m.name().find("NetImpl") != std::string::npos;
  };
  TDGraphModule gm = symbolic_trace(seq, input, options);
  const std::string text = to_string(gm.graph());
  CHECK(text.find("call_module[target=0.module](args = (%getitem,)") != std::string::npos);
  CHECK(text.find("call_module[target=1.module]") != std::string::npos);
  CHECK(text.find("call_module[target=2.module]") != std::string::npos);
  CHECK(gm.out_keys() == std::vector<NestedKey>{"hidden", "out"});
  check_bit_identical(seq, gm, input);
}

TEST_CASE("trace: placeholder keys are named by the joined key") {
  TraceOptions options;
  options.key_style = KeyStyle::kPlaceholder;
  TDGraphModule gm = symbolic_trace(seed_sequential(), seed_sequential_input(), options);
  const std::string text = to_string(gm.graph());
  CHECK(text.find("%input_x : [#users=1] = placeholder[target=input_x]") != std::string::npos);
  CHECK(text.find("%input_mask : [#users=1] = placeholder[target=input_mask]") !=
        std::string::npos);
}

TEST_CASE("trace: a missing key names the key and the keys present") {
  TensorDict input({{{"input", "x"}, at::randn({32, 100})}}, {32});
  CHECK_THROWS_WITH_AS(symbolic_trace(seed_sequential(), input),
                       doctest::Contains("key ('input', 'mask') not found"), KeyError);
  CHECK_THROWS_WITH_AS(symbolic_trace(seed_sequential(), input),
                       doctest::Contains("keys: ('input', 'x')"), KeyError);
}

TEST_CASE("trace: a wrong number of outputs names the module and its out keys") {
  auto module = make_td_module([](const at::Tensor& x) { return x + 1; }, {"x"}, {"a", "b"});
  TensorDict input({{"x", at::randn({2})}});
  CHECK_THROWS_WITH_AS(symbolic_trace(module, input), doctest::Contains("['a', 'b']"), ShapeError);
}

TEST_CASE("trace: a captured tensor is a constant of the module that read it") {
  // As torch.fx lifts `_tensor_constant0`: the same tensor read twice is one constant, each
  // further tensor the next; the traced module reads the captured tensor itself, so a later
  // change to it is seen, as the module would see it.
  const at::Tensor mask = at::tensor({1.0F, 0.0F, 1.0F});
  const at::Tensor shift = at::tensor({0.5F, 0.25F, 2.0F});
  auto masked = make_td_module(
      [mask, shift](const at::Tensor& x) {
        const at::Tensor kept = x * mask;
        return kept + shift * mask;
      },
      {"x"}, {"y"});
  auto pipeline =
      std::make_shared<TensorDictSequential>(std::vector<std::shared_ptr<TensorDictModuleBase>>{
          masked, make_td_module([](const at::Tensor& y) { return y.relu(); }, {"y"}, {"z"})});
  const TensorDict input({{"x", at::randn({4, 3})}}, {4});
  // The traced module's and the pipeline's "z" for `td`.
  auto both = [&](const TDGraphModule& gm, const TensorDict& td) {
    TensorDict traced(td), eager(td);
    gm.forward(traced);
    pipeline->forward(eager);
    return std::make_pair(traced.get("z"), eager.get("z"));
  };
  for (bool dynamic : {false, true}) {
    CAPTURE(dynamic);
    TraceOptions options;
    options.dynamic_batch = dynamic;
    TDGraphModule gm = symbolic_trace(pipeline, input, options);
    CHECK(gm.code() ==
          "\n\n\ndef forward(self, tensordict):\n"
          "    getitem = tensordict['x'];  tensordict = None\n"
          "    _0__tensor_constant0 = getattr(self, \"0\").module._tensor_constant0\n"
          "    mul = getitem * _0__tensor_constant0;  getitem = None\n"
          "    _0__tensor_constant1 = getattr(self, \"0\").module._tensor_constant1\n"
          "    mul_1 = _0__tensor_constant1 * _0__tensor_constant0;  _0__tensor_constant1 = "
          "_0__tensor_constant0 = None\n"
          "    add = mul + mul_1;  mul = mul_1 = None\n"
          "    relu = torch.relu(add)\n"
          "    return (add, relu)\n    ");
    for (int64_t batch : {1, 4, 7}) {
      CAPTURE(batch);
      if (batch != 4 && !dynamic) continue;
      const TensorDict td({{"x", at::randn({batch, 3})}}, {batch});
      const auto [traced, eager] = both(gm, td);
      CHECK(traced.equal(eager));
    }
  }
  TDGraphModule gm = symbolic_trace(pipeline, input);
  // An edit and a recompile keep the constants.
  gm.mutable_graph().eliminate_dead_code();
  gm.recompile();
  {
    const auto [traced, eager] = both(gm, input);
    CHECK(traced.equal(eager));
  }
  // The traced module reads the captured tensor itself.
  mask.mul_(0);
  const auto [traced, eager] = both(gm, input);
  CHECK(traced.equal(eager));
  CHECK(traced.abs().sum().item<float>() == 0.0F);
}

TEST_CASE("trace: an input's .data() is refused, not taken for a captured constant") {
  // `.data()` shares the input's storage without an op the dispatcher sees: lifted as a
  // constant it would be the example's value in every run.
  auto module = make_td_module([](const at::Tensor& x) { return x.data() * 2; }, {"x"}, {"y"});
  const TensorDict input({{"x", at::randn({2, 3})}});
  try {
    symbolic_trace(module, input);
    FAIL("traced");
  } catch (const TraceError& e) {
    CHECK(std::string(e.what()) ==
          "TensorDictModule(module=Callable(), in_keys=['x'], out_keys=['y']): the module uses "
          "a tensor the trace does not follow (float32 [2, 3]) that shares the storage of a "
          "value it computed or read (%x): its .data(), or a tensor made from it without an op "
          "the dispatcher sees, which the graph cannot tell from a constant. Use the value "
          "itself (or its detach())");
  }
}

TEST_CASE("trace: a module that writes to a tensor it captured is refused, naming it") {
  const at::Tensor calls = at::zeros({1});
  auto module = make_td_module(
      [calls](const at::Tensor& x) {
        calls.add_(1);
        return x + calls;
      },
      {"x"}, {"y"});
  const TensorDict input({{"x", at::randn({2})}});
  try {
    symbolic_trace(module, input);
    FAIL("traced");
  } catch (const TraceError& e) {
    CHECK(std::string(e.what()) ==
          "TensorDictModule(module=Callable(), in_keys=['x'], out_keys=['y']): the module "
          "writes in place to a tensor it captured (float32 [1], lifted as the constant "
          "'_tensor_constant0'); register it as a buffer so the graph can update it as "
          "module state");
  }
  CHECK(calls.item<float>() == 0.0F);  // put back, as a buffer is
}

TEST_CASE("trace: two threads trace different pipelines at the same time") {
  std::string sequential_text, nested_text;
  std::thread a([&] {
    for (int i = 0; i < 20; ++i) {
      sequential_text =
          to_string(symbolic_trace(seed_sequential(), seed_sequential_input()).graph());
    }
  });
  std::thread b([&] {
    for (int i = 0; i < 20; ++i) {
      nested_text =
          to_string(symbolic_trace(nested_sequential(), nested_sequential_input()).graph());
    }
  });
  a.join();
  b.join();
  CHECK(sequential_text == golden("seed_sequential.graph.txt"));
  CHECK(nested_text == golden("nested_sequential.graph.txt"));
}

TEST_CASE("trace: a traced module runs on two threads while a third first looks at its program") {
  // A trace's plan is compiled on its first run and its program named, and given its modules,
  // on the first look (program_graph(), graph()), in place: two threads start running at once
  // while the program is looked at; runs are neither refused as after an edit nor changed.
  const auto pipeline = seed_sequential();
  const TensorDict input = seed_sequential_input();
  const std::string expected_program = to_string(symbolic_trace(pipeline, input).program_graph());
  const std::vector<at::Tensor> expected = symbolic_trace(pipeline, input).run(input);
  for (int round = 0; round < 10; ++round) {
    const TDGraphModule traced = symbolic_trace(pipeline, input);
    std::string errors[2];
    bool same[2] = {true, true};
    std::vector<std::thread> runners;
    for (int r = 0; r < 2; ++r) {
      runners.emplace_back([&, r] {
        try {
          for (int i = 0; i < 25; ++i) {
            const std::vector<at::Tensor> out = traced.run(input);
            for (size_t k = 0; k < out.size(); ++k) same[r] = same[r] && out[k].equal(expected[k]);
          }
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    const std::string program = to_string(traced.program_graph());
    const std::string view = to_string(traced.graph());
    for (std::thread& runner : runners) runner.join();
    CHECK(errors[0].empty());
    CHECK(errors[1].empty());
    CHECK(same[0]);
    CHECK(same[1]);
    CHECK(program == expected_program);
    CHECK(view == golden("seed_sequential.graph.txt"));
  }
}

TEST_CASE("trace: the samples print the golden graph and code and report bit-identical outputs") {
  // Each sample's whole output: the golden graph and code, then its verdict on each out key.
  struct Sample {
    std::string binary, golden, verdict;
  };
  const tdfx::testing::ScratchDir dir("tdfx_test_trace");
  const std::string svg = (dir / "trace_sequential.svg").string();
  const std::vector<Sample> samples = {{"trace_module", "seed_module",
                                        "output ('outputs', 'logits'): bit-identical\n"
                                        "output ('outputs', 'probabilities'): bit-identical\n"
                                        "all outputs bit-identical\n"},
                                       {"trace_sequential", "seed_sequential",
                                        "output ('intermediate', 'x'): bit-identical\n"
                                        "output ('output', 'probabilities'): bit-identical\n"
                                        "all outputs bit-identical\n"
                                        "wrote " +
                                            svg + "\n"},
                                       {"trace_nested", "nested_sequential",
                                        "output 'x': bit-identical\n"
                                        "output 'probabilities': bit-identical\n"
                                        "all outputs bit-identical\n"}};
  for (const Sample& sample : samples) {
    CAPTURE(sample.binary);
    const std::string path = tdfx::testing::bin_dir() + "/" + sample.binary;
    REQUIRE_MESSAGE(std::filesystem::exists(path),
                    path << " is missing: build it (ninja " << sample.binary
                         << ") or point TDFX_BIN_DIR at the folder that holds it");
    // trace_sequential draws its diagram to its argument; the others take none.
    const auto result = tdfx::testing::run_command(
        "'" + path + "'" + (sample.binary == "trace_sequential" ? " '" + svg + "'" : "") + " 2>&1");
    CHECK(result.status == 0);
    CHECK(result.out == golden(sample.golden + ".graph.txt") + "\n" +
                            golden(sample.golden + ".code.txt") + "\n" + sample.verdict);
  }
}

TEST_CASE("trace: a module returning a non-tensor names the module and the out key") {
  auto module =
      make_td_module([](const at::Tensor&) { return c10::IValue(int64_t{3}); }, {"x"}, {"y"});
  TensorDict input({{"x", at::randn({2})}});
  CHECK_THROWS_WITH_AS(symbolic_trace(module, input), doctest::Contains("out key 'y'"), Error);
}

TEST_CASE(
    "trace: a tensor literal built in forward is refused; an allocation then filled is kept") {
  auto literal = make_td_module(
      [](const at::Tensor& x) {
        return at::index_select(x, 1, at::tensor({0, 2}));
      },
      {"x"}, {"y"});
  TensorDict input({{"x", at::randn({2, 3})}});
  CHECK_THROWS_WITH_AS(
      symbolic_trace(literal, input),
      "TensorDictModule(module=Callable(), in_keys=['x'], out_keys=['y']): aten::index_select "
      "reads a tensor the trace saw only allocated (aten::empty), never written by a recorded "
      "op, so the program would read uninitialised memory; a tensor literal (at::tensor({...})) "
      "is written outside the recorded ops: make it a buffer (register_buffer) or build it with "
      "a recorded factory (at::arange, at::full)",
      TraceError);
  auto returned = make_td_module(
      [](const at::Tensor& x) {
        return at::tensor({1.0f, 2.0f}) + x;
      },
      {"x"}, {"y"});
  CHECK_THROWS_WITH_AS(symbolic_trace(returned, TensorDict({{"x", at::randn({2})}})),
                       doctest::Contains("aten::add reads a tensor the trace saw only allocated"),
                       TraceError);

  auto filled = make_td_module(
      [](const at::Tensor& x) { return x + at::empty({3}, x.options()).fill_(2.0); }, {"x"}, {"y"});
  TDGraphModule gm = symbolic_trace(filled, input);
  const at::Tensor x = at::randn({2, 3});
  TensorDict run({{"x", x}});
  gm.forward(run);
  CHECK(at::equal(run.get("y"), x + 2.0));
}

TEST_CASE("trace: an op that cannot be recorded names the module and the op") {
  // A generator passed by hand is state the graph cannot hold.
  at::Generator generator = at::detail::createCPUGenerator(3);
  auto module = make_td_module(
      [generator](const at::Tensor& x) { return x + at::randn(x.sizes(), generator, x.options()); },
      {"x"}, {"y"});
  TensorDict input({{"x", at::randn({2})}});
  CHECK_THROWS_WITH_AS(
      symbolic_trace(module, input),
      "TensorDictModule(module=Callable(), in_keys=['x'], out_keys=['y']): aten::randn: cannot "
      "record argument 'generator' of kind Generator",
      TraceError);
}

TEST_CASE("trace: the example TensorDict and the module's buffers and parameters are untouched") {
  torch::manual_seed(0);
  InPlaceNorm inner;
  inner->train();
  auto module = make_td_module(inner, {"x"}, {"y"});
  TensorDict example({{"x", at::randn({4, 3})}}, {4});
  const at::Tensor x_before = example.get("x").clone();
  const auto buffers_before = buffer_copies(*module);
  REQUIRE(buffers_before.size() == 3);  // running_mean, running_var, num_batches_tracked
  std::map<std::string, at::Tensor> parameters_before;
  for (const auto& item : module->named_parameters(true)) {
    parameters_before[item.key()] = item.value().detach().clone();
  }

  TDGraphModule gm = symbolic_trace(module, example);
  CHECK(bit_equal(example.get("x"), x_before));
  for (const auto& [name, before] : buffer_copies(*module)) {
    CAPTURE(name);
    CHECK(bit_equal(before, buffers_before.at(name)));
  }
  for (const auto& item : module->named_parameters(true)) {
    CAPTURE(item.key());
    CHECK(bit_equal(item.value().detach(), parameters_before.at(item.key())));
  }
  // The trace still records what the module does, in-place op and statistics update included.
  TensorDict eager({{"x", x_before.clone()}}, {4});
  module->forward(eager);
  TensorDict traced({{"x", x_before.clone()}}, {4});
  const auto eager_buffers = buffer_copies(*module);
  for (const auto& [name, tensor] : buffers_before) {
    module->named_buffers(true)[name].detach().copy_(tensor);
  }
  gm.forward(traced);
  CHECK(bit_equal(eager.get("y"), traced.get("y")));
  for (const auto& [name, after] : buffer_copies(*module)) {
    CAPTURE(name);
    CHECK(bit_equal(after, eager_buffers.at(name)));
  }
}

TEST_CASE("trace: a trace that fails puts the module's buffers back") {
  torch::manual_seed(0);
  InPlaceNorm inner;
  inner->train();
  auto norm = make_td_module(inner, {"x"}, {"y"});
  auto failing = make_td_module(
      [](const at::Tensor&) -> at::Tensor { throw std::runtime_error("fails on purpose"); }, {"y"},
      {"z"});
  auto sequential = make_td_sequential({norm, failing});
  TensorDict example({{"x", at::randn({4, 3})}}, {4});
  const at::Tensor x_before = example.get("x").clone();
  const auto buffers_before = buffer_copies(*sequential);
  CHECK_THROWS_WITH_AS(symbolic_trace(sequential, example), doctest::Contains("fails on purpose"),
                       TraceError);
  CHECK(bit_equal(example.get("x"), x_before));
  for (const auto& [name, before] : buffer_copies(*sequential)) {
    CAPTURE(name);
    CHECK(bit_equal(before, buffers_before.at(name)));
  }
}

/// relu(fc(x)) with fc a Linear(4, 3).
struct LinearNetImpl : torch::nn::Module {
  LinearNetImpl() : fc(register_module("fc", torch::nn::Linear(4, 3))) {}
  at::Tensor forward(const at::Tensor& x) { return at::relu(fc(x)); }
  torch::nn::Linear fc{nullptr};
};

TEST_CASE("trace: a failure inside a built-in layer names the layer's path") {
  auto module =
      make_td_sequential({make_td_module(std::make_shared<LinearNetImpl>(), {"x"}, {"y"})});
  const TensorDict input({{"x", at::randn({2, 5})}}, {2});
  try {
    symbolic_trace(module, input);
    FAIL("traced");
  } catch (const TraceError& e) {
    CHECK(std::string(e.what()) ==
          "TensorDictModule(module=LinearNetImpl, in_keys=['x'], out_keys=['y']): the wrapped "
          "module "
          "failed while tracing, in '0.module.fc' (Linear): mat1 and mat2 shapes cannot be "
          "multiplied (2x5 and 4x3)");
  }
}

namespace {

/// Counts its calls in a buffer, as a user's module does: `calls.add_(1)`, nothing reads it.
struct CallCounterImpl : torch::nn::Module {
  CallCounterImpl() { calls = register_buffer("calls", torch::zeros({}, torch::kLong)); }
  at::Tensor forward(const at::Tensor& x) {
    calls.add_(1);
    return x * 2;
  }
  at::Tensor calls;
};
TORCH_MODULE(CallCounter);

/// Calls a BatchNorm1d for its running statistics alone: the view shows its ops inline (a
/// call whose result nothing reads is not outlined), batch_norm with training=True.
struct NormedImpl : torch::nn::Module {
  NormedImpl() { norm = register_module("norm", torch::nn::BatchNorm1d(3)); }
  at::Tensor forward(const at::Tensor& x) {
    norm(x);  // its running statistics are all it is called for
    return x + 1;
  }
  torch::nn::BatchNorm1d norm{nullptr};
};
TORCH_MODULE(Normed);

}  // namespace

TEST_CASE("trace: eliminate_dead_code on the view keeps a buffer update and a training norm") {
  CallCounter counter;
  auto module = make_td_module(counter, {"x"}, {"y"});
  const TensorDict td({{"x", at::ones({4, 3})}}, {4});
  TDGraphModule gm = symbolic_trace(module, td);
  counter->calls.zero_();
  gm.mutable_graph().eliminate_dead_code();
  gm.recompile();
  for (int i = 0; i < 3; ++i) {
    TensorDict run(td);
    gm.forward(run);
  }
  CHECK(counter->calls.item<int64_t>() == 3);  // the call_method add_ stayed

  Normed normed;
  normed->train();
  auto norm_module = make_td_module(normed, {"x"}, {"y"});
  TDGraphModule norm_gm = symbolic_trace(norm_module, TensorDict({{"x", at::randn({4, 3})}}, {4}));
  CHECK(norm_gm.mutable_graph().eliminate_dead_code() == 0);
  CHECK(to_string(norm_gm.graph()).find("torch.batch_norm") != std::string::npos);
  norm_gm.recompile();
  const at::Tensor mean_before = normed->norm->running_mean.clone();
  TensorDict run({{"x", at::randn({4, 3})}}, {4});
  norm_gm.forward(run);
  CHECK_FALSE(at::equal(normed->norm->running_mean, mean_before));

  // A buffer update an edit inserts stays through eliminate_dead_code too.
  CallCounter plain;
  TDGraphModule edited = symbolic_trace(make_td_module(plain, {"x"}, {"y"}), td);
  plain->calls.zero_();
  Graph& graph = edited.mutable_graph();
  {
    auto guard = graph.inserting_before(graph.output_node());
    graph.call_method(Target::method(Target::aten("aten::mul_.Scalar")),
                      {graph.get_attr("calls"), 2});
  }
  graph.eliminate_dead_code();
  edited.recompile();
  TensorDict once(td);
  edited.forward(once);
  CHECK(plain->calls.item<int64_t>() == 2);  // its own add_, then the edit's mul_
}

namespace {

/// Prints itself with its child's description inside, as a user's pretty_print may.
struct DescribesChildImpl : torch::nn::Module {
  DescribesChildImpl() { fc = register_module("fc", torch::nn::Linear(3, 4)); }
  void pretty_print(std::ostream& stream) const override {
    stream << "Outer[" << tdfx::detail::describe_module(*fc) << "]";
  }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(DescribesChild);

}  // namespace

TEST_CASE("trace: describe_module of a module whose pretty_print describes another") {
  DescribesChild outer;
  CHECK(tdfx::detail::describe_module(*outer) ==
        "Outer[Linear(in_features=3, out_features=4, bias=true)]");
  CHECK(tdfx::detail::describe_module(*outer->fc) ==
        "Linear(in_features=3, out_features=4, bias=true)");
}

TEST_CASE("trace: C++'s `1 - done` prints as the rsub it means, and runs bit-identically") {
  // LibTorch's operator-(Scalar, Tensor) is empty_like + fill_ + sub_; the view shows the one
  // op torch.fx would record, and keeps it through an edit and recompile().
  auto module = make_td_module(
      [](const at::Tensor& r, const at::Tensor& done) { return r * (1 - done) + (0.5 - r); },
      {"r", "done"}, {"y"});
  at::manual_seed(0);
  const TensorDict input({{"r", at::randn({6})}, {"done", (at::rand({6}) > 0.5).to(at::kFloat)}},
                         {6});
  TDGraphModule gm = symbolic_trace(module, input);
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['r']\n"
        "    getitem_1 = tensordict['done'];  tensordict = None\n"
        "    rsub = torch.rsub(getitem, other = 0.5)\n"
        "    rsub_1 = torch.rsub(getitem_1, other = 1);  getitem_1 = None\n"
        "    mul = getitem * rsub_1;  getitem = rsub_1 = None\n"
        "    add = mul + rsub;  mul = rsub = None\n"
        "    return (add,)\n"
        "    ");
  const at::Tensor eager = module->call({input.get("r"), input.get("done")}, {})[0];
  CHECK(gm.run(input)[0].equal(eager));
  gm.mutable_graph().eliminate_dead_code();
  gm.recompile();
  CHECK(gm.run(input)[0].equal(eager));
  // An integer tensor with an integral c folds too; a float c on integers does not (rsub
  // would promote where fill_ truncates).
  auto ints = make_td_module([](const at::Tensor& n) { return (3 - n) * (2.5 - n); }, {"n"}, {"y"});
  const TensorDict counts({{"n", at::arange(4)}}, {4});
  const TDGraphModule gi = symbolic_trace(ints, counts);
  CHECK(gi.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['n'];  tensordict = None\n"
        "    empty_like = torch.empty_like(getitem, memory_format = torch.preserve_format)\n"
        "    fill_ = empty_like.fill_(2.5);  empty_like = None\n"
        "    sub_ = fill_.sub_(getitem);  fill_ = None\n"
        "    rsub = torch.rsub(getitem, other = 3);  getitem = None\n"
        "    mul = rsub * sub_;  rsub = sub_ = None\n"
        "    return (mul,)\n"
        "    ");
  CHECK(gi.run(counts)[0].equal(ints->call({counts.get("n")}, {})[0]));
}
