// Programs exported from the common torch::nn layers save, load and run as they were exported:
// every operator their recording holds is on the allowlist of export/op_policy.cpp.
#include <doctest/doctest.h>
#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/rnn.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/tensordict/modules.h"

using namespace tdfx;
namespace nn = torch::nn;

namespace {

struct LayerProgram {
  std::string name;
  TensorDictModuleBasePtr module;
  at::Tensor x;
};

template <typename Layer>
LayerProgram layer(const std::string& name, Layer layer, at::Tensor x, bool train = false) {
  layer->train(train);
  return {name, make_td_module(layer, {"x"}, {"y"}), std::move(x)};
}

// A recurrent layer's output alone (LSTM and GRU return a tuple).
template <typename Layer>
struct RecurrentOutput : nn::Module {
  explicit RecurrentOutput(Layer layer) : layer(register_module("layer", layer)) {}
  at::Tensor forward(const at::Tensor& x) { return std::get<0>(layer->forward(x)); }
  Layer layer;
};

template <typename Layer>
LayerProgram recurrent(const std::string& name, Layer layer, at::Tensor x) {
  return {name, make_td_module(std::make_shared<RecurrentOutput<Layer>>(layer), {"x"}, {"y"}),
          std::move(x)};
}

std::vector<LayerProgram> layer_programs() {
  at::manual_seed(0);
  const at::Tensor image = at::randn({2, 3, 8, 8});
  const at::Tensor sequence = at::randn({2, 5, 4});
  return {
      layer("Linear", nn::Linear(4, 3), at::randn({2, 4})),
      layer("Conv1d", nn::Conv1d(5, 2, 3), sequence),
      layer("Conv2d", nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)), image),
      layer("Conv2d reflect",
            nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1).padding_mode(torch::kReflect)), image),
      layer("Conv2d circular",
            nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1).padding_mode(torch::kCircular)),
            image),
      layer("ConvTranspose2d", nn::ConvTranspose2d(3, 2, 2), image),
      layer("BatchNorm2d eval", nn::BatchNorm2d(3), image),
      layer("BatchNorm2d train", nn::BatchNorm2d(3), image, true),
      layer("LayerNorm", nn::LayerNorm(nn::LayerNormOptions({4})), sequence),
      layer("GroupNorm", nn::GroupNorm(1, 3), image),
      layer("InstanceNorm2d", nn::InstanceNorm2d(3), image),
      layer("Embedding", nn::Embedding(10, 3), at::randint(10, {2, 4})),
      layer("EmbeddingBag", nn::EmbeddingBag(10, 3), at::randint(10, {2, 4})),
      layer("MaxPool2d", nn::MaxPool2d(2), image),
      layer("AvgPool2d", nn::AvgPool2d(2), image),
      layer("AdaptiveAvgPool2d", nn::AdaptiveAvgPool2d(1), image),
      layer("Dropout eval", nn::Dropout(0.5), image),
      layer("PReLU", nn::PReLU(), image),
      layer("GELU", nn::GELU(), image),
      layer("Softplus", nn::Softplus(), image),
      layer("ELU", nn::ELU(), image),
      layer("SiLU", nn::SiLU(), image),
      layer("LeakyReLU", nn::LeakyReLU(), image),
      layer("Hardtanh", nn::Hardtanh(), image),
      layer("Flatten", nn::Flatten(), image),
      recurrent("LSTM", nn::LSTM(nn::LSTMOptions(4, 3).batch_first(true)), sequence),
      recurrent("GRU", nn::GRU(nn::GRUOptions(4, 3).batch_first(true)), sequence),
      recurrent("RNN", nn::RNN(nn::RNNOptions(4, 3).batch_first(true)), sequence),
  };
}

}  // namespace

TEST_CASE("layers: each common layer's program saves, loads and runs as exported") {
  for (const LayerProgram& p : layer_programs()) {
    CAPTURE(p.name);
    const ExportedProgram program = export_program(p.module, {{"x", p.x}});
    const std::vector<at::Tensor> expected = program.module()({{"x", p.x}});
    std::optional<ExportedProgram> loaded;
    try {
      loaded.emplace(load_bytes(archive_bytes(program), p.name + ".pt2"));
    } catch (const Error& e) {
      FAIL_CHECK(std::string(e.what()));
      continue;
    }
    const std::vector<at::Tensor> actual = loaded->module()({{"x", p.x}});
    REQUIRE(actual.size() == expected.size());
    for (size_t i = 0; i < actual.size(); ++i) CHECK(actual[i].equal(expected[i]));
  }
}
