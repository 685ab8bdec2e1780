// Every torch::nn module type of LibTorch 1.13, in two forms: wrapped directly
// (`make_td_module(layer, …)`) and called by a user module inside a TensorDictSequential.
// Each case goes through trace, a run at the traced batch (bit-equal to eager), two other
// batch sizes (refused by the static trace naming the batch; bit-equal to eager in a dynamic
// trace), export, save, load, run and save_diagram, in train and eval mode where they differ.
#include <doctest/doctest.h>
// LibTorch 1.13's modules/instancenorm.h uses the functional without including it.
#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/modules.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/op_policy.h"
#include "tdfx/export/program.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tests/export/nn_layer_cases.h"
#include "tests/support/test_support.h"

using namespace tdfx;
using namespace tdfx::testing::nn_layers;

namespace {

// `layer.refusal` for `module`: `{module}` is its TensorDictModule's describe(), `{name}` the
// case's name, `{at}` where the layer sits (" at '0.module.layer'" in a user module, " at 'module'"
// when wrapped directly).
std::string expected_refusal(const LayerCase& layer, const TensorDictModuleBase& module,
                             bool in_user_module) {
  std::string text = layer.refusal;
  auto replace = [&](const std::string& field, const std::string& value) {
    for (size_t at = text.find(field); at != std::string::npos; at = text.find(field, at)) {
      text.replace(at, field.size(), value);
      at += value.size();
    }
  };
  // In a user module, the TensorDictModule is the sequential's one child.
  const auto* seq = dynamic_cast<const TensorDictSequential*>(&module);
  replace("{module}", seq ? seq->children_modules().at(0)->describe() : module.describe());
  replace("{name}", layer.name);
  replace("{at}", in_user_module ? " at '0.module.layer'" : " at 'module'");
  replace("{where}", in_user_module ? "'0.module.layer' (AdaptiveLogSoftmaxWithLoss)"
                                    : "'module' (AdaptiveLogSoftmaxWithLoss)");
  return text;
}

// One case in one form: every step, or the refusal the case expects at its step.
void run_case(const LayerCase& layer, bool in_user_module) {
  const TensorDictModuleBasePtr module = layer.module(in_user_module);
  module->train(layer.train);
  const TensorDict td = inputs_at(layer, kBatch);
  const auto expected = eager(layer, *module, td);

  if (layer.refused == LayerCase::Refused::kAtTrace) {
    try {
      symbolic_trace(module, td);
      FAIL_CHECK("traced; expected a TraceError");
    } catch (const TraceError& e) {
      CHECK(std::string(e.what()) == expected_refusal(layer, *module, in_user_module));
    }
    return;
  }
  TDGraphModule gm = symbolic_trace(module, td);
  // The tracer's passes build graphs without linting them: every view, body and program here is
  // linted instead.
  gm.graph().lint();
  for (const Node* node : gm.graph().nodes()) {
    if (node->body()) node->body()->lint();
  }
  gm.program_graph().lint();
  {
    TensorDict work(td);
    at::manual_seed(11);
    gm.forward(work);
    check_equal(outputs_of(layer, work), expected, "traced");
  }
  // Other batch sizes: the static trace refuses them; a dynamic one runs them as eager does.
  for (int64_t batch : {1, 7}) {
    const TensorDict other = inputs_at(layer, batch);
    TensorDict work(other);
    CHECK_THROWS_AS(gm.forward(work), ShapeError);
  }
  if (layer.batched) {
    TraceOptions options;
    options.dynamic_batch = true;
    // Every layer whose sizes follow the batch runs at any batch (issue 37's dynamic column).
    TDGraphModule dynamic = symbolic_trace(module, td, options);
    for (int64_t batch : {1, 7}) {
      CAPTURE(batch);
      const TensorDict other = inputs_at(layer, batch);
      std::optional<std::vector<at::Tensor>> reference;
      try {
        reference = eager(layer, *module, other);
      } catch (const std::exception&) {
        // Eager refuses this batch (BatchNorm in training at batch 1): so must the graph.
        TensorDict work(other);
        CHECK_THROWS(dynamic.forward(work));
        continue;
      }
      TensorDict work(other);
      at::manual_seed(11);
      dynamic.forward(work);
      check_equal(outputs_of(layer, work), *reference, "dynamic");
    }
  }
  // Export, save, load, run. Every operator the program uses is on the allowlist, but for a
  // case refused at load, which is refused when archived.
  const ExportedProgram program = export_program(gm);
  std::vector<std::string> refused_ops;
  for (const Node* node : program.graph().nodes()) {
    const Target& target = node->target();
    if (node->op() == OpCode::kCallFunction && target.is_aten() &&
        !is_allowed_operator(target.op_name())) {
      refused_ops.push_back(target.str());
    }
  }
  CAPTURE(refused_ops);
  CHECK(refused_ops.empty() == (layer.refused != LayerCase::Refused::kAtLoad));
  at::manual_seed(11);
  check_equal(program.module()(program_inputs(layer, td)), expected, "exported");
  if (layer.refused == LayerCase::Refused::kAtLoad) {
    // Refused when archived, as save refuses it: with load's reason, the archive unnamed.
    try {
      archive_bytes(program);
      FAIL_CHECK("archived; expected an ArchiveError");
    } catch (const ArchiveError& e) {
      const std::string at_load = expected_refusal(layer, *module, in_user_module);
      const std::string file = layer.name + ".pt2";
      REQUIRE(at_load.rfind(file, 0) == 0);
      CHECK(std::string(e.what()) == "cannot archive the program: load would refuse the archive" +
                                         at_load.substr(file.size()));
    }
  } else {
    const ExportedProgram loaded = load_bytes(archive_bytes(program), layer.name + ".pt2");
    at::manual_seed(11);
    check_equal(loaded.module()(program_inputs(layer, td)), expected, "loaded");
  }
  // Drawn.
  // In a folder of its own: a fixed name in /tmp raced another test_export run (two
  // checkouts testing at once) and lost its file.
  const tdfx::testing::ScratchDir scratch("tdfx_nn_layer");
  const auto dot = scratch / "layer.dot";
  save_diagram(gm, dot.string());
  CHECK(std::filesystem::file_size(dot) > 0);
}

}  // namespace

