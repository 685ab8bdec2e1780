#include "tdfx/debug/watch.h"

#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/stack.h>
#include <torch/nn/module.h>

#include <cmath>

#include "tdfx/core/error.h"
#include "tdfx/debug/tensorboard.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx {

namespace {

// A TensorBoard tag for a module path and key: `<module>/<key>`, the root module as `module`.
std::string tag_of(const std::string& path, const NestedKey& key) {
  return (path.empty() ? std::string("module") : path) + "/" + key.joined(".");
}

}  // namespace

Watch::Watch(std::shared_ptr<TensorDictModuleBase> module, WatchOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  if (!module_) fail<Error>("Watch: the module is null");
  if (options_.interval < 1) {
    fail<Error>("Watch: interval {}: statistics are taken every N steps, N at least 1",
                options_.interval);
  }
  if (options_.histogram_interval < 0) {
    fail<Error>("Watch: histogram_interval {}: give 0 (no histograms) or more",
                options_.histogram_interval);
  }
  if (options_.spike_sigmas < 0 || (options_.spike_sigmas > 0 && options_.spike_window < 2)) {
    fail<Error>(
        "Watch: a spike check needs spike_sigmas > 0 and a spike_window of 2 or more "
        "(got {} and {})",
        options_.spike_sigmas, options_.spike_window);
  }
  detail::walk_pipeline(*module_, "",
                        [&](const TensorDictModuleBase& m, const detail::PipelinePlace& place) {
                          if (dynamic_cast<const TensorDictModule*>(&m)) {
                            modules_.push_back({place.path, m.out_keys()});
                          }
                        });
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    parameters_.emplace_back(item.key(), item.value());
  }
  if (!options_.logdir.empty()) log_ = std::make_unique<EventFileWriter>(options_.logdir);
}

Watch::~Watch() = default;

std::string Watch::log_path() const { return log_ ? log_->path() : std::string(); }

void Watch::record(int64_t step, const std::string& tag, double value) {
  records_.push_back({step, tag, value});
  if (log_) log_->add_scalar(tag, value, step);
}

void Watch::histogram(int64_t step, const std::string& tag, const at::Tensor& values) {
  if (log_) log_->add_histogram(tag, values, step);
}

WatchCheck Watch::check(int64_t step, const at::Tensor& loss) {
  if (!loss.defined() || loss.numel() != 1) {
    fail<Error>("Watch::observe(step {}): the loss must be a tensor of one element{}", step,
                loss.defined() ? fmt::format(", not of shape {}", loss.sizes()) : "");
  }
  // One reduction: the loss beside every gradient's norm.
  std::vector<at::Tensor> grads;
  std::vector<size_t> owners;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const at::Tensor& grad = parameters_[i].second.grad();
    if (grad.defined() && grad.numel() > 0 && !grad.is_complex()) {
      grads.push_back(grad);
      owners.push_back(i);
    }
  }
  at::Tensor values = loss.detach().reshape({1}).to(at::kDouble);
  at::Tensor norms;
  if (!grads.empty()) {
    norms = at::stack(at::_foreach_norm(grads)).to(at::kDouble);
    values = at::cat({values, norms});
  }
  const double loss_value = values[0].item<double>();
  WatchCheck out;
  if (!at::isfinite(values).all().item<bool>()) {
    out.bad = true;
    if (!std::isfinite(loss_value)) {
      out.why = fmt::format("the loss is {}", loss_value);
    } else {
      const at::Tensor finite = at::isfinite(norms);
      for (int64_t i = 0; i < finite.numel(); ++i) {
        if (!finite[i].item<bool>()) {
          out.why = fmt::format("the gradient of {} holds NaN or Inf",
                                parameters_[owners[static_cast<size_t>(i)]].first);
          break;
        }
      }
    }
  } else if (options_.spike_sigmas > 0) {
    const auto n = static_cast<double>(recent_losses_.size());
    if (recent_losses_.size() == static_cast<size_t>(options_.spike_window)) {
      double mean = 0, squares = 0;
      for (const double l : recent_losses_) mean += l;
      mean /= n;
      for (const double l : recent_losses_) squares += (l - mean) * (l - mean);
      const double sd = std::sqrt(squares / (n - 1));
      if (std::abs(loss_value - mean) > options_.spike_sigmas * sd) {
        out.bad = true;
        out.why = fmt::format(
            "the loss {:.4g} is {:.1f} standard deviations from the mean {:.4g} of the last {} "
            "losses",
            loss_value, sd > 0 ? std::abs(loss_value - mean) / sd : INFINITY, mean,
            recent_losses_.size());
      }
    }
    if (!out.bad) {
      recent_losses_.push_back(loss_value);
      if (recent_losses_.size() > static_cast<size_t>(options_.spike_window)) {
        recent_losses_.pop_front();
      }
    }
  }
  return out;
}

