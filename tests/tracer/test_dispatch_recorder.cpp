// The recorder on the dispatcher: what code calls becomes a flat graph that runs bit-identically,
// tensors followed through in-place ops and views, C++ numbers and ops that never dispatch
// handled, value reads seen, untracked tensors and unseen mutation refused by name.
#include <ATen/CPUGeneratorImpl.h>
#include <doctest/doctest.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <map>
#include <sstream>
#include <thread>

#include "tdfx/core/error.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/dispatch_recorder.h"
#include "tdfx/tracer/dispatch_trace.h"

using namespace tdfx;
using tdfx::detail::DispatchRecorder;
using tdfx::detail::ValueReadCall;

namespace {

/// A recording of `fn` on `inputs` (placeholders x0, x1, …) with its outputs, compiled.
struct Recorded {
  std::unique_ptr<GraphModule> module;
  std::vector<at::Tensor> eager;
  std::vector<ValueReadCall> reads;
};

Recorded record(const std::vector<at::Tensor>& inputs,
                const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& fn) {
  Graph graph;
  DispatchRecorder recorder(graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    recorder.bind(inputs[i], graph.placeholder("x" + std::to_string(i)));
  }
  Recorded out;
  recorder.record([&] { out.eager = fn(inputs); });
  std::vector<Argument> results;
  for (const at::Tensor& t : out.eager) {
    Node* node = recorder.node_of(t);
    REQUIRE_MESSAGE(node != nullptr, "an output the recording does not follow");
    results.push_back(node);
  }
  graph.output(tuple(std::move(results)));
  graph.lint();
  out.reads = recorder.value_reads();
  out.module = std::make_unique<GraphModule>(nullptr, std::move(graph));
  return out;
}

/// Runs the recording on `inputs` and checks every output bit-equal to the eager ones.
void check_runs_bit_identical(const Recorded& recorded, const std::vector<at::Tensor>& inputs) {
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  const std::vector<c10::IValue> got = recorded.module->run(args);
  REQUIRE(got.size() == recorded.eager.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(at::equal(got[i].toTensor(), recorded.eager[i]));
  }
}

std::string printed(const Recorded& recorded) {
  std::ostringstream out;
  out << recorded.module->graph();
  return out.str();
}

}  // namespace

TEST_CASE("dispatch recorder: what the code calls becomes nodes that run bit-identically") {
  at::manual_seed(0);
  const at::Tensor x = at::randn({3, 4}), w = at::randn({5, 4});
  const Recorded r = record({x, w}, [](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{at::relu(at::matmul(in[0], in[1].t()) * 2 + 1)};
  });
  CHECK(
      printed(r) ==
      "graph():\n"
      "    %x0 : [#users=1] = placeholder[target=x0]\n"
      "    %x1 : [#users=1] = placeholder[target=x1]\n"
      "    %t : [#users=1] = call_function[target=torch.t](args = (%x1,), kwargs = {})\n"
      "    %matmul : [#users=1] = call_function[target=operator.matmul](args = (%x0, %t), kwargs = "
      "{})\n"
      "    %mul : [#users=1] = call_function[target=operator.mul](args = (%matmul, 2), kwargs = "
      "{})\n"
      "    %add : [#users=1] = call_function[target=operator.add](args = (%mul, 1), kwargs = {})\n"
      "    %relu : [#users=1] = call_function[target=torch.relu](args = (%add,), kwargs = {})\n"
      "    return (relu,)");
  check_runs_bit_identical(r, {x, w});
}

TEST_CASE("dispatch recorder: a built-in layer records the ops LibTorch's C++ calls") {
  at::manual_seed(1);
  torch::nn::Linear linear(4, 3);
  const at::Tensor x = at::randn({2, 4});
  Graph graph;
  DispatchRecorder recorder(graph);
  recorder.bind(x, graph.placeholder("x"));
  recorder.bind(linear->weight, graph.get_attr("weight"));
  recorder.bind(linear->bias, graph.get_attr("bias"));
  at::Tensor y;
  recorder.record([&] { y = linear(x); });
  graph.output(recorder.node_of(y));
  std::vector<std::string> ops;
  for (const Node* node : graph.nodes()) {
    if (node->op() == OpCode::kCallFunction) ops.push_back(node->target().str());
  }
  // 2-D input with bias: F::linear calls t and addmm (LIBTORCH_NOTES.md).
  CHECK(ops == std::vector<std::string>{"aten::t", "aten::addmm"});
  auto root = std::make_shared<torch::nn::Module>();
  root->register_parameter("weight", linear->weight);
  root->register_parameter("bias", linear->bias);
  GraphModule gm(root, std::move(graph));
  CHECK(at::equal(gm.run({x}).at(0).toTensor(), y));
}

