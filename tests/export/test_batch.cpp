// The batch contract: a static trace (the default) runs at its example's batch only and
// refuses any other; a dynamic trace (TraceOptions::dynamic_batch) is recorded at several
// batches and runs at any batch bit-equal to eager, or is refused where its recordings part.
// Never a silently different answer.
#include <doctest/doctest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "samples/attention.h"
#include "samples/pipelines.h"
#include "tdfx/codegen/python_code.h"
#include "tdfx/core/error.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/export/torchscript.h"
#include "tdfx/tracer/symbolic_trace.h"

using namespace tdfx;

namespace {

// A pipeline as C++ users write it: the batch read as a plain integer.
std::shared_ptr<TensorDictSequential> flattening_pipeline() {
  return make_td_sequential({
      make_td_module([](const at::Tensor& x) { return at::relu(x); }, {"obs"}, {"hidden"}),
      make_td_module(
          [](const at::Tensor& h) {
            return h.reshape({h.size(0), -1});
          },
          {"hidden"}, {"flat"}),
  });
}

TensorDict batch_of(int64_t batch) {
  at::manual_seed(batch);
  return TensorDict({{"obs", at::randn({batch, 2, 7})}}, {batch});
}

TraceOptions dynamic(std::vector<int64_t> probes = {}) {
  TraceOptions options;
  options.dynamic_batch = true;
  options.batch_probes = std::move(probes);
  return options;
}

const char* const kStaticRefusal =
    "traced at batch 8 with a static batch; this input has batch {}: trace with "
    "TraceOptions::dynamic_batch (export_program: ExportOptions::dynamic_batch) for a graph "
    "that runs at other batch sizes";

std::string static_refusal(int64_t batch) { return fmt::format(kStaticRefusal, batch); }

// The two probes of the issue: branches on the batch size that no single recording shows.
at::Tensor over_16(const at::Tensor& x) {
  if (x.size(0) > 16) return at::relu(x);
  return x * 2;
}
at::Tensor squeeze_single(const at::Tensor& x) {
  if (x.size(0) == 1) return x.squeeze(0).unsqueeze(0) * 3;
  return x + 1;
}

}  // namespace

TEST_CASE("batch: a static trace records once and refuses every other batch") {
  auto pipeline = flattening_pipeline();
  TDGraphModule gm = symbolic_trace(pipeline, batch_of(8));
  REQUIRE(gm.batch_specialisation());
  CHECK(gm.batch_specialisation()->traced_batch == 8);
  CHECK(gm.recorded_batches() == std::vector<int64_t>{8});
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['obs'];  tensordict = None\n"
        "    relu = torch.relu(getitem);  getitem = None\n"
        "    reshape = torch.reshape(relu, shape = [8, -1])\n"
        "    return (relu, reshape)\n"
        "    ");
  const auto eager = pipeline->call({batch_of(8).get("obs")}, {});
  const auto traced = gm.run(batch_of(8));
  CHECK(traced[1].equal(eager[1]));
  for (const int64_t batch : {1, 7, 9, 32}) {
    CAPTURE(batch);
    CHECK_THROWS_WITH_AS(gm.run(batch_of(batch)), static_refusal(batch).c_str(), ShapeError);
  }
}

TEST_CASE("batch: a dynamic trace turns a reshape by the batch size into a size node") {
  auto pipeline = flattening_pipeline();
  TDGraphModule gm = symbolic_trace(pipeline, batch_of(8), dynamic());
  CHECK_FALSE(gm.batch_specialisation());
  CHECK(gm.recorded_batches() == std::vector<int64_t>{8, 9, 1, 35});
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['obs'];  tensordict = None\n"
        "    relu = torch.relu(getitem);  getitem = None\n"
        "    size = relu.size(0)\n"
        "    reshape = torch.reshape(relu, shape = [size, -1]);  size = None\n"
        "    return (relu, reshape)\n"
        "    ");
  // The dimensions that follow the batch print as torch.export prints a dynamic one.
  CHECK(print_readable(gm.graph()) ==
        "class GraphModule(torch.nn.Module):\n"
        "    def forward(self, tensordict):\n"
        "        getitem: \"f32[s0, 2, 7]\" = tensordict['obs'];  tensordict = None\n"
        "\n"
        "        # Module: 0.module (Callable())\n"
        "        relu: \"f32[s0, 2, 7]\" = torch.relu(getitem);  getitem = None\n"
        "\n"
        "        # Module: 1.module (Callable())\n"
        "        size: \"Sym(s0)\" = relu.size(0)\n"
        "        reshape: \"f32[s0, 14]\" = torch.reshape(relu, shape = [size, -1]);  size = None\n"
        "        return (relu, reshape)\n"
        "        ");
  for (const int64_t batch : {1, 3, 8, 17, 100}) {
    CAPTURE(batch);
    const auto eager = pipeline->call({batch_of(batch).get("obs")}, {});
    const auto traced = gm.run(batch_of(batch));
    REQUIRE(traced.size() == 2);
    CHECK(traced[0].equal(eager[0]));
    CHECK(traced[1].equal(eager[1]));
  }
}