TEST_CASE("nn layers: every torch::nn module type traces, runs, exports, loads and draws") {
  for (const LayerCase& layer : layer_cases()) {
    for (bool in_user_module : {false, true}) {
      CAPTURE(layer.name);
      CAPTURE(in_user_module);
      try {
        run_case(layer, in_user_module);
      } catch (const std::exception& e) {
        const std::string failure =
            layer.name + (in_user_module ? " (in a user module)" : "") + ": " + e.what();
        FAIL_CHECK(failure);
      }
    }
  }
}

TEST_CASE(
    "nn layers: a recurrent state under a batch-[B] TensorDict is refused naming the module") {
  const auto lstm =
      make_td_module(nn::LSTM(nn::LSTMOptions(4, 3).batch_first(true)), {"x"}, {"y", "h", "c"});
  TensorDict td({{"x", at::randn({4, 5, 4})}}, {4});
  try {
    lstm->forward(td);
    FAIL("ran");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) ==
          lstm->describe() +
              ": out key 'h' has shape [1, 4, 3], which does not start with the TensorDict's "
              "batch size [4]; use a TensorDict with no batch dimensions, or put the batch first "
              "in a module of your own (a recurrent state [layers, batch, hidden]: "
              "h.transpose(0, 1))");
  }
}

TEST_CASE("nn layers: loaded programs refuse out-of-range indices of the layers that take them") {
  // The index-taking operators admitted to the allowlist, each run from a loaded program on
  // indices a file could hold: ATen checks them, so the run is a RunError, never a read
  // outside a tensor.
  struct Probe {
    std::string name;
    TensorDictModuleBasePtr module;
    std::vector<std::pair<std::string, at::Tensor>> good, bad;
  };
  auto pool = nn::MaxPool2d(nn::MaxPool2dOptions(2));
  const auto [values, indices] = pool->forward_with_indices(at::randn({1, 1, 4, 4}));
  std::vector<Probe> probes = {
      {"MaxUnpool2d",
       make_td_module(nn::MaxUnpool2d(2), {"x", "i"}, {"y"}),
       {{"x", values}, {"i", indices}},
       {{"x", values}, {"i", at::full_like(indices, 1000)}}},
      {"NLLLoss",
       make_td_module(nn::NLLLoss(), {"x", "t"}, {"y"}),
       {{"x", at::randn({3, 5})}, {"t", at::tensor({0, 1, 2}, at::kLong)}},
       {{"x", at::randn({3, 5})}, {"t", at::tensor({0, 1, 99}, at::kLong)}}},
      {"MultiMarginLoss",
       make_td_module(nn::MultiMarginLoss(), {"x", "t"}, {"y"}),
       {{"x", at::randn({3, 5})}, {"t", at::tensor({0, 1, 2}, at::kLong)}},
       {{"x", at::randn({3, 5})}, {"t", at::tensor({0, -7, 2}, at::kLong)}}},
      {"MultiLabelMarginLoss",
       make_td_module(nn::MultiLabelMarginLoss(), {"x", "t"}, {"y"}),
       {{"x", at::randn({3, 5})}, {"t", at::zeros({3, 5}, at::kLong)}},
       {{"x", at::randn({3, 5})}, {"t", at::full({3, 5}, 99, at::kLong)}}},
      {"Embedding",
       make_td_module(nn::Embedding(10, 3), {"i"}, {"y"}),
       {{"i", at::tensor({1, 2}, at::kLong)}},
       {{"i", at::tensor({1, 300}, at::kLong)}}},
  };
  for (const Probe& probe : probes) {
    CAPTURE(probe.name);
    TensorDict td;
    for (const auto& [key, value] : probe.good) td.set(key, value);
    const ExportedProgram loaded =
        load_bytes(archive_bytes(export_program(symbolic_trace(probe.module, td))), "probe.pt2");
    CHECK_NOTHROW(loaded.module()(probe.good));
    CHECK_THROWS_AS(loaded.module()(probe.bad), RunError);
  }
}

