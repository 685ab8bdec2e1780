// Diagrams of traced pipelines: both views of a real trace, compared whole with golden files.
#include <doctest/doctest.h>
#include <torch/nn/modules/linear.h>
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

TEST_CASE(
    "diagram: module boxes counted from a module table equal those counted from the modules") {
  // Export counts each box's elements from the recording's module table; the module view walks
  // the modules. A layer shared by two TensorDictModules counts in each; a Linear without
  // bias registers an undefined bias.
  auto shared = torch::nn::Linear(4, 4);
  auto nobias = torch::nn::Linear(torch::nn::LinearOptions(4, 2).bias(false));
  auto shared_pipeline =
      std::make_shared<TensorDictSequential>(std::vector<TensorDictModuleBasePtr>{
          make_td_module(shared, {"x"}, {"y"}), make_td_module(shared, {"y"}, {"z"}),
          std::make_shared<TensorDictSequential>(
              std::vector<TensorDictModuleBasePtr>{make_td_module(nobias, {"z"}, {"w"})})});
  const std::vector<std::pair<std::shared_ptr<TensorDictModuleBase>, std::string>> cases = {
      {samples::actor_critic(), "module"},
      {samples::actor_critic(), ""},
      {samples::nested_sequential(), "module"},
      {shared_pipeline, ""},
      {make_td_module(nobias, {"x"}, {"y"}), "module"}};
  for (const auto& [pipeline, strip] : cases) {
    CAPTURE(strip);
    const auto walked = pipeline_modules(*pipeline, strip);
    const auto counted = tdfx::detail::pipeline_modules(
        *pipeline, strip, tdfx::detail::ModuleTable(*pipeline, strip));
    REQUIRE(walked.size() == counted.size());
    for (size_t i = 0; i < walked.size(); ++i) {
      CAPTURE(walked[i].path);
      CHECK(counted[i].parameters == walked[i].parameters);
      CHECK(counted[i].buffers == walked[i].buffers);
      CHECK(counted[i].label == walked[i].label);
    }
  }
  CHECK(pipeline_modules(*shared_pipeline, "")[1].parameters == 20);
}
