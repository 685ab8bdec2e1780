// Pipelines as LibTorch users write them (issue 11's suite): each is traced at batch 8 and
// checked for its printed graph and code (golden files in tests/tracer/golden/, written by real
// runs: see the README there), bit-equal outputs at batch 8 and a ShapeError at another batch
// (a static trace), bit-equal outputs at batches 1, 3 and 17 of a dynamic trace (or the
// TraceError refusing one), and its diagram's DOT text and SVG.
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tests/support/golden.h"
#include "tests/tracer/tracer_test_support.h"

using namespace tdfx;
using tdfx::testing::check_runs_like_eager;
using tdfx::testing::read_text;
using tdfx::testing::source_dir;
namespace nn = torch::nn;

namespace {

// ---------------------------------------------------------------------------------------------
// The checks, one function each, shared by every pipeline.

/// The batch size every pipeline is traced at.
constexpr int64_t kTracedBatch = 8;
/// The batch size a static graph is run at, to be refused.
constexpr int64_t kOtherBatch = 7;

/// A pipeline and the inputs it is run on.
struct Pipeline {
  /// The stem of its golden files in tests/tracer/golden/.
  std::string name;
  TensorDictModuleBasePtr module;
  /// A random input at a batch size.
  std::function<TensorDict(int64_t)> input;
  /// Unset: a dynamic trace runs at any batch size, bit-equal to eager. Set: the TraceError
  /// that refuses a dynamic trace.
  std::optional<std::string> dynamic_refused;
};

/// Compares `actual` with tests/tracer/golden/<file>, or writes it there when updating.
void check_golden(const std::string& file, const std::string& actual) {
  tdfx::testing::check_golden("tests/tracer/golden", file, actual);
}

/// The graph as printed and the forward code, whole, against the golden files.
void check_printed(const TDGraphModule& gm, const std::string& name) {
  gm.graph().lint();
  check_golden(name + ".graph.txt", to_string(gm.graph()));
  check_golden(name + ".code.txt", gm.code());
}

/// The static trace `gm`: bit-equal to eager at the traced batch, refused at another. A
/// dynamic trace: bit-equal at batches 1, 3 and 17 too, or refused with the expected
/// TraceError; its code, where it differs from the static one's (size nodes), against the
/// golden file `<name>.dynamic.code.txt`.
void check_batches(const Pipeline& pipeline, const TDGraphModule& gm, const TensorDict& example) {
  check_runs_like_eager(pipeline.module, gm, example);
  REQUIRE(gm.batch_specialisation().has_value());
  CHECK(gm.batch_specialisation()->traced_batch == kTracedBatch);
  CHECK(gm.recorded_batches() == std::vector<int64_t>{kTracedBatch});
  CHECK_THROWS_WITH_AS(
      gm.run(pipeline.input(kOtherBatch)),
      "traced at batch 8 with a static batch; this input has batch 7: trace with "
      "TraceOptions::dynamic_batch (export_program: ExportOptions::dynamic_batch) for a graph "
      "that runs at other batch sizes",
      ShapeError);
  TraceOptions dynamic;
  dynamic.dynamic_batch = true;
  if (pipeline.dynamic_refused) {
    CHECK_THROWS_WITH_AS(symbolic_trace(pipeline.module, example, dynamic),
                         pipeline.dynamic_refused->c_str(), TraceError);
    return;
  }
  const TDGraphModule flexible = symbolic_trace(pipeline.module, example, dynamic);
  flexible.graph().lint();
  CHECK_FALSE(flexible.batch_specialisation().has_value());
  CHECK(flexible.recorded_batches() == std::vector<int64_t>{8, 9, 1, 35});
  if (flexible.code() != gm.code())
    check_golden(pipeline.name + ".dynamic.code.txt", flexible.code());
  for (int64_t batch : {1, 3, 8, 17}) {
    CAPTURE(batch);
    check_runs_like_eager(pipeline.module, flexible, pipeline.input(batch));
  }
}

/// Whitespace at the end of `text` removed.
std::string trimmed_end(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

/// The diagram's DOT text, whole, against the golden file; and its SVG, written once by
/// save_diagram, is a whole SVG document.
void check_diagram(const TDGraphModule& gm, const std::string& name) {
  check_golden(name + ".dot", to_dot(gm.graph(), diagram_options(gm)));
  const tdfx::testing::ScratchDir dir("tdfx_user_pipelines");
  const std::string path = (dir / (name + ".svg")).string();
  save_diagram(gm, path);
  const std::string svg = trimmed_end(read_text(path));
  CHECK((svg.rfind("<?xml", 0) == 0 || svg.rfind("<svg", 0) == 0));
  CHECK(svg.size() >= 6);
  CHECK(svg.substr(svg.size() - 6) == "</svg>");
}

/// Traces `pipeline` at kTracedBatch and runs every check on it.
TDGraphModule check_pipeline(const Pipeline& pipeline) {
  CAPTURE(pipeline.name);
  torch::manual_seed(0);
  const TensorDict example = pipeline.input(kTracedBatch);
  TDGraphModule gm = symbolic_trace(pipeline.module, example);
  check_printed(gm, pipeline.name);
  check_batches(pipeline, gm, example);
  check_diagram(gm, pipeline.name);
  return gm;
}

/// Inputs of random normal `key` tensors of shape (batch, ...sizes).
std::function<TensorDict(int64_t)> normal(const NestedKey& key, std::vector<int64_t> sizes) {
  return [key, sizes](int64_t batch) {
    std::vector<int64_t> shape{batch};
    shape.insert(shape.end(), sizes.begin(), sizes.end());
    return TensorDict({{key, at::randn(shape)}}, {batch});
  };
}

// ---------------------------------------------------------------------------------------------
// The modules, written as users write them.

/// Linear(4, 16), ReLU, Linear(16, 8), ReLU.
nn::Sequential mlp_encoder() {
  return nn::Sequential(nn::Linear(4, 16), nn::ReLU(), nn::Linear(16, 8), nn::ReLU());
}

/// An encoder Sequential and a Linear head: head(encoder(x)).
struct EncoderNetImpl : nn::Module {
  EncoderNetImpl()
      : encoder(register_module("encoder", mlp_encoder())),
        head(register_module("head", nn::Linear(8, 2))) {}
  at::Tensor forward(const at::Tensor& x) { return head(encoder->forward(x)); }
  nn::Sequential encoder;
  nn::Linear head;
};
TORCH_MODULE(EncoderNet);

/// An image and a token: relu(norm(mean of conv(pixels) over space) + embed(token)).
struct ImageTokenNetImpl : nn::Module {
  ImageTokenNetImpl()
      : conv(register_module("conv", nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)))),
        norm(register_module("norm", nn::LayerNorm(nn::LayerNormOptions({4})))),
        embed(register_module("embed", nn::Embedding(10, 4))) {}
  at::Tensor forward(const at::Tensor& pixels, const at::Tensor& token) {
    // One statement per layer: C++ leaves the order of `norm(a) + embed(b)`'s operands to the
    // compiler, and the graph records the order they ran in.
    const at::Tensor pooled = conv(pixels).mean({2, 3});
    const at::Tensor normed = norm(pooled);
    return torch::relu(normed + embed(token));
  }
  nn::Conv2d conv;
  nn::LayerNorm norm;
  nn::Embedding embed;
};
TORCH_MODULE(ImageTokenNet);