namespace {

// `branch` traced at batch 8: bit-equal there; a static trace refuses `other`, and a dynamic
// trace is refused at the probe `parts_at`, naming the node `%node`; export is refused too.
void check_branch_on_batch(at::Tensor (*branch)(const at::Tensor&), int64_t other, int64_t parts_at,
                           const std::string& node) {
  auto module = make_td_module(branch, {"obs"}, {"y"});
  TDGraphModule gm = symbolic_trace(module, batch_of(8));
  CHECK(gm.run(batch_of(8))[0].equal(branch(batch_of(8).get("obs"))));
  CHECK_THROWS_WITH_AS(gm.run(batch_of(other)), static_refusal(other).c_str(), ShapeError);
  const std::string refusal = fmt::format(
      "TensorDictModule(module=Callable(), in_keys=['obs'], out_keys=['y']): no dynamic batch: "
      "the recordings at batch 8 and at batch {} differ at %{} (another op), so the pipeline "
      "branches or loops on the batch size there; trace with a static batch (the default), or "
      "compute it with tensor ops",
      parts_at, node);
  CHECK_THROWS_WITH_AS(symbolic_trace(module, batch_of(8), dynamic()), refusal.c_str(), TraceError);
  CHECK_THROWS_WITH_AS(export_program(module, {{"obs", batch_of(8).get("obs")}}, {true, {}}),
                       refusal.c_str(), TraceError);
}

}  // namespace

TEST_CASE("batch: a branch on x.size(0) > 16 is refused at other batches, or at the trace") {
  // The probe at 4 * 8 + 3 = 35 takes the other branch.
  check_branch_on_batch(&over_16, 32, 35, "mul");
}

TEST_CASE("batch: a branch on x.size(0) == 1 is refused at other batches, or at the trace") {
  check_branch_on_batch(&squeeze_single, 1, 1, "add");
}

TEST_CASE("batch: the module runs once per recording") {
  int calls = 0;
  auto module = make_td_module(
      [&calls](const at::Tensor& x) {
        ++calls;
        return x * 2;
      },
      {"obs"}, {"y"});
  symbolic_trace(module, batch_of(8));
  CHECK(calls == 1);
  calls = 0;
  const TDGraphModule gm = symbolic_trace(module, batch_of(8), dynamic());
  CHECK(calls == 4);
  CHECK(static_cast<int>(gm.recorded_batches().size()) == calls);
  calls = 0;
  symbolic_trace(module, batch_of(8), dynamic({5}));
  CHECK(calls == 2);
  // Export from a trace records nothing more.
  calls = 0;
  const ExportedProgram program = export_program(gm);
  CHECK(calls == 0);
  CHECK(program.module()({{"obs", batch_of(3).get("obs")}})[0].equal(batch_of(3).get("obs") * 2));
}

TEST_CASE("batch: every recording starts from the module's state and the trace leaves it so") {
  // BatchNorm in training updates its running statistics, Dropout draws from the default
  // generator: neither may differ between recordings, nor after the trace.
  torch::nn::Sequential net(torch::nn::Linear(7, 4), torch::nn::BatchNorm1d(4),
                            torch::nn::Dropout(0.5));
  net->train();
  auto module = make_td_module(net, {"x"}, {"y"});
  const TensorDict example({{"x", at::randn({8, 7})}}, {8});
  const auto mean_before = net->named_buffers()["1.running_mean"].clone();
  at::manual_seed(7);
  const at::Tensor expected_draw = at::rand({3});
  at::manual_seed(7);
  const TDGraphModule gm = symbolic_trace(module, example, dynamic({9, 20}));
  CHECK(at::rand({3}).equal(expected_draw));
  CHECK(net->named_buffers()["1.running_mean"].equal(mean_before));
  CHECK(gm.recorded_batches() == std::vector<int64_t>{8, 9, 20});
  // The default probe at batch 1 is where BatchNorm in training refuses to run.
  CHECK_THROWS_WITH_AS(symbolic_trace(module, example, dynamic()),
                       doctest::Contains("a dynamic batch is checked by recording the pipeline "
                                         "at batches 9, 1, 35 besides the example's 8, and it "
                                         "fails at batch 1: "),
                       TraceError);
}

