#include "tdfx/tensordict/normal_param_extractor.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"

namespace tdfx {
namespace {

constexpr std::string_view kBiasedSoftplusPrefix = "biased_softplus_";

[[noreturn]] void unknown_mapping(const std::string& name) {
  fail<Error>(
      "NormalParamExtractor: unknown scale_mapping '{}'; accepted: 'biased_softplus_<bias>', "
      "'biased_softplus_<bias>_<min_val>', 'softplus', 'exp', 'relu', 'none'",
      name);
}

double parse_number(const std::string& text, const std::string& mapping) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    unknown_mapping(mapping);
  }
  if (used != text.size()) unknown_mapping(mapping);
  return value;
}

}  // namespace

NormalParamExtractorImpl::NormalParamExtractorImpl(NormalParamExtractorOptions options)
    : torch::nn::Module("NormalParamExtractor"), options_(std::move(options)) {
  const std::string& name = options_.scale_mapping();
  if (name == "softplus") {
    mapping_ = Mapping::kSoftplus;
  } else if (name == "exp") {
    mapping_ = Mapping::kExp;
  } else if (name == "relu") {
    mapping_ = Mapping::kRelu;
  } else if (name == "none") {
    mapping_ = Mapping::kNone;
  } else if (name.compare(0, kBiasedSoftplusPrefix.size(), kBiasedSoftplusPrefix) == 0) {
    mapping_ = Mapping::kBiasedSoftplus;
    const std::string rest = name.substr(kBiasedSoftplusPrefix.size());
    const size_t sep = rest.find('_');
    const double bias = parse_number(rest.substr(0, sep), name);
    min_val_ = sep == std::string::npos ? 0.01 : parse_number(rest.substr(sep + 1), name);
    // tensordict computes the inverse softplus on a float32 tensor; so do we, for equal numbers.
    bias_ =
        at::scalar_tensor(bias - min_val_, at::kFloat).expm1().clamp_min(1e-6).log().item<double>();
  } else {
    unknown_mapping(name);
  }
}

at::Tensor NormalParamExtractorImpl::map_scale(const at::Tensor& x) const {
  switch (mapping_) {
    case Mapping::kBiasedSoftplus:
      return at::softplus(x + bias_, 1, 20) + min_val_;
    case Mapping::kSoftplus:
      return at::softplus(x, 1, 20);
    case Mapping::kExp:
      return x.exp();
    case Mapping::kRelu:
      return x.relu();
    case Mapping::kNone:
      return x;
  }
  return x;
}

std::tuple<at::Tensor, at::Tensor> NormalParamExtractorImpl::forward(const at::Tensor& x) {
  std::vector<at::Tensor> parts = x.chunk(2, -1);
  return {parts[0], map_scale(parts[1]).clamp_min(options_.scale_lb())};
}

void NormalParamExtractorImpl::pretty_print(std::ostream& stream) const {
  stream << "NormalParamExtractor(scale_mapping=" << python_repr(options_.scale_mapping())
         << ", scale_lb=" << python_float_repr(options_.scale_lb()) << ")";
}

}  // namespace tdfx
