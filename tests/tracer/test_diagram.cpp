// Diagrams of traced pipelines: both views of a real trace, compared whole with golden files.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <torch/nn/modules/batchnorm.h>
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

TEST_CASE("diagram: a module table lists each module's subtree and its tensors as ranges") {
  // A Linear shared by two TensorDictModules is listed at each path, with its tensors; a
  // Linear without bias has one parameter; BatchNorm's buffers come after every parameter.
  auto shared = torch::nn::Linear(4, 4);
  auto nobias = torch::nn::Linear(torch::nn::LinearOptions(4, 2).bias(false));
  auto norm = torch::nn::BatchNorm1d(2);
  auto pipeline = std::make_shared<TensorDictSequential>(std::vector<TensorDictModuleBasePtr>{
      make_td_module(shared, {"x"}, {"y"}), make_td_module(shared, {"y"}, {"z"}),
      make_td_module(nobias, {"z"}, {"w"}), make_td_module(norm, {"w"}, {"v"})});
  const tdfx::detail::ModuleTable table(*pipeline, "module");
  std::string listed;
  for (const tdfx::detail::ModuleEntry& entry : table.modules()) {
    listed += fmt::format("'{}' end={} parameters=[{},{}) buffers=[{},{})\n", entry.path, entry.end,
                          entry.parameters_begin, entry.parameters_end, entry.buffers_begin,
                          entry.buffers_end);
  }
  // The root and its module list both strip to "" (the prefix itself).
  CHECK(listed ==
        "'' end=10 parameters=[0,7) buffers=[7,10)\n"
        "'' end=10 parameters=[0,7) buffers=[7,10)\n"
        "'0' end=4 parameters=[0,2) buffers=[7,7)\n"
        "'0.module' end=4 parameters=[0,2) buffers=[7,7)\n"
        "'1' end=6 parameters=[2,4) buffers=[7,7)\n"
        "'1.module' end=6 parameters=[2,4) buffers=[7,7)\n"
        "'2' end=8 parameters=[4,5) buffers=[7,7)\n"
        "'2.module' end=8 parameters=[4,5) buffers=[7,7)\n"
        "'3' end=10 parameters=[5,7) buffers=[7,10)\n"
        "'3.module' end=10 parameters=[5,7) buffers=[7,10)\n");
  std::string paths;
  for (const tdfx::detail::StateTensor& state : table.state()) {
    paths += state.path + (state.parameter ? " p\n" : " b\n");
  }
  CHECK(paths ==
        "0.module.weight p\n0.module.bias p\n1.module.weight p\n1.module.bias p\n"
        "2.module.weight p\n3.module.weight p\n3.module.bias p\n3.module.running_mean b\n"
        "3.module.running_var b\n3.module.num_batches_tracked b\n");
  // The shared layer is found at each of its paths, and nowhere else.
  REQUIRE(table.find(*shared, "1.module") != nullptr);
  CHECK(table.find(*shared, "1.module")->parameters_begin == 2);
  CHECK(table.find(*shared, "0.module")->parameters_begin == 0);
  CHECK(table.find(*shared, "2.module") == nullptr);
  CHECK(table.elements(*table.find(*norm, "3.module")) == std::pair<int64_t, int64_t>{4, 5});
  CHECK(table.elements(table.modules()[0]) ==
        std::pair<int64_t, int64_t>{4 * 4 * 2 + 8 + 8 + 4, 5});
}
