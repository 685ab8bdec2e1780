// The recorder on the dispatcher beside the JIT-based trace: export_program with
// ExportOptions::dispatch_recorder gives the same program — printed whole, signature, outputs
// bit for bit — for the samples' pipelines and every torch::nn layer case, in both forms.
#include <doctest/doctest.h>

#include <optional>
#include <set>
#include <sstream>

#include "samples/pipelines.h"
#include "tdfx/export/program.h"
#include "tests/export/nn_layer_cases.h"

using namespace tdfx;
using namespace tdfx::testing::nn_layers;

namespace {

// Each node's name and target, in order.
std::vector<std::string> op_sequence(const Graph& graph) {
  std::vector<std::string> ops;
  for (const Node* node : graph.nodes()) ops.push_back(node->name() + " " + node->target().str());
  return ops;
}

// "" when both exports of `module` on `inputs` agree (printed whole, or with `ops_only` the
// nodes' names and targets), their signatures and their outputs bit for bit; else what differs.
std::string compare_exports(const TensorDictModuleBasePtr& module,
                            const std::vector<std::pair<std::string, at::Tensor>>& inputs,
                            bool ops_only = false) {
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
  if (ops_only && op_sequence(recorded.graph()) != op_sequence(traced->graph())) {
    return "ops:\n" + recorded.print_readable() + "\nexpected:\n" + traced->print_readable();
  }
  if (!ops_only && recorded.print_readable() != traced->print_readable()) {
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

// Where the recorder on the dispatcher is not yet at parity, each case by name, so that a
// change either way fails here: which module an op belongs to, where a built-in layer's call
// is more than the ops that read its parameters and what lies between them. The ops a layer
// runs before it first reads a parameter or after it last reads one (an RNN's initial state,
// its output items, a GRU cell's gates, attention's head reshapes, the log_softmax of an
// adaptive softmax's head) are the calling module's in the recording, the layer's in the
// trace, whose leaf finder outlines the layer's whole call (tracer/leaf_regions.h). The
// printed `# Module:` comments differ; the ops do not.
const std::set<std::string> kNotYetAtParity = {
    "AdaptiveLogSoftmaxWithLoss log_prob",
    "AdaptiveLogSoftmaxWithLoss log_prob (in a user module)",
    "MultiheadAttention self (in a user module)",
    "MultiheadAttention cross (in a user module)",
    "MultiheadAttention separate eval (in a user module)",
    "MultiheadAttention separate train (in a user module)",
    "TransformerEncoderLayer eval (in a user module)",
    "TransformerEncoderLayer train (in a user module)",
    "TransformerDecoderLayer eval (in a user module)",
    "TransformerDecoderLayer train (in a user module)",
    "TransformerEncoder (in a user module)",
    "TransformerDecoder (in a user module)",
    "Transformer eval (in a user module)",
    "Transformer train (in a user module)",
    "Conv2d reflect (in a user module)",
    "Conv2d circular (in a user module)",
    "EmbeddingBag (in a user module)",
    "RNN eval (in a user module)",
    "RNN train (in a user module)",
    "GRU eval (in a user module)",
    "GRU train (in a user module)",
    "LSTM eval (in a user module)",
    "LSTM train (in a user module)",
    "LSTM with state (in a user module)",
    "GRU with state (in a user module)",
    "RNNCell (in a user module)",
    "GRUCell (in a user module)",
};

TEST_CASE("dispatch export: every torch::nn layer case exports as the JIT-based trace does") {
  std::set<std::string> differ;
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
        problem =
            compare_exports(module, program_inputs(layer, td), kNotYetAtParity.count(name) > 0);
      } catch (const std::exception& e) {
        problem = e.what();
      }
      ++compared;
      if (!problem.empty()) FAIL_CHECK(name << ": " << problem);
      if (kNotYetAtParity.count(name) > 0 &&
          compare_exports(module, program_inputs(layer, td)) != "") {
        differ.insert(name);
      }
    }
  }
  for (const std::string& name : kNotYetAtParity) {
    CHECK_MESSAGE(differ.count(name) == 1, name << " is at parity now: take it off the list");
  }
  CHECK(compared > 250);
}