TEST_CASE(
    "nn layers: cross-attention in a user module is one call_module, and traces when q and k "
    "have one shape") {
  // Attention reads its packed in_proj_weight once each for query, key and value: one call.
  // Query and key of one shape (and other values) are compared with aten::equal, and the guard
  // that follows made the trace read values while it watched for reads (it crashed).
  struct CrossImpl : nn::Module {
    CrossImpl() : attn(register_module("attn", nn::MultiheadAttention(8, 2))) {}
    at::Tensor forward(const at::Tensor& q, const at::Tensor& kv) {
      return std::get<0>(attn(q, kv, kv));
    }
    nn::MultiheadAttention attn{nullptr};
  };
  auto module = make_td_module(std::make_shared<CrossImpl>(), {"q", "kv"}, {"o"});
  const TensorDict td({{"q", at::randn({5, 3, 8})}, {"kv", at::randn({5, 3, 8})}});
  TDGraphModule gm = symbolic_trace(module, td);
  size_t call_modules = 0, guards = 0;
  for (const Node* node : gm.graph().nodes()) {
    if (node->op() == OpCode::kCallModule) ++call_modules;
    if (node->op() == OpCode::kGetAttr) FAIL("a get_attr outside the call: " << node->name());
  }
  for (const Node* node : gm.program_graph().nodes()) {
    guards += node->target().is_aten() && node->target().op_name() == "_assert_async";
  }
  CHECK(call_modules == 1);
  CHECK(guards == 1);
  TensorDict eager(td), traced(td);
  module->forward(eager);
  gm.forward(traced);
  CHECK(at::equal(eager.get("o"), traced.get("o")));
  // q equal to kv takes the fused path in eager: refused, also by the exported program.
  const TensorDict same({{"q", td.get("kv").clone()}, {"kv", td.get("kv")}});
  TensorDict work(same);
  CHECK_THROWS_AS(gm.forward(work), RunError);
  const ExportedProgram program = export_program(gm);
  CHECK_THROWS_AS(program.module()({{"q", same.get("q")}, {"kv", same.get("kv")}}), RunError);
}