TEST_CASE("dispatch recorder: tensors are followed through in-place ops, views and reused memory") {
  at::manual_seed(2);
  const at::Tensor x = at::randn({4, 3});
  SUBCASE("an in-place op makes its result the tensor's value") {
    const Recorded r = record({x}, [](const std::vector<at::Tensor>& in) {
      at::Tensor y = in[0] * 1;
      y.add_(2).mul_(3);
      return std::vector<at::Tensor>{y};
    });
    check_runs_bit_identical(r, {x});
    CHECK(
        printed(r) ==
        "graph():\n"
        "    %x0 : [#users=1] = placeholder[target=x0]\n"
        "    %mul : [#users=1] = call_function[target=operator.mul](args = (%x0, 1), kwargs = {})\n"
        "    %add_ : [#users=1] = call_function[target=torch.add_](args = (%mul,), kwargs = "
        "{other: 2})\n"
        "    %mul_ : [#users=1] = call_function[target=torch.mul_](args = (%add_,), kwargs = "
        "{other: 3})\n"
        "    return (mul_,)");
  }
  SUBCASE("a view is a node of its own; contiguous() of a contiguous tensor is the tensor") {
    const Recorded r = record({x}, [](const std::vector<at::Tensor>& in) {
      const at::Tensor v = in[0].view({3, 4}).contiguous();
      return std::vector<at::Tensor>{v.select(0, 1), v.t().contiguous()};
    });
    check_runs_bit_identical(r, {x});
  }
  SUBCASE("a tensor freed during the recording: a new one at its address is not taken for it") {
    const Recorded r = record({x}, [](const std::vector<at::Tensor>& in) {
      at::Tensor sum = in[0].clone();
      for (int i = 0; i < 20; ++i) {
        at::Tensor temporary = in[0] * static_cast<double>(i);  // freed each round
        sum = sum + temporary;
      }
      return std::vector<at::Tensor>{sum};
    });
    check_runs_bit_identical(r, {x});
  }
  SUBCASE("an in-place op on a view changes its base: the run replays it in order") {
    const Recorded r = record({x}, [](const std::vector<at::Tensor>& in) {
      at::Tensor y = in[0] * 1;
      y.select(0, 0).zero_();
      return std::vector<at::Tensor>{y + 1};
    });
    check_runs_bit_identical(r, {x});
    CHECK(r.eager[0][0].eq(1).all().item<bool>());
  }
}

TEST_CASE("dispatch recorder: C++ numbers, sizes and factories") {
  at::manual_seed(3);
  const at::Tensor x = at::randn({2, 3});
  const Recorded r = record({x}, [](const std::vector<at::Tensor>& in) {
    // A size is a C++ int that never reaches the dispatcher: a constant of the recording.
    const int64_t n = in[0].size(1);
    const at::Tensor ones = at::ones({n}, in[0].options());
    // `2.0 - x` is empty_like + fill_ + sub_ in LibTorch's C++ (LIBTORCH_NOTES.md).
    return std::vector<at::Tensor>{2.0 - in[0] + ones, at::where(in[0] > 0, in[0], 0.5)};
  });
  check_runs_bit_identical(r, {x});
  const std::string text = printed(r);
  CHECK(text.find("torch.ones") != std::string::npos);
  CHECK(text.find("empty_like") != std::string::npos);
}

