#pragma once
// The pipelines of seed 002 ("Tracing TensorDictModule"), in C++. Shared by the
// samples and the tests.

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include "tdfx/tensordict/modules.h"

namespace tdfx::samples {

/// Seed 002's first Net: one Linear, returns (logits, sigmoid(logits)).
struct LogitsNetImpl : torch::nn::Module {
  LogitsNetImpl() { linear = register_module("linear", torch::nn::Linear(100, 1)); }
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x) {
    at::Tensor logits = linear(x);
    return {logits, at::sigmoid(logits)};
  }
  torch::nn::Linear linear{nullptr};
};
TORCH_MODULE(LogitsNet);

/// Seed 002's second Net: relu(fc1(x)) then fc2.
struct NetImpl : torch::nn::Module {
  NetImpl(int64_t input_size = 100, int64_t hidden_size = 50, int64_t output_size = 10) {
    fc1 = register_module("fc1", torch::nn::Linear(input_size, hidden_size));
    fc2 = register_module("fc2", torch::nn::Linear(hidden_size, output_size));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2(at::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

/// Seed 002's Masker: softmax(x * mask, dim=1).
struct MaskerImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask) {
    return at::softmax(x * mask, 1);
  }
};
TORCH_MODULE(Masker);

/// relu(fc(x)).
struct FCImpl : torch::nn::Module {
  FCImpl(int64_t in, int64_t out) { fc = register_module("fc", torch::nn::Linear(in, out)); }
  at::Tensor forward(const at::Tensor& x) { return at::relu(fc(x)); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(FC);

/// softmax(fc(x), dim=1).
struct OutputImpl : torch::nn::Module {
  OutputImpl(int64_t in, int64_t out) { fc = register_module("fc", torch::nn::Linear(in, out)); }
  at::Tensor forward(const at::Tensor& x) { return at::softmax(fc(x), 1); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Output);

/// TensorDictModule(Net(), in_keys=["input"], out_keys=[("outputs", "logits"), ("outputs",
/// "probabilities")]).
inline TensorDictModulePtr seed_module() {
  return make_td_module(LogitsNet(), {"input"},
                        {{"outputs", "logits"}, {"outputs", "probabilities"}});
}

/// TensorDictSequential(net, masker) of seed 002.
inline std::shared_ptr<TensorDictSequential> seed_sequential() {
  auto net = make_td_module(Net(), {{"input", "x"}}, {{"intermediate", "x"}});
  auto masker = make_td_module(Masker(), {{"intermediate", "x"}, {"input", "mask"}},
                               {{"output", "probabilities"}});
  return std::make_shared<TensorDictSequential>(std::vector<TensorDictModuleBasePtr>{net, masker});
}

/// Seq(Seq(FC(100, 50) "input"→"x", FC(50, 40) "x"→"x"), Output(40, 10) "x"→"probabilities").
inline std::shared_ptr<TensorDictSequential> nested_sequential() {
  auto inner = std::make_shared<TensorDictSequential>(std::vector<TensorDictModuleBasePtr>{
      make_td_module(FC(100, 50), {"input"}, {"x"}), make_td_module(FC(50, 40), {"x"}, {"x"})});
  return std::make_shared<TensorDictSequential>(std::vector<TensorDictModuleBasePtr>{
      inner, make_td_module(Output(40, 10), {"x"}, {"probabilities"})});
}

/// Random inputs for the three pipelines, batch 32.
inline TensorDict seed_module_input() {
  return TensorDict({{"input", at::randn({32, 100})}}, {32});
}
inline TensorDict seed_sequential_input() {
  return TensorDict({{{"input", "x"}, at::randn({32, 100})},
                     {{"input", "mask"}, at::randint(0, 2, {32, 10}).to(at::kFloat)}},
                    {32});
}
inline TensorDict nested_sequential_input() { return seed_module_input(); }

}  // namespace tdfx::samples

namespace tdfx::samples {

/// Seed 000's model: Linear(3, 4) "x"→"hidden", ReLU, Linear(4, 4) →"latent",
/// NormalParamExtractor →"loc", "scale".
inline std::shared_ptr<TensorDictSequential> seed_000_model() {
  return make_td_sequential({
      make_td_module(torch::nn::Linear(3, 4), {"x"}, {"hidden"}),
      make_td_module(torch::nn::ReLU(), {"hidden"}, {"hidden"}),
      make_td_module(torch::nn::Linear(4, 4), {"hidden"}, {"latent"}),
      make_td_module(NormalParamExtractor(), {"latent"}, {"loc", "scale"}),
  });
}

/// Seed 000's nested-key model: ("some", "key") + 1 → "hidden", - 1 → ("some", "output"),
/// with ("some", "output") selected.
inline std::shared_ptr<TensorDictSequential> seed_000_nested_model() {
  auto model = make_td_sequential({
      make_td_module([](const at::Tensor& x) { return x + 1; }, {{"some", "key"}}, {"hidden"}),
      make_td_module([](const at::Tensor& x) { return x - 1; }, {"hidden"}, {{"some", "output"}}),
  });
  model->select_out_keys(NestedKey{"some", "output"});
  return model;
}

}  // namespace tdfx::samples

namespace tdfx::samples {

/// An actor-critic pipeline with nested sequentials and shared keys, the README's diagrams:
/// an encoder (Linear, ReLU, BatchNorm1d: buffers) writing "hidden" three times, an actor
/// reading it (Linear, NormalParamExtractor) into ("agent", "loc"/"scale"), a critic reading
/// it too, and a masked action. In eval mode, so that BatchNorm uses its running statistics.
inline std::shared_ptr<TensorDictSequential> actor_critic() {
  auto encoder = make_td_sequential({
      make_td_module(torch::nn::Linear(8, 32), {"observation"}, {"hidden"}),
      make_td_module(torch::nn::ReLU(), {"hidden"}, {"hidden"}),
      make_td_module(torch::nn::BatchNorm1d(32), {"hidden"}, {"hidden"}),
  });
  auto actor = make_td_sequential({
      make_td_module(torch::nn::Linear(32, 4), {"hidden"}, {{"agent", "logits"}}),
      make_td_module(NormalParamExtractor(), {{"agent", "logits"}},
                     {{"agent", "loc"}, {"agent", "scale"}}),
  });
  auto critic = make_td_module(torch::nn::Linear(32, 1), {"hidden"}, {{"critic", "value"}});
  auto masked =
      make_td_module([](const at::Tensor& loc, const at::Tensor& mask) { return loc * mask; },
                     {{"agent", "loc"}, {"agent", "mask"}}, {{"agent", "action"}});
  auto pipeline = make_td_sequential({encoder, actor, critic, masked});
  pipeline->eval();
  return pipeline;
}

/// Random inputs for actor_critic, batch 16.
inline TensorDict actor_critic_input() {
  return TensorDict({{"observation", at::randn({16, 8})},
                     {{"agent", "mask"}, at::randint(0, 2, {16, 2}).to(at::kFloat)}},
                    {16});
}

}  // namespace tdfx::samples

namespace tdfx::samples {

// The gradient debugging example (README, samples/grad_debug.cpp, tests/debug).

/// An RMS normaliser with its epsilon outside the sqrt: x / (sqrt(mean(x²)) + eps) * gain.
/// A row of zeros gives a finite forward and a NaN gradient: sqrt's derivative at 0 is Inf.
struct RmsNormImpl : torch::nn::Module {
  RmsNormImpl() : gain(register_parameter("gain", at::ones({4}))) {}
  at::Tensor forward(const at::Tensor& x) {
    return x / (at::sqrt(x.pow(2).mean(-1, true)) + 1e-6) * gain;
  }
  at::Tensor gain;
};
TORCH_MODULE(RmsNorm);

/// A Linear, the RMS normaliser and a Linear head: "obs" → "hidden" → "normed" → "action".
inline std::shared_ptr<TensorDictSequential> rms_pipeline() {
  at::manual_seed(0);
  return make_td_sequential({make_td_module(torch::nn::Linear(3, 4), {"obs"}, {"hidden"}),
                             make_td_module(RmsNorm(), {"hidden"}, {"normed"}),
                             make_td_module(torch::nn::Linear(4, 2), {"normed"}, {"action"})});
}

/// An input for rms_pipeline, batch 3, whose row 1 is zero; the first Linear's bias is zeroed
/// too, so that "hidden" row 1 is zero and its gradient NaN.
inline TensorDict rms_input(const TensorDictSequential& pipeline) {
  {
    torch::NoGradGuard no_grad;
    for (auto& item : pipeline.named_parameters(true)) {
      if (item.key().find("0.module.bias") != std::string::npos) item.value().zero_();
    }
  }
  at::Tensor obs = at::randn({3, 3});
  obs[1].zero_();
  return TensorDict({{"obs", obs}}, {3});
}

/// Doubles "a" in place (→ "s", its row sums), then sums "b" (→ "y"): given a "b" that is a view
/// of "a", eager's "b" sees the write.
inline std::shared_ptr<TensorDictSequential> doubles_a_then_sums_b() {
  return make_td_sequential(
      {make_td_module(
           [](const at::Tensor& a) {
             a.mul_(2);
             return a.sum(1);
           },
           {"a"}, {"s"}),
       make_td_module([](const at::Tensor& b) { return b.sum(1); }, {"b"}, {"y"})});
}

}  // namespace tdfx::samples