void Watch::record_update_ratios() {
  if (before_step_ < 0) return;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const at::Tensor& before = before_update_[i];
    const at::Tensor now = parameters_[i].second.detach();
    const double norm = before.norm().item<double>();
    const double change = (now - before).norm().item<double>();
    record(before_step_, "update_ratio/" + parameters_[i].first,
           norm > 0 ? change / norm : (change > 0 ? INFINITY : 0.0));
  }
  before_update_.clear();
  before_step_ = -1;
}

void Watch::record_statistics(int64_t step, const TensorDict& td, bool histograms) {
  for (const Watched& watched : modules_) {
    for (const NestedKey& key : watched.keys) {
      if (!td.contains(key)) continue;
      const at::Tensor value = td.get(key).detach();
      if (!value.is_floating_point() || value.numel() == 0) continue;
      const std::string tag = tag_of(watched.path, key);
      const at::Tensor finite = at::masked_select(value, at::isfinite(value)).to(at::kDouble);
      record(step, "activation_nonfinite/" + tag,
             static_cast<double>(value.numel() - finite.numel()));
      if (finite.numel() > 0) {
        record(step, "activation_mean/" + tag, finite.mean().item<double>());
        record(step, "activation_std/" + tag,
               finite.numel() > 1 ? finite.std().item<double>() : 0.0);
        record(step, "activation_min/" + tag, finite.min().item<double>());
        record(step, "activation_max/" + tag, finite.max().item<double>());
      }
      if (histograms) histogram(step, "activations/" + tag, value);
    }
  }
  for (const auto& [path, parameter] : parameters_) {
    const at::Tensor& grad = parameter.grad();
    if (grad.defined()) record(step, "grad_norm/" + path, grad.norm().item<double>());
    record(step, "weight_norm/" + path, parameter.detach().norm().item<double>());
    if (histograms) {
      if (grad.defined()) histogram(step, "gradients/" + path, grad);
      histogram(step, "weights/" + path, parameter.detach());
    }
  }
  // The weights before this step's update: its ratio is recorded when the next step comes.
  before_update_.clear();
  for (const auto& item : parameters_) before_update_.push_back(item.second.detach().clone());
  before_step_ = step;
}

WatchCheck Watch::observe(int64_t step, const TensorDict& td, const at::Tensor& loss) {
  // The update of the last sampled step has been made: its ratio.
  record_update_ratios();
  WatchCheck verdict = check(step, loss);
  const bool sampled = step % options_.interval == 0;
  if (sampled || verdict.bad) {
    record(step, "loss", loss.detach().to(at::kDouble).item<double>());
    const bool histograms =
        options_.histogram_interval > 0 && step % options_.histogram_interval == 0;
    record_statistics(step, td, histograms);
  }
  if (verdict.bad && !first_bad_) {
    first_bad_ = step;
    record(step, "first_bad_step", static_cast<double>(step));
  }
  return verdict;
}

}  // namespace tdfx