TEST_CASE("batch: probes and examples a dynamic trace cannot use are refused") {
  auto pipeline = flattening_pipeline();
  CHECK_THROWS_WITH_AS(symbolic_trace(pipeline, batch_of(8), dynamic({9, 8})),
                       "TraceOptions::batch_probes: 8 is not a batch to probe: each must be "
                       "positive, differ from the example's batch (8) and appear once",
                       TraceError);
  CHECK_THROWS_AS(symbolic_trace(pipeline, batch_of(8), dynamic({0})), TraceError);
  CHECK_THROWS_AS(symbolic_trace(pipeline, batch_of(8), dynamic({3, 3})), TraceError);
  CHECK_THROWS_WITH_AS(
      symbolic_trace(pipeline, TensorDict({{"obs", at::randn({0, 2, 7})}}, {0}), dynamic()),
      doctest::Contains("a dynamic batch was asked for, but the example has batch 0 (no row to "
                        "repeat)"),
      TraceError);
  // Keys of different leading sizes and no batch size: the example has no batch.
  auto two =
      make_td_module([](const at::Tensor& a, const at::Tensor& b) { return a.sum() + b.sum(); },
                     {"a", "b"}, {"y"});
  CHECK_THROWS_WITH_AS(
      symbolic_trace(two, TensorDict({{"a", at::randn({2})}, {"b", at::randn({3})}}), dynamic()),
      doctest::Contains("a dynamic batch was asked for, but the example has no batch size"),
      TraceError);
}

TEST_CASE("batch: a static example of batch 0 runs at batch 0 only") {
  auto pipeline = make_td_sequential(
      {make_td_module([](const at::Tensor& x) { return at::relu(x); }, {"obs"}, {"hidden"})});
  TDGraphModule gm = symbolic_trace(pipeline, TensorDict({{"obs", at::randn({0, 3})}}, {0}));
  REQUIRE(gm.batch_specialisation());
  CHECK_THROWS_WITH_AS(gm.run(TensorDict({{"obs", at::randn({2, 3})}}, {2})),
                       "traced at batch 0 with a static batch; this input has batch 2: trace "
                       "with TraceOptions::dynamic_batch (export_program: "
                       "ExportOptions::dynamic_batch) for a graph that runs at other batch sizes",
                       ShapeError);
}

TEST_CASE("batch: a dynamic pipeline runs at batches 1, 3 and 17 bit-equal to eager") {
  auto pipeline = samples::seed_sequential();
  TDGraphModule gm = symbolic_trace(pipeline, samples::seed_sequential_input(), dynamic());
  CHECK_FALSE(gm.batch_specialisation());
  for (const int64_t batch : {1, 3, 17}) {
    TensorDict td(
        {{{"input", "x"}, at::randn({batch, 100})}, {{"input", "mask"}, at::ones({batch, 10})}},
        {batch});
    TensorDict eager = td.clone();
    pipeline->forward(eager);
    TensorDict traced = td.clone();
    gm.forward(traced);
    CHECK(traced.get({"output", "probabilities"}).equal(eager.get({"output", "probabilities"})));
  }
}