/// A pre-norm residual block: x + fc2(relu(fc1(norm(x)))).
struct ResidualBlockImpl : nn::Module {
  explicit ResidualBlockImpl(int64_t width)
      : norm(register_module("norm", nn::LayerNorm(nn::LayerNormOptions({width})))),
        fc1(register_module("fc1", nn::Linear(width, 2 * width))),
        fc2(register_module("fc2", nn::Linear(2 * width, width))) {}
  at::Tensor forward(const at::Tensor& x) { return x + fc2(torch::relu(fc1(norm(x)))); }
  nn::LayerNorm norm;
  nn::Linear fc1, fc2;
};
TORCH_MODULE(ResidualBlock);

/// One Linear applied twice, with ops between: lin(relu(lin(x)) * 0.5).
struct ReusedLinearImpl : nn::Module {
  ReusedLinearImpl() : lin(register_module("lin", nn::Linear(4, 4))) {}
  at::Tensor forward(const at::Tensor& x) { return lin(torch::relu(lin(x)) * 0.5); }
  nn::Linear lin;
};
TORCH_MODULE(ReusedLinear);

/// A conv whose feature maps are flattened with the batch size read as a C++ integer.
struct ConvHeadImpl : nn::Module {
  ConvHeadImpl()
      : conv(register_module("conv", nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)))),
        fc(register_module("fc", nn::Linear(4 * 4 * 4, 2))) {}
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor h = torch::relu(conv(x));
    return fc(h.reshape({h.size(0), -1}));
  }
  nn::Conv2d conv;
  nn::Linear fc;
};
TORCH_MODULE(ConvHead);

