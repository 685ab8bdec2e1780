// The recorder on the dispatcher beside the JIT-based trace: export_program with
// ExportOptions::dispatch_recorder gives the same program — printed whole, signature, outputs
// bit for bit — for the samples' pipelines and every torch::nn layer case, in both forms.
#include <doctest/doctest.h>

#include <optional>
#include <sstream>

#include "samples/pipelines.h"
#include "tdfx/export/program.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/export/nn_layer_cases.h"

using namespace tdfx;
using namespace tdfx::testing::nn_layers;

namespace {

// "" when both exports of `module` on `inputs` agree (printed whole), their signatures and
// their outputs bit for bit; else what differs.
std::string compare_exports(const TensorDictModuleBasePtr& module,
                            const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  ExportOptions options;
  options.dispatch_recorder = true;
  std::optional<ExportedProgram> traced;
  try {
    traced.emplace(export_program(module, inputs));
  } catch (const Error& e) {
    // Refused by the trace: refused alike.
    try {
      export_program(module, inputs, options);
    } catch (const Error& again) {
      if (std::string(again.what()) == e.what()) return "";
      return std::string("refused with: ") + again.what() + "\nexpected: " + e.what();
    }
    return std::string("exported; expected: ") + e.what();
  }
  const ExportedProgram recorded = export_program(module, inputs, options);
  if (recorded.print_readable() != traced->print_readable()) {
    return "printed:\n" + recorded.print_readable() + "\nexpected:\n" + traced->print_readable();
  }
  if (recorded.graph_signature().str() != traced->graph_signature().str()) {
    return "signature:\n" + recorded.graph_signature().str() + "\nexpected:\n" +
           traced->graph_signature().str();
  }
  at::manual_seed(11);
  const std::vector<at::Tensor> a = traced->module()(inputs);
  at::manual_seed(11);
  const std::vector<at::Tensor> b = recorded.module()(inputs);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return "output " + std::to_string(i) + " differs";
  }
  return "";
}

}  // namespace

TEST_CASE("dispatch export: the samples' pipelines export as the JIT-based trace exports them") {
  at::manual_seed(0);
  struct Sample {
    std::string name;
    TensorDictModuleBasePtr module;
    std::vector<std::pair<std::string, at::Tensor>> inputs;
  };
  const std::vector<Sample> samples_ = {
      {"seed 000", samples::seed_000_model(), {{"x", at::randn({1, 3})}}},
      {"seed 000 nested", samples::seed_000_nested_model(), {{"some_key", at::randn({1, 3})}}},
      {"seed 002 module", samples::seed_module(), {{"input", at::randn({32, 100})}}},
      {"seed 002 sequential",
       samples::seed_sequential(),
       {{"input_x", at::randn({32, 100})}, {"input_mask", at::randn({32, 10})}}},
      {"seed 002 nested", samples::nested_sequential(), {{"input", at::randn({32, 100})}}},
      {"actor-critic",
       samples::actor_critic(),
       {{"observation", samples::actor_critic_input().get("observation")},
        {"agent_mask", samples::actor_critic_input().get({"agent", "mask"})}}},
  };
  for (const Sample& sample : samples_) {
    CAPTURE(sample.name);
    CHECK(compare_exports(sample.module, sample.inputs) == "");
  }
}

TEST_CASE("dispatch export: every torch::nn layer case exports as the JIT-based trace does") {
  size_t compared = 0;
  for (const LayerCase& layer : layer_cases()) {
    if (layer.refused != LayerCase::Refused::kNo) continue;
    for (bool in_user_module : {false, true}) {
      const std::string name = layer.name + (in_user_module ? " (in a user module)" : "");
      const TensorDictModuleBasePtr module = layer.module(in_user_module);
      module->train(layer.train);
      const TensorDict td = inputs_at(layer, kBatch);
      std::string problem;
      try {
        problem = compare_exports(module, program_inputs(layer, td));
      } catch (const std::exception& e) {
        problem = e.what();
      }
      ++compared;
      if (!problem.empty()) FAIL_CHECK(name << ": " << problem);
    }
  }
  CHECK(compared > 250);
}

