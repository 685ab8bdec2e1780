#pragma once

/// \file
/// NormalParamExtractor: splits the last dimension into the loc and (positive) scale of a
/// normal distribution, as tensordict.nn.NormalParamExtractor.

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <ostream>
#include <string>
#include <tuple>

namespace tdfx {

/// Options of NormalParamExtractor.
struct NormalParamExtractorOptions {
  /// How the second half becomes a positive scale: "biased_softplus_<bias>" (default
  /// "biased_softplus_1.0"), "biased_softplus_<bias>_<min_val>", "softplus", "exp", "relu"
  /// or "none".
  TORCH_ARG(std::string, scale_mapping) = "biased_softplus_1.0";
  /// Lower bound of the scale (`clamp_min`).
  TORCH_ARG(double, scale_lb) = 1e-4;
};

/// `loc, scale = x.chunk(2, -1); scale = mapping(scale).clamp_min(scale_lb)`.
///
/// biased_softplus with bias B and min_val m (default 0.01) is `softplus(x + b) + m` with
/// `b = log(expm1(B - m))` computed in float32: 0.5254586935043335 for B = 1.
class NormalParamExtractorImpl : public torch::nn::Module {
 public:
  /// Parses the mapping; tdfx::Error listing the accepted ones when unknown.
  explicit NormalParamExtractorImpl(NormalParamExtractorOptions options = {});

  /// Returns (loc, scale), each half of `x`'s last dimension.
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x);
  /// The scale mapping alone, before clamp_min.
  at::Tensor map_scale(const at::Tensor& x) const;

  /// The options it was built with.
  const NormalParamExtractorOptions& options() const { return options_; }
  /// The bias `b` added before softplus (biased_softplus only).
  double bias() const { return bias_; }
  /// The minimum added after softplus (biased_softplus only).
  double min_val() const { return min_val_; }
  /// Prints `NormalParamExtractor(scale_mapping=..., scale_lb=...)`.
  void pretty_print(std::ostream& stream) const override;

 private:
  enum class Mapping { kBiasedSoftplus, kSoftplus, kExp, kRelu, kNone };

  NormalParamExtractorOptions options_;
  Mapping mapping_ = Mapping::kBiasedSoftplus;
  double bias_ = 0.0;
  double min_val_ = 0.0;
};

/// Holder of NormalParamExtractorImpl: `NormalParamExtractor()` or
/// `NormalParamExtractor(NormalParamExtractorOptions().scale_mapping("exp"))`.
TORCH_MODULE(NormalParamExtractor);

}  // namespace tdfx