TEST_CASE("batch: an exported program is static unless asked, and keeps its contract on disk") {
  auto pipeline = flattening_pipeline();
  const at::Tensor obs = batch_of(8).get("obs");
  const ExportedProgram fixed = export_program(pipeline, {{"obs", obs}});
  REQUIRE(fixed.batch_specialisation());
  CHECK(fixed.print_readable().find("obs: \"f32[8, 2, 7]\"") != std::string::npos);
  const ExportedProgram fixed_loaded = load_bytes(archive_bytes(fixed), "fixed.pt2");
  for (const ExportedProgram* p :
       std::initializer_list<const ExportedProgram*>{&fixed, &fixed_loaded}) {
    CHECK(p->module()({{"obs", obs}})[1].equal(obs.relu().reshape({8, -1})));
    CHECK_THROWS_WITH_AS(p->module()({{"obs", batch_of(3).get("obs")}}), static_refusal(3).c_str(),
                         ShapeError);
  }

  ExportedProgram program = export_program(pipeline, {{"obs", obs}}, {true, {}});
  CHECK_FALSE(program.batch_specialisation());
  const ExportedProgram loaded = load_bytes(archive_bytes(program), "flat.pt2");
  for (const ExportedProgram* p :
       std::initializer_list<const ExportedProgram*>{&program, &loaded}) {
    CHECK(p->print_readable() ==
          "class GraphModule(torch.nn.Module):\n"
          "    def forward(self, obs: \"f32[s0, 2, 7]\"):\n"
          "        # Module: module.0.module (Callable())\n"
          "        relu: \"f32[s0, 2, 7]\" = torch.ops.aten.relu.default(obs);  obs = None\n"
          "\n"
          "        # Module: module.1.module (Callable())\n"
          "        size: \"Sym(s0)\" = torch.ops.aten.size.int(relu, 0)\n"
          "        reshape: \"f32[s0, 14]\" = torch.ops.aten.reshape.default(relu, [size, -1]);  "
          "size = None\n"
          "        return (relu, reshape)\n"
          "        ");
    CHECK(p->graph_signature().str() ==
          "input user_input obs -> obs (dim 0 is s0)\n"
          "output relu -> 'hidden'\n"
          "output reshape -> 'flat'\n");
    const at::Tensor three = batch_of(3).get("obs");
    CHECK(p->module()({{"obs", three}})[1].equal(three.relu().reshape({3, -1})));
  }
  // Exporting the trace gives the same program as exporting the pipeline.
  const ExportedProgram from_trace =
      export_program(symbolic_trace(pipeline, batch_of(8), dynamic()));
  CHECK(from_trace.print_readable() == program.print_readable());
  CHECK(from_trace.graph_signature().str() == program.graph_signature().str());
  // Seed 000's model at batch 1: torch.export specialises a size of 1, and so does the print.
  const ExportedProgram seed =
      export_program(samples::seed_000_model(), {{"x", at::randn({1, 3})}}, {true, {}});
  CHECK_FALSE(seed.batch_specialisation());
  CHECK(seed.print_readable().find("x: \"f32[1, 3]\"") != std::string::npos);
}

TEST_CASE("batch: a size of a tensor the op does not take is taken from one before it") {
  // `at::ones({B, 1})` takes no tensor: its size node reads the nearest tensor before it that
  // has the batch.
  auto pipeline = make_td_sequential({make_td_module(
      [](const at::Tensor& h) {
        return h.sum({1, 2}).unsqueeze(1) + at::ones({h.size(0), 1});
      },
      {"obs"}, {"total"})});
  const TDGraphModule gm = symbolic_trace(pipeline, batch_of(8), dynamic());
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['obs'];  tensordict = None\n"
        "    size = getitem.size(0)\n"
        "    ones = torch.ones(size = [size, 1]);  size = None\n"
        "    sum_1 = torch.sum(getitem, dim = [1, 2]);  getitem = None\n"
        "    unsqueeze = torch.unsqueeze(sum_1, dim = 1);  sum_1 = None\n"
        "    add = unsqueeze + ones;  unsqueeze = ones = None\n"
        "    return (add,)\n"
        "    ");
  for (const int64_t batch : {1, 8, 33}) {
    CAPTURE(batch);
    CHECK(gm.run(batch_of(batch))[0].equal(pipeline->call({batch_of(batch).get("obs")}, {})[0]));
  }
}

TEST_CASE("batch: a loop over the batch cannot be dynamic") {
  auto pipeline = make_td_sequential({make_td_module(
      [](const at::Tensor& x) {
        at::Tensor total = at::zeros_like(x[0]);
        for (int64_t i = 0; i < x.size(0); ++i) total = total + x[i];
        return x - total;
      },
      {"obs"}, {"sum"})});
  // The first op where the recordings part: the one at batch 1 leaves the loop after its
  // first step, where this one goes on to the next.
  CHECK_THROWS_WITH_AS(symbolic_trace(pipeline, batch_of(4), dynamic()),
                       doctest::Contains("no dynamic batch: the recordings at batch 4 and at "
                                         "batch 1 differ at %select_2 (module 0) (another op)"),
                       TraceError);
}

