// Diagrams of traced pipelines: both views of a real trace, compared whole with golden files.
#include <doctest/doctest.h>
#include <torch/utils.h>

#include "samples/pipelines.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/support/golden.h"

using namespace tdfx;

namespace {

constexpr const char* kGolden = "tests/tracer/golden";

TDGraphModule traced_actor_critic() {
  torch::manual_seed(0);
  return symbolic_trace(samples::actor_critic(), samples::actor_critic_input());
}

}  // namespace

TEST_CASE("diagram: both views of a pipeline with nested sequentials and shared keys") {
  const TDGraphModule gm = traced_actor_critic();
  RenderOptions options = diagram_options(gm);
  testing::check_golden(kGolden, "readme_actor_critic.ops.dot", to_dot(gm.graph(), options));
  options.view = View::kModules;
  testing::check_golden(kGolden, "readme_actor_critic.modules.dot", to_dot(gm.graph(), options));
}

TEST_CASE("diagram: the module view needs no trace") {
  const TDGraphModule gm = traced_actor_critic();
  RenderOptions traced = diagram_options(gm);
  traced.view = View::kModules;
  CHECK(module_view_dot(module_view_options(samples::actor_critic())) ==
        to_dot(gm.graph(), traced));
}

TEST_CASE("diagram: pipeline_modules lists sequentials before their children, with counts") {
  const auto modules = pipeline_modules(*samples::actor_critic(), "module");
  REQUIRE(modules.size() == 9);
  CHECK(modules[0].path == "0");
  CHECK(modules[0].sequential);
  CHECK(modules[0].parameters == 288 + 64);
  CHECK(modules[0].buffers == 65);
  CHECK(modules[3].path == "0.module.2");
  CHECK(modules[3].type == "BatchNorm1d");
  CHECK(modules[3].buffers == 65);
  CHECK(modules[8].path == "3");
  CHECK(modules[8].in_keys == std::vector<NestedKey>{{"agent", "loc"}, {"agent", "mask"}});
}