TEST_CASE("dispatch recorder: value reads are seen, tensors it does not follow are refused") {
  const at::Tensor x = at::randn({2, 3});
  SUBCASE("item, is_nonzero and equal read a followed tensor") {
    const Recorded r = record({x}, [](const std::vector<at::Tensor>& in) {
      const double total = in[0].sum().item<double>();
      const bool positive = (in[0] > 0).any().is_nonzero();
      const bool same = at::equal(in[0], in[0] * 1);
      return std::vector<at::Tensor>{in[0] * (positive && same ? total : 0.0)};
    });
    std::vector<std::string> ops;
    for (const auto& read : r.reads) ops.push_back(read.op);
    CHECK(ops == std::vector<std::string>{"aten::item", "aten::is_nonzero", "aten::equal"});
    REQUIRE(r.reads.front().after != nullptr);
    CHECK(r.reads.front().after->name() == "sum_1");  // `sum` is a Python builtin
  }
  SUBCASE("a captured tensor") {
    const at::Tensor mask = at::ones({2, 3});
    CHECK_THROWS_WITH_AS(
        record({x},
               [&](const std::vector<at::Tensor>& in) {
                 return std::vector<at::Tensor>{in[0] * mask};
               }),
        "aten::mul: argument 'other' is a tensor the trace does not follow (float32 [2, 3], not an "
        "input, a parameter or a buffer, nor computed from them: a tensor a lambda captured, "
        "say)",
        TraceError);
  }
}

TEST_CASE("dispatch recorder: recording is per thread and leaves nothing behind") {
  const at::Tensor x = at::randn({2, 2});
  Graph graph;
  DispatchRecorder recorder(graph);
  recorder.bind(x, graph.placeholder("x"));
  recorder.record([&] { (void)(x + 1); });
  CHECK(recorder.op_count() == 1);
  (void)(x + 1);  // after the recording: not recorded
  std::thread other([&] { (void)(x * 3); });
  recorder.record([&] {
    std::thread inside([&] { (void)(x * 3); });  // another thread: not recorded
    inside.join();
  });
  other.join();
  CHECK(recorder.op_count() == 1);
  // An exception from the code passes through, and the recorder is off after it.
  CHECK_THROWS_AS(recorder.record([] { throw std::runtime_error("user code"); }),
                  std::runtime_error);
  (void)(x - 1);
  CHECK(recorder.op_count() == 1);
}

TEST_CASE("dispatch recorder: record_pipeline leaves the module, its state and the generator") {
  at::manual_seed(4);
  auto pipeline = make_td_sequential(
      {make_td_module(torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4),
                                            torch::nn::Dropout(0.5)),
                      {"x"}, {"h"}),
       make_td_module([](const at::Tensor& h) { return 1 - h; }, {"h"}, {"y"})});
  pipeline->train(true);  // BatchNorm updates its running statistics, Dropout draws
  const TensorDict td({{"x", at::randn({5, 3})}}, {5});
  std::map<std::string, at::Tensor> before;
  for (const auto& item : pipeline->named_buffers(true)) before[item.key()] = item.value().clone();
  const at::Tensor weight = pipeline->named_parameters(true)["module.0.module.0.weight"];
  const at::Tensor generator_state = at::detail::getDefaultCPUGenerator().get_state();
  const tdfx::detail::PipelineRecording recorded = tdfx::detail::record_pipeline(*pipeline, td);
  for (const auto& item : pipeline->named_buffers(true)) {
    CAPTURE(item.key());
    CHECK(at::equal(item.value(), before.at(item.key())));
  }
  // The module's own tensors, not copies put in their place.
  CHECK(pipeline->named_parameters(true)["module.0.module.0.weight"].is_same(weight));
  CHECK(at::equal(at::detail::getDefaultCPUGenerator().get_state(), generator_state));
  // The recording is the program: one placeholder per key read, the output the out keys'.
  REQUIRE(recorded.reads.size() == 1);
  CHECK(recorded.reads[0].key == NestedKey("x"));
  CHECK(recorded.out_keys == std::vector<NestedKey>{"h", "y"});
  std::vector<std::string> targets;
  for (const Node* node : recorded.graph.nodes()) {
    if (node->op() == OpCode::kCallFunction) targets.push_back(node->target().str());
  }
  // BatchNorm counts its batches in place (num_batches_tracked, restored above); `1 - h` is
  // LibTorch's empty_like + fill_ + sub_ (LIBTORCH_NOTES.md), recorded as called.
  CHECK(targets == std::vector<std::string>{"aten::t", "aten::addmm", "aten::add_.Scalar",
                                            "aten::batch_norm", "aten::dropout", "aten::empty_like",
                                            "aten::fill_.Scalar", "aten::sub_.Tensor"});
}