namespace {

// A graph printed whole with each node's metadata, and the bodies of its call_module nodes.
std::string with_meta(const Graph& graph, const std::string& indent = "") {
  std::ostringstream out;
  out << indent << to_string(graph) << "\n";
  for (const Node* node : graph.nodes()) {
    const NodeMeta& meta = node->meta();
    out << indent << node->name() << " td=" << meta.td_module << " module=" << meta.module_path
        << " type=" << meta.module_type << " shown=" << meta.shown_as;
    if (meta.tensor.shape) out << " shape=" << at::IntArrayRef(*meta.tensor.shape);
    if (meta.tensor.dtype) out << " dtype=" << *meta.tensor.dtype;
    out << "\n";
    if (node->body()) out << with_meta(*node->body(), indent + "  ");
  }
  return out.str();
}

// "" when symbolic_trace of `module` on `td` with `options` and with the dispatch recorder
// print alike (view, code, program, each node's metadata), read the same keys and compute the
// same outputs bit for bit; else what differs.
std::string compare_traces(const TensorDictModuleBasePtr& module, const TensorDict& td,
                           TraceOptions options = {}) {
  std::optional<TDGraphModule> traced;
  TraceOptions dispatch = options;
  dispatch.dispatch_recorder = true;
  try {
    traced.emplace(symbolic_trace(module, td, options));
  } catch (const Error& e) {
    try {
      symbolic_trace(module, td, dispatch);
    } catch (const Error& again) {
      if (std::string(again.what()) == e.what()) return "";
      return std::string("refused with: ") + again.what() + "\nexpected: " + e.what();
    }
    return std::string("traced; expected: ") + e.what();
  }
  const TDGraphModule recorded = symbolic_trace(module, td, dispatch);
  auto differ = [](const std::string& what, const std::string& got, const std::string& want) {
    return got == want ? "" : what + ":\n" + got + "\nexpected:\n" + want;
  };
  std::string problem = differ("view", with_meta(recorded.graph()), with_meta(traced->graph()));
  if (problem.empty()) problem = differ("code", recorded.code(), traced->code());
  if (problem.empty()) {
    problem =
        differ("program", with_meta(recorded.program_graph()), with_meta(traced->program_graph()));
  }
  if (!problem.empty()) return problem;
  if (recorded.input_keys() != traced->input_keys()) return "input keys differ";
  at::manual_seed(11);
  const std::vector<at::Tensor> a = traced->run(td);
  at::manual_seed(11);
  const std::vector<at::Tensor> b = recorded.run(td);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return "output " + std::to_string(i) + " differs";
  }
  return "";
}

}  // namespace

TEST_CASE("dispatch trace: the samples' pipelines trace as the JIT-based trace traces them") {
  at::manual_seed(0);
  const TensorDict seed_000({{"x", at::randn({1, 3})}}, {1});
  const TensorDict seed_002({{"input", at::randn({32, 100})}}, {32});
  struct Sample {
    std::string name;
    TensorDictModuleBasePtr module;
    TensorDict td;
  };
  const std::vector<Sample> samples_ = {
      {"seed 000", samples::seed_000_model(), seed_000},
      {"seed 000 nested", samples::seed_000_nested_model(),
       TensorDict({{"some_key", at::randn({1, 3})}}, {1})},
      {"seed 002 module", samples::seed_module(), seed_002},
      {"seed 002 sequential", samples::seed_sequential(), samples::seed_sequential_input()},
      {"seed 002 nested", samples::nested_sequential(), seed_002},
      {"actor-critic", samples::actor_critic(), samples::actor_critic_input()},
  };
  for (const Sample& sample : samples_) {
    for (KeyStyle style : {KeyStyle::kGetItem, KeyStyle::kPlaceholder}) {
      for (bool outline : {true, false}) {
        CAPTURE(sample.name);
        CAPTURE(static_cast<int>(style));
        CAPTURE(outline);
        TraceOptions options;
        options.key_style = style;
        options.outline_leaves = outline;
        CHECK(compare_traces(sample.module, sample.td, options) == "");
      }
    }
  }
}

TEST_CASE("dispatch trace: every torch::nn layer case traces as the JIT-based trace does") {
  size_t compared = 0;
  for (const LayerCase& layer : layer_cases()) {
    if (layer.refused != LayerCase::Refused::kNo) continue;
    for (bool in_user_module : {false, true}) {
      const std::string name = layer.name + (in_user_module ? " (in a user module)" : "");
      const TensorDictModuleBasePtr module = layer.module(in_user_module);
      module->train(layer.train);
      std::string problem;
      try {
        problem = compare_traces(module, inputs_at(layer, kBatch));
      } catch (const std::exception& e) {
        problem = e.what();
      }
      ++compared;
      if (!problem.empty()) FAIL_CHECK(name << ": " << problem);
    }
  }
  CHECK(compared > 250);
}