TEST_CASE("batch: a size of another dimension read as an integer is refused when it differs") {
  // `x.size(1) - 1` is the constant 7 in the graph: a sequence of 17 steps must not run on it.
  auto pipeline = make_td_sequential({make_td_module(
      [](const at::Tensor& x) { return x - x.select(1, x.size(1) - 1).unsqueeze(1); }, {"x"},
      {"y"})});
  at::manual_seed(0);
  TDGraphModule gm =
      symbolic_trace(pipeline, TensorDict({{"x", at::randn({2, 8, 4})}}, {2}), dynamic());
  const ExportedProgram program =
      export_program(pipeline, {{"x", at::randn({2, 8, 4})}}, {true, {}});
  const at::Tensor five = at::randn({5, 8, 4});
  CHECK(gm.run(TensorDict({{"x", five}}, {5}))[0].equal(pipeline->call({five}, {})[0]));
  CHECK(program.module()({{"x", five}})[0].equal(pipeline->call({five}, {})[0]));
  const std::string refusal =
      "has shape [2, 17, 4]; the graph was traced for [s0, 8, 4], and only its batch dimensions "
      "(s0) may differ: sizes read as integers while tracing are constants of the graph";
  const at::Tensor longer = at::randn({2, 17, 4});
  CHECK_THROWS_WITH_AS(gm.run(TensorDict({{"x", longer}}, {2})), ("input 'x' " + refusal).c_str(),
                       ShapeError);
  CHECK_THROWS_WITH_AS(program.module()({{"x", longer}}), ("input x " + refusal).c_str(),
                       ShapeError);
  // A static trace of an example without a batch checks every dimension.
  auto plain = make_td_module([](const at::Tensor& x) { return x * 2; }, {"x"}, {"y"});
  const TDGraphModule fixed =
      symbolic_trace(plain, TensorDict({{"x", at::randn({3})}, {"z", at::randn({2, 2})}}));
  CHECK_FALSE(fixed.batch_specialisation());
  CHECK_THROWS_WITH_AS(fixed.run(TensorDict({{"x", at::randn({4})}})),
                       "input 'x' has shape [4]; the graph was traced with static shapes [3]: "
                       "trace with TraceOptions::dynamic_batch (export_program: "
                       "ExportOptions::dynamic_batch) for a batch size that varies",
                       ShapeError);
}

TEST_CASE("batch: the inputs of a dynamic graph share one batch size") {
  auto module = make_td_module(
      [](const at::Tensor& a, const at::Tensor& b) {
        return a.reshape({b.size(0), -1});
      },
      {"a", "b"}, {"y"});
  const TensorDict example({{"a", at::randn({8, 6})}, {"b", at::randn({8, 6})}});
  const TDGraphModule gm = symbolic_trace(module, example, dynamic());
  const ExportedProgram program = export_program(gm);
  const at::Tensor a = at::randn({4, 6});
  const at::Tensor b = at::randn({4, 6});
  CHECK(gm.run(TensorDict({{"a", a}, {"b", b}}))[0].equal(module->call({a, b}, {})[0]));
  CHECK_THROWS_WITH_AS(gm.run(TensorDict({{"a", a}, {"b", at::randn({2, 6})}})),
                       "input 'b' has batch size (s0) 2 in dimension 0, and input 'a' has 4: the "
                       "inputs share one batch size",
                       ShapeError);
  CHECK_THROWS_WITH_AS(program.module()({{"a", a}, {"b", at::randn({2, 6})}}),
                       "input b has batch size (s0) 2 in dimension 0, and input a has 4: the "
                       "inputs share one batch size",
                       ShapeError);
}

TEST_CASE("batch: a dynamic program multiplies by the batch size it computes") {
  // `x * x.size(0)`: the number is a value of the graph, which stays on the Scalar overload.
  auto module = make_td_module([](const at::Tensor& x) { return x * x.size(0); }, {"x"}, {"y"});
  const ExportedProgram program = export_program(module, {{"x", at::randn({8, 6})}}, {true, {}});
  const ExportedProgram loaded = load_bytes(archive_bytes(program), "scaled.pt2");
  for (const int64_t batch : {1, 8, 17}) {
    CAPTURE(batch);
    const at::Tensor x = at::randn({batch, 6});
    CHECK(program.module()({{"x", x}})[0].equal(x * batch));
    CHECK(loaded.module()({{"x", x}})[0].equal(x * batch));
  }
}