/// Discounted sums over the rows (a trajectory's steps), in a loop over x.size(0):
/// out[i] = v[i] + out[i + 1] * 0.9, v = fc(x); one op per statement, as in ImageTokenNet.
struct DiscountedReturnImpl : nn::Module {
  DiscountedReturnImpl() : fc(register_module("fc", nn::Linear(4, 1))) {}
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor v = fc(x);
    const int64_t steps = x.size(0);
    std::vector<at::Tensor> out(steps);
    out[steps - 1] = v[steps - 1];
    for (int64_t i = steps - 2; i >= 0; --i) {
      const at::Tensor discounted = out[i + 1] * 0.9;
      out[i] = v[i] + discounted;
    }
    return torch::stack(out);
  }
  nn::Linear fc;
};
TORCH_MODULE(DiscountedReturn);

/// Gates its input on the sign of its sum, read as a C++ number.
struct SignGateImpl : nn::Module {
  at::Tensor forward(const at::Tensor& x) {
    if (x.sum().item<float>() > 0) return torch::relu(x);
    return -x;
  }
};
TORCH_MODULE(SignGate);

/// A temporal-difference error against a target network, the target computed without
/// gradients: under a NoGradGuard, an InferenceMode, or (kDetach) by detaching its result.
enum class TargetBlock { kNoGradGuard, kInferenceMode, kDetach };
struct TdErrorImpl : nn::Module {
  explicit TdErrorImpl(TargetBlock block) : block(block) {}
  nn::Linear online = register_module("online", nn::Linear(4, 1));
  nn::Linear target = register_module("target", nn::Linear(4, 1));
  TargetBlock block;
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor t;
    if (block == TargetBlock::kNoGradGuard) {
      torch::NoGradGuard no_grad;
      t = target(x) * 0.99;
    } else if (block == TargetBlock::kInferenceMode) {
      c10::InferenceMode inference;
      t = target(x) * 0.99;
    } else {
      t = target(x).detach() * 0.99;
    }
    return (online(x) - t).pow(2);
  }
};
TORCH_MODULE(TdError);

