// Batch sizes: a trace that holds its example's batch as a constant checks
// every run's batch; one that does not runs at any batch, bit-equal to eager.
#include <doctest/doctest.h>

#include "samples/pipelines.h"
#include "tdfx/codegen/python_code.h"
#include "tdfx/core/error.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
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

}  // namespace

TEST_CASE("batch: a reshape by the batch size becomes a size node and runs at any batch") {
  auto pipeline = flattening_pipeline();
  TDGraphModule gm = symbolic_trace(pipeline, batch_of(8));
  CHECK_FALSE(gm.batch_specialisation());
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
        "        size = relu.size(0)\n"
        "        reshape: \"f32[s0, 14]\" = torch.reshape(relu, shape = [size, -1]);  size = None\n"
        "        return (relu, reshape)\n"
        "        ");
  for (const int64_t batch : {1, 3, 8, 17}) {
    CAPTURE(batch);
    const auto eager = pipeline->call({batch_of(batch).get("obs")}, {});
    const auto traced = gm.run(batch_of(batch));
    REQUIRE(traced.size() == 2);
    CHECK(traced[0].equal(eager[0]));
    CHECK(traced[1].equal(eager[1]));
  }
}

TEST_CASE("batch: a size of a tensor the op does not take stays specialised, naming the node") {
  auto pipeline = make_td_sequential({make_td_module(
      [](const at::Tensor& h) {
        return h.sum({1, 2}).unsqueeze(1) + at::ones({h.size(0), 1});
      },
      {"obs"}, {"total"})});
  TDGraphModule gm = symbolic_trace(pipeline, batch_of(8));
  REQUIRE(gm.batch_specialisation());
  CHECK(gm.batch_specialisation()->node == "ones");
  CHECK(gm.run(batch_of(8))[0].equal(pipeline->call({batch_of(8).get("obs")}, {})[0]));
  CHECK_THROWS_WITH_AS(
      gm.run(batch_of(7)),
      "traced at batch 8; this input has batch 7, and %ones (module 0) was specialised to it",
      ShapeError);
}

TEST_CASE("batch: a batch-generic pipeline runs at batches 1, 3 and 17 bit-equal to eager") {
  auto pipeline = samples::seed_sequential();
  TDGraphModule gm = symbolic_trace(pipeline, samples::seed_sequential_input());
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

TEST_CASE(
    "batch: an exported program prints its dynamic batch and keeps it through save and load") {
  auto pipeline = flattening_pipeline();
  const at::Tensor obs = batch_of(8).get("obs");
  ExportedProgram program = export_program(pipeline, {{"obs", obs}});
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
          "        size = torch.ops.aten.size.int(relu, 0)\n"
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
  // Seed 000's model at batch 1: torch.export specialises a size of 1, and so does the print.
  const ExportedProgram seed =
      export_program(samples::seed_000_model(), {{"x", at::randn({1, 3})}});
  CHECK_FALSE(seed.batch_specialisation());
  CHECK(seed.print_readable().find("x: \"f32[1, 3]\"") != std::string::npos);
}

TEST_CASE("batch: an exported program keeps its batch check through save and load") {
  auto pipeline = make_td_sequential({make_td_module(
      [](const at::Tensor& h) {
        return h.sum({1, 2}).unsqueeze(1) + at::ones({h.size(0), 1});
      },
      {"obs"}, {"total"})});
  const at::Tensor obs = batch_of(8).get("obs");
  ExportedProgram program = export_program(pipeline, {{"obs", obs}});
  REQUIRE(program.batch_specialisation());
  CHECK(program.batch_specialisation()->node == "ones");
  const ExportedProgram loaded = load_bytes(archive_bytes(program), "ones.pt2");
  for (const ExportedProgram* p :
       std::initializer_list<const ExportedProgram*>{&program, &loaded}) {
    CHECK(p->module()({{"obs", obs}})[0].equal(pipeline->call({obs}, {})[0]));
    // The program's module paths start at the exported module: `module.0`.
    CHECK_THROWS_WITH_AS(p->module()({{"obs", batch_of(3).get("obs")}}),
                         "traced at batch 8; this input has batch 3, and %ones (module "
                         "module.0) was specialised to it",
                         ShapeError);
  }
}

TEST_CASE("batch: a loop over the batch is specialised too") {
  auto pipeline = make_td_sequential({make_td_module(
      [](const at::Tensor& x) {
        at::Tensor total = at::zeros_like(x[0]);
        for (int64_t i = 0; i < x.size(0); ++i) total = total + x[i];
        return x - total;
      },
      {"obs"}, {"sum"})});
  TDGraphModule gm = symbolic_trace(pipeline, batch_of(4));
  REQUIRE(gm.batch_specialisation());
  // The first op where the two recordings part: the wider one runs the loop once more where
  // this one goes on to the sub.
  CHECK_THROWS_WITH_AS(
      gm.run(batch_of(5)),
      "traced at batch 4; this input has batch 5, and %sub (module 0) was specialised to it",
      ShapeError);
}

TEST_CASE("batch: a size of another dimension read as an integer is refused when it differs") {
  // `x.size(1) - 1` is the constant 7 in the graph: a sequence of 17 steps must not run on it.
  auto pipeline = make_td_sequential({make_td_module(
      [](const at::Tensor& x) { return x - x.select(1, x.size(1) - 1).unsqueeze(1); }, {"x"},
      {"y"})});
  at::manual_seed(0);
  TDGraphModule gm = symbolic_trace(pipeline, TensorDict({{"x", at::randn({2, 8, 4})}}, {2}));
  const ExportedProgram program = export_program(pipeline, {{"x", at::randn({2, 8, 4})}});
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
}

TEST_CASE("batch: an example without rows gives a graph for batch 0 only, and says why") {
  auto pipeline = make_td_sequential(
      {make_td_module([](const at::Tensor& x) { return at::relu(x); }, {"obs"}, {"hidden"})});
  TDGraphModule gm = symbolic_trace(pipeline, TensorDict({{"obs", at::randn({0, 3})}}, {0}));
  REQUIRE(gm.batch_specialisation());
  CHECK_THROWS_WITH_AS(gm.run(TensorDict({{"obs", at::randn({2, 3})}}, {2})),
                       "traced at batch 0; this input has batch 2, and an example without rows "
                       "cannot show what depends on the batch: trace with at least one row",
                       ShapeError);
}