TEST_CASE("batch: an edited trace exports its edit after recompile(), and is refused before") {
  auto pipeline = flattening_pipeline();
  TDGraphModule gm = symbolic_trace(pipeline, batch_of(8));
  Node* relu = nullptr;
  for (Node* node : gm.mutable_graph().nodes()) {
    if (node->name() == "relu") relu = node;
  }
  REQUIRE(relu != nullptr);
  relu->set_target(Target::aten("aten::sigmoid"));
  CHECK_THROWS_AS(export_program(gm), GraphError);
  gm.recompile();
  const ExportedProgram program = export_program(gm);
  const at::Tensor obs = batch_of(8).get("obs");
  const auto outputs = program.module()({{"obs", obs}});
  CHECK(outputs[0].equal(obs.sigmoid()));
  CHECK(outputs[1].equal(obs.sigmoid().reshape({8, -1})));
  CHECK(program.graph_signature().str() ==
        "input user_input obs -> obs\n"
        "output relu -> 'hidden'\n"  // set_target keeps the node's name
        "output reshape -> 'flat'\n");
}

TEST_CASE("batch: attention, transformer layers and reshape(B*T) export with a dynamic batch") {
  // The program, the archive loaded back and the TorchScript module run at batches the trace
  // never saw, bit-equal to eager.
  for (auto& [name, module] : samples::batch_sized_pipelines()) {
    CAPTURE(name);
    at::manual_seed(0);
    const ExportedProgram program =
        export_program(module, {{"obs", samples::batch_sized_input(4).get("obs")}}, {true, {}});
    CHECK_FALSE(program.batch_specialisation());
    const ExportedProgram loaded = load_bytes(archive_bytes(program), name + ".pt2");
    torch::jit::Module scripted = to_torchscript(program);
    for (const int64_t batch : {1, 7, 33}) {
      CAPTURE(batch);
      const at::Tensor obs = samples::batch_sized_input(batch).get("obs");
      const at::Tensor eager = module->call({obs}, {})[0];
      CHECK(program.module()({{"obs", obs}})[0].equal(eager));
      CHECK(loaded.module()({{"obs", obs}})[0].equal(eager));
      const c10::IValue result = scripted.forward({obs});
      REQUIRE(result.isTuple());
      CHECK(result.toTupleRef().elements().at(0).toTensor().equal(eager));
    }
  }
}

TEST_CASE("batch: an exported size expression prints as 5*s0 and survives the archive") {
  auto module = make_td_module(samples::TimeDistributed(samples::kEmbed), {"obs"}, {"y"});
  const ExportedProgram program =
      export_program(module, {{"obs", samples::batch_sized_input(4).get("obs")}}, {true, {}});
  const ExportedProgram loaded = load_bytes(archive_bytes(program), "time_distributed.pt2");
  CHECK(
      program.print_readable() ==
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, p_module_linear_weight: \"f32[8, 8]\", p_module_linear_bias: "
      "\"f32[8]\", obs: \"f32[s0, 5, 8]\"):\n"
      "        # Module: module (tdfx::samples::TimeDistributedImpl)\n"
      "        size: \"Sym(s0)\" = torch.ops.aten.size.int(obs, 0)\n"
      "        mul: \"Sym(5*s0)\" = size * 5;  size = None\n"
      "        reshape: \"f32[5*s0, 8]\" = torch.ops.aten.reshape.default(obs, [mul, -1]);  mul = "
      "None\n"
      "\n"
      "        # Module: module.linear (Linear(in_features=8, out_features=8, bias=true))\n"
      "        linear: \"f32[5*s0, 8]\" = torch.ops.aten.linear.default(reshape, "
      "p_module_linear_weight, p_module_linear_bias);  reshape = p_module_linear_weight = "
      "p_module_linear_bias = None\n"
      "\n"
      "        # Module: module (tdfx::samples::TimeDistributedImpl)\n"
      "        relu: \"f32[5*s0, 8]\" = torch.ops.aten.relu.default(linear);  linear = None\n"
      "        size_1: \"Sym(s0)\" = torch.ops.aten.size.int(obs, 0);  obs = None\n"
      "        reshape_1: \"f32[s0, 5, 8]\" = torch.ops.aten.reshape.default(relu, [size_1, 5, "
      "-1]);  relu = size_1 = None\n"
      "        return (reshape_1,)\n"
      "        ");
  CHECK(loaded.print_readable() == program.print_readable());
  CHECK(loaded.code() == program.code());
}
