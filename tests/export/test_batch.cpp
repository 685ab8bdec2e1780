// Batch sizes: a trace that holds its example's batch as a constant checks
// every run's batch; one that does not runs at any batch, bit-equal to eager.
#include <doctest/doctest.h>

#include "core/error.h"
#include "export/archive.h"
#include "export/program.h"
#include "samples/pipelines.h"
#include "tracer/symbolic_trace.h"

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

TEST_CASE("batch: a graph that bakes in the batch refuses other batches, naming the node") {
  auto pipeline = flattening_pipeline();
  TDGraphModule gm = symbolic_trace(pipeline, batch_of(8));
  REQUIRE(gm.batch_specialisation());
  const auto eager = pipeline->call({batch_of(8).get("obs")}, {});
  const auto traced = gm.run(batch_of(8));
  REQUIRE(traced.size() == 2);
  CHECK(traced[0].equal(eager[0]));
  CHECK(traced[1].equal(eager[1]));
  CHECK_THROWS_WITH_AS(
      gm.run(batch_of(7)),
      "traced at batch 8; this input has batch 7, and %reshape (module 1) was specialised to it",
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

TEST_CASE("batch: an exported program keeps its batch check through save and load") {
  auto pipeline = flattening_pipeline();
  const at::Tensor obs = batch_of(8).get("obs");
  ExportedProgram program = export_program(pipeline, {{"obs", obs}});
  REQUIRE(program.batch_specialisation());
  CHECK(program.batch_specialisation()->node == "reshape");
  const ExportedProgram loaded = load_bytes(archive_bytes(program), "flat.pt2");
  for (const ExportedProgram* p :
       std::initializer_list<const ExportedProgram*>{&program, &loaded}) {
    CHECK(p->module()({{"obs", obs}})[1].equal(obs.relu().reshape({8, -1})));
    // The program's module paths start at the exported module: `module.1`.
    CHECK_THROWS_WITH_AS(p->module()({{"obs", batch_of(3).get("obs")}}),
                         "traced at batch 8; this input has batch 3, and %reshape (module "
                         "module.1) was specialised to it",
                         ShapeError);
  }
  // The seed's batch-generic model exports without a check.
  CHECK_FALSE(
      export_program(samples::seed_000_model(), {{"x", at::randn({1, 3})}}).batch_specialisation());
}

TEST_CASE("batch: a loop over the batch is specialised too") {
  auto pipeline = make_td_sequential({make_td_module(
      [](const at::Tensor& x) {
        at::Tensor total = at::zeros_like(x[0]);
        for (int64_t i = 0; i < x.size(0); ++i) total = total + x[i];
        return total;
      },
      {"obs"}, {"sum"})});
  TDGraphModule gm = symbolic_trace(pipeline, batch_of(4));
  REQUIRE(gm.batch_specialisation());
  CHECK_THROWS_AS(gm.run(batch_of(5)), ShapeError);
}