/// A free function, passed to make_td_module as a function pointer.
at::Tensor squash(const at::Tensor& x) { return torch::tanh(x) * 2; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// The pipelines.

TEST_CASE("user pipelines: a Sequential encoder wrapped directly") {
  check_pipeline(
      {"sequential_encoder", make_td_module(mlp_encoder(), {"x"}, {"hidden"}), normal("x", {4})});
}

TEST_CASE("user pipelines: a Sequential encoder inside a user module") {
  check_pipeline(
      {"encoder_in_module", make_td_module(EncoderNet(), {"x"}, {"y"}), normal("x", {4})});
}

TEST_CASE("user pipelines: conv, layer norm and embedding in one module") {
  auto input = [](int64_t batch) {
    return TensorDict(
        {{"pixels", at::randn({batch, 3, 5, 5})}, {"token", at::randint(10, {batch}, at::kLong)}},
        {batch});
  };
  check_pipeline({"conv_norm_embedding",
                  make_td_module(ImageTokenNet(), {"pixels", "token"}, {"features"}), input});
}

TEST_CASE("user pipelines: a residual block between a Linear and a head") {
  auto pipeline = make_td_sequential({make_td_module(nn::Linear(3, 8), {"x"}, {"h"}),
                                      make_td_module(ResidualBlock(8), {"h"}, {"h"}),
                                      make_td_module(nn::Linear(8, 2), {"h"}, {"y"})});
  check_pipeline({"residual_block", pipeline, normal("x", {3})});
}

TEST_CASE("user pipelines: a leaf reused with ops between its calls") {
  check_pipeline({"leaf_reused", make_td_module(ReusedLinear(), {"x"}, {"y"}), normal("x", {4})});
}

TEST_CASE("user pipelines: a reshape by the batch size read as an integer") {
  auto pipeline = make_td_sequential(
      {make_td_module(ConvHead(), {"pixels"}, {"logits"}),
       make_td_module([](const at::Tensor& x) { return x.softmax(-1); }, {"logits"}, {"probs"})});
  // `x.reshape({x.size(0), -1})`: a constant 8 of the static graph; in a dynamic trace the
  // batch constant becomes `size = x.size(0)`, and the graph runs at any batch.
  check_pipeline({"reshape_by_batch", pipeline, normal("pixels", {3, 4, 4})});
}

TEST_CASE("user pipelines: a loop over the batch size read as an integer") {
  // The loop's length holds the batch size. Its first select, `v[steps - 1]`, is a size
  // expression (s0 - 1); at batch 1 the loop does not run, so the recordings part at the
  // loop's first op, %mul.
  check_pipeline(
      {"loop_over_batch", make_td_module(DiscountedReturn(), {"x"}, {"returns"}), normal("x", {4}),
       std::string("TensorDictModule(module=(anonymous namespace)::DiscountedReturnImpl, "
                   "in_keys=['x'], out_keys=['returns']): no dynamic batch: the "
                   "recordings at batch 8 and at batch 1 differ at %mul (another "
                   "op), so the pipeline branches or loops on the batch size "
                   "there; trace with a static batch (the default), or compute it "
                   "with tensor ops")});
}

TEST_CASE("user pipelines: a function pointer as a TensorDictModule") {
  auto pipeline = make_td_sequential(
      {make_td_module(nn::Linear(4, 3), {"x"}, {"h"}), make_td_module(&squash, {"h"}, {"y"})});
  check_pipeline({"function_pointer", pipeline, normal("x", {4})});
}

TEST_CASE("user pipelines: an actor-critic sharing a Sequential encoder") {
  auto encoder =
      make_td_module(nn::Sequential(nn::Linear(6, 16), nn::Tanh(), nn::Linear(16, 16), nn::Tanh()),
                     {"observation"}, {"hidden"});
  auto actor = make_td_module(nn::Sequential(nn::Linear(16, 4), NormalParamExtractor()), {"hidden"},
                              {"loc", "scale"});
  auto critic = make_td_module(nn::Linear(16, 1), {"hidden"}, {"state_value"});
  check_pipeline(
      {"actor_critic", make_td_sequential({encoder, actor, critic}), normal("observation", {6})});
}

TEST_CASE("user pipelines: a branch on a tensor's value is a TraceError") {
  auto pipeline = make_td_sequential(
      {make_td_module(nn::Linear(4, 4), {"x"}, {"h"}), make_td_module(SignGate(), {"h"}, {"y"})});
  CHECK_THROWS_WITH_AS(
      symbolic_trace(pipeline, normal("x", {4})(kTracedBatch)),
      "TensorDictModule(module=(anonymous namespace)::SignGateImpl, in_keys=['h'], "
      "out_keys=['y']) at '1': aten::item turns a traced tensor into a C++ value; symbolically "
      "traced variables cannot be used as inputs to control flow, and the graph would keep only "
      "what this trace saw. Compute it with tensor ops instead (at::where for a branch)",
      TraceError);
}

TEST_CASE("user pipelines: a block that switches grad mode in a forward is a TraceError") {
  // The program does not hold grad mode: its runs would train the target network.
  for (TargetBlock block : {TargetBlock::kNoGradGuard, TargetBlock::kInferenceMode}) {
    auto pipeline = make_td_module(TdError(block), {"x"}, {"loss"});
    CHECK_THROWS_WITH_AS(
        symbolic_trace(pipeline, normal("x", {4})(kTracedBatch)),
        "TensorDictModule(module=(anonymous namespace)::TdErrorImpl, in_keys=['x'], "
        "out_keys=['loss']): its forward switches autograd's grad mode (a NoGradGuard, "
        "AutoGradMode or InferenceMode around aten::t), which the traced program would not: its "
        "runs would compute gradients where the module computes none. Call .detach() on what "
        "such a block computes instead, update parameters in place (weight clipping) outside "
        "the traced forward, and for a forward that computes no gradients at all, switch the "
        "mode around the traced module's call instead. (torch::tensor({...}) switches it too, "
        "to write a tensor literal: make a literal a buffer (register_buffer) or build it with "
        "a recorded factory, at::arange or at::full)",
        TraceError);
  }
  // torch::tensor writes its literal under such a mode: the message says so.
  auto literal = make_td_module(
      [](const at::Tensor& x) {
        return x * torch::tensor({1.f, 2.f, 3.f, 4.f});
      },
      {"x"}, {"y"});
  CHECK_THROWS_WITH_AS(symbolic_trace(literal, normal("x", {4})(kTracedBatch)),
                       doctest::Contains("(torch::tensor({...}) switches it too, to write a "
                                         "tensor literal: make a literal a buffer"),
                       TraceError);
  // Detached instead, the target gets no gradient, traced as eager.
  TdError module(TargetBlock::kDetach);
  auto pipeline = make_td_module(module, {"x"}, {"loss"});
  const TensorDict input = normal("x", {4})(kTracedBatch);
  const TDGraphModule traced = symbolic_trace(pipeline, input);
  TensorDict work(input);
  traced.forward(work).get("loss").sum().backward();
  CHECK(!module->target->weight.grad().defined());
  REQUIRE(module->online->weight.grad().defined());
  const at::Tensor traced_grad = module->online->weight.grad().clone();
  module->online->weight.mutable_grad().reset();
  TensorDict eager(input);
  pipeline->forward(eager).get("loss").sum().backward();
  CHECK(module->online->weight.grad().equal(traced_grad));
  {
    // Traced under a NoGradGuard of the caller's, a guard inside switches nothing.
    torch::NoGradGuard no_grad;
    auto guarded = make_td_module(TdError(TargetBlock::kNoGradGuard), {"x"}, {"loss"});
    CHECK_NOTHROW(symbolic_trace(guarded, input));
  }
  // A traced module run under InferenceMode (acting, no gradients) computes as eager does.
  c10::InferenceMode inference;
  TensorDict acting(input);
  CHECK(traced.forward(acting).get("loss").equal(eager.get("loss")));
}

TEST_CASE("user pipelines: an input contiguous when traced and not when run") {
  // contiguous() of a contiguous tensor does not dispatch: the recording holds no copy.
  const at::Tensor traced_x = at::randn({kTracedBatch, 3, 2});
  const TensorDict example({{"x", traced_x}}, {kTracedBatch});
  const at::Tensor strided = at::randn({kTracedBatch, 2, 3}).transpose(1, 2);
  REQUIRE(!strided.is_contiguous());
  {
    // Made contiguous first, as the module's contiguous() would: the view works as in eager.
    auto flatten = make_td_module(
        [](const at::Tensor& x) {
          return x.contiguous().view({x.size(0), -1}) + 1;
        },
        {"x"}, {"y"});
    const TDGraphModule traced = symbolic_trace(flatten, example);
    TensorDict input({{"x", strided}}, {kTracedBatch});
    const at::Tensor before = strided.clone();
    CHECK(traced.run(input)[0].equal(strided.contiguous().view({kTracedBatch, -1}) + 1));
    CHECK(strided.equal(before));
  }
  // Written in place after contiguous().
  auto bump = make_td_module(
      [](const at::Tensor& x) {
        at::Tensor y = x.contiguous();
        y.add_(1);
        return y * 2;
      },
      {"x"}, {"y"});
  {
    // A copy would leave the caller's tensor unwritten where the module writes it, and running
    // it as it is would write it where the module writes a copy; the recording cannot tell
    // which, so the run is refused.
    const TDGraphModule traced = symbolic_trace(bump, example);
    TensorDict input({{"x", strided}}, {kTracedBatch});
    CHECK_THROWS_WITH_AS(traced.run(input),
                         "input 'x' is not contiguous, and was when traced; the program writes "
                         "into it, so it cannot be copied contiguous first as a contiguous() in "
                         "the module would have copied it (which a recording cannot see for a "
                         "contiguous tensor): make it contiguous before the call, or trace "
                         "with a non-contiguous example",
                         ShapeError);
    const at::Tensor x = at::randn({kTracedBatch, 3, 2});
    TensorDict contiguous_input({{"x", x.clone()}}, {kTracedBatch});
    CHECK(traced.run(contiguous_input)[0].equal((x + 1) * 2));
  }
  {
    // Traced with a non-contiguous example, contiguous() is recorded: inputs run as they come.
    const TDGraphModule traced =
        symbolic_trace(bump, TensorDict({{"x", strided.clone()}}, {kTracedBatch}));
    const at::Tensor before = strided.clone();
    TensorDict input({{"x", strided}}, {kTracedBatch});
    CHECK(traced.run(input)[0].equal((before + 1) * 2));
    CHECK(strided.equal(before));
  }
}

TEST_CASE("user pipelines: a trace inside a forward being traced is refused") {
  auto inner = make_td_module(nn::Linear(4, 4), {"x"}, {"h"});
  const TensorDict input = normal("x", {4})(kTracedBatch);
  auto tracing = make_td_module(
      [&](const at::Tensor& x) {
        return symbolic_trace(inner, TensorDict({{"x", x}}, {x.size(0)}))
            .run(TensorDict({{"x", x}}, {x.size(0)}))[0];
      },
      {"x"}, {"y"});
  CHECK_THROWS_WITH_AS(symbolic_trace(tracing, input),
                       "a trace was started while another trace records on this thread (code "
                       "being traced called symbolic_trace or export_program): the outer trace "
                       "would not see the ops the inner one records. Trace each pipeline on its "
                       "own, outside the other's forward",
                       TraceError);
}

TEST_CASE("user pipelines: a value read in a wrapped layer's forward names the layer") {
  // BatchNorm1d's forward is its template base's, compiled into this binary, where no frame
  // name tells it; with a cumulative average (no momentum) in training it reads
  // num_batches_tracked as a double.
  nn::BatchNorm1d norm(nn::BatchNorm1dOptions(4).momentum(c10::nullopt));
  auto pipeline = make_td_module(norm, {"x"}, {"y"});
  CHECK_THROWS_WITH_AS(
      symbolic_trace(pipeline, normal("x", {4})(kTracedBatch)),
      "TensorDictModule(module=torch::nn::BatchNorm1d(4, eps=1e-05, momentum=None, affine=true, "
      "track_running_stats=true), in_keys=['x'], out_keys=['y']): LibTorch's 'module' "
      "(BatchNorm1d) turns a traced tensor into a C++ value (aten::item) in its forward; tdfx "
      "guards only the query/key/value comparisons of attention. Call its ops in a module of "
      "your own instead",
      TraceError);
}

TEST_CASE("user pipelines: a parameter's .data() read in a forward is named as the parameter's") {
  struct ClipImpl : nn::Module {
    nn::Linear linear = register_module("linear", nn::Linear(4, 4));
    at::Tensor forward(const at::Tensor& x) {
      linear->weight.data().clamp_(-0.1, 0.1);  // weight clipping, as written in Python
      return linear(x);
    }
  };
  auto pipeline = make_td_module(std::make_shared<ClipImpl>(), {"x"}, {"y"});
  CHECK_THROWS_WITH_AS(symbolic_trace(pipeline, normal("x", {4})(kTracedBatch)),
                       doctest::Contains("that shares the storage of 'linear.weight': its "
                                         ".data(), or a tensor made from it without an op the "
                                         "dispatcher sees"),
                       TraceError);
}

TEST_CASE("user pipelines: a layer given one value in each place is called with it in each") {
  // torch.fx prints self.attn(x, x, x): the recording sees one input, the call passes three.
  struct SelfAttentionImpl : nn::Module {
    nn::MultiheadAttention attn =
        register_module("attn", nn::MultiheadAttention(nn::MultiheadAttentionOptions(4, 2)));
    nn::Bilinear bl = register_module("bl", nn::Bilinear(4, 4, 3));
    at::Tensor forward(const at::Tensor& x) {
      const at::Tensor sequence = x.unsqueeze(0);
      const at::Tensor attended = std::get<0>(attn(sequence, sequence, sequence)).squeeze(0);
      return bl(attended, attended);
    }
  };
  auto pipeline = make_td_module(std::make_shared<SelfAttentionImpl>(), {"x"}, {"y"});
  const TensorDict input = normal("x", {4})(kTracedBatch);
  const TDGraphModule traced = symbolic_trace(pipeline, input);
  const std::string code = traced.code();
  CHECK(code.find("self.attn(unsqueeze, unsqueeze, unsqueeze)") != std::string::npos);
  CHECK(code.find("self.bl(squeeze, squeeze)") != std::string::npos);
  // The view runs as printed, the program as recorded: both as eager.
  TensorDict eager(input);
  pipeline->forward(eager);
  CHECK(traced.run(input)[0].equal(eager.get("y")));
  const auto view_out = traced.graph_module().run(traced.graph_inputs(input));
  CHECK(view_out[0].toTensor().equal(eager.get("y")));
  // Lowered again from the view (an edit's recompile), it inlines each call as printed.
  TDGraphModule edited = symbolic_trace(pipeline, input);
  edited.mutable_graph();
  edited.recompile();
  CHECK(edited.run(input)[0].equal(eager.get("y")));
}

TEST_CASE("user pipelines: a key that is a strided view of a key written in place is refused") {
  // "b" is a narrow() of "a", which the first module doubles in place: eager's b sees the
  // write. The traced module takes b contiguous (as its example's copy was), and a copy would
  // not see it: refused by name, where the program would have read b as it was.
  const auto seq = samples::doubles_a_then_sums_b();
  auto aliased = [](bool contiguous_view) {
    const at::Tensor x = at::arange(20, at::kFloat).view({5, 4});
    return TensorDict({{"a", x}, {"b", contiguous_view ? x.view({5, 2, 2}) : x.narrow(1, 0, 2)}},
                      {5});
  };
  const TDGraphModule traced = symbolic_trace(seq, aliased(false));
  TensorDict work = aliased(false);
  CHECK_THROWS_WITH_AS(traced.forward(work),
                       "input 'b' is not contiguous and shares memory with input 'a', which the "
                       "program writes into: copied contiguous, as the program takes it, it "
                       "would not see that write; pass it contiguous, or as a copy of its own "
                       "(clone())",
                       ShapeError);
  // A contiguous view needs no copy: the program sees the write as eager does.
  const TDGraphModule viewed = symbolic_trace(seq, aliased(true));
  TensorDict eager = aliased(true), run = aliased(true);
  seq->forward(eager);
  viewed.forward(run);
  CHECK(at::equal(run.get("y"), eager.get("y")));
}
