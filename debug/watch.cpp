#include "tdfx/debug/watch.h"

#include <fmt/format.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "tdfx/core/error.h"
#include "tdfx/debug/moments.h"
#include "tdfx/debug/tensorboard.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx {

namespace {

// A watch with a spike check takes a loss's spread as at least this much of its mean.
constexpr double kSpikeFloor = 1e-4;

// The values a gradient stores: a sparse one's (coalesced), a strided one itself. Its norm
// and its NaN or Inf are those of these values.
at::Tensor stored_values(const at::Tensor& t) {
  if (!t.defined()) return t;
  if (t.is_sparse()) return t.coalesce()._values();
  if (t.layout() != c10::kStrided) return t.to_dense();
  return t;
}

}  // namespace

std::string detail::watch_key_tag(const std::string& path, const NestedKey& key) {
  return (path.empty() ? std::string("module") : path) + "/" + key.joined(".");
}

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
  if (options_.histogram_interval > 0 && options_.histogram_interval % options_.interval != 0) {
    fail<Error>(
        "Watch: histogram_interval {} is not a multiple of interval {}: histograms are taken "
        "with the statistics, at steps divisible by both",
        options_.histogram_interval, options_.interval);
  }
  if (!(options_.spike_sigmas >= 0) || (options_.spike_sigmas > 0 && options_.spike_window < 2)) {
    fail<Error>(
        "Watch: a spike check needs spike_sigmas > 0 and a spike_window of 2 or more "
        "(got {} and {})",
        options_.spike_sigmas, options_.spike_window);
  }
  detail::walk_pipeline(*module_, "",
                        [&](const TensorDictModuleBase& m, const detail::PipelinePlace& place) {
                          if (dynamic_cast<const TensorDictModule*>(&m)) {
                            modules_.push_back({place.path, m.out_keys(), {}});
                          }
                        });
  writers_ = modules_;
  // The TensorDict after the forward pass holds each key's last value: a key that a later
  // module writes again (`hidden` through Linear, then Tanh) is recorded for the last writer.
  for (size_t i = 0; i < modules_.size(); ++i) {
    auto& keys = modules_[i].keys;
    keys.erase(std::remove_if(keys.begin(), keys.end(),
                              [&](const NestedKey& key) {
                                for (size_t j = i + 1; j < modules_.size(); ++j) {
                                  const auto& later = modules_[j].keys;
                                  if (std::find(later.begin(), later.end(), key) != later.end()) {
                                    return true;
                                  }
                                }
                                return false;
                              }),
               keys.end());
  }
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    parameters_.emplace_back(item.key(), item.value());
    // Its module: the one of the longest path it is under (the root's path "" is under all).
    WatchedModule* owner = nullptr;
    for (WatchedModule& m : modules_) {
      const bool under = m.path.empty() || (item.key().size() > m.path.size() &&
                                            item.key().compare(0, m.path.size(), m.path) == 0 &&
                                            item.key()[m.path.size()] == '.');
      if (under && (!owner || m.path.size() > owner->path.size())) owner = &m;
    }
    if (owner) owner->parameters.push_back(item.key());
  }
  if (!options_.snapshot.empty()) {
    refuse_input_writers();
    // Checked now: at the first bad step a file that cannot be written would lose that step.
    namespace fs = std::filesystem;
    const fs::path file(options_.snapshot);
    const fs::path folder = file.has_parent_path() ? file.parent_path() : fs::path(".");
    std::error_code ignored;
    if (!fs::is_directory(folder, ignored)) {
      throw FileError(options_.snapshot,
                      "cannot write the snapshot here: no folder " + folder.string());
    }
    if (fs::is_directory(file, ignored)) {
      throw FileError(options_.snapshot, "cannot write the snapshot here: it is a folder");
    }
  }
  // The optimizer's type and parameters are checked now, not at the bad step.
  if (options_.optimizer) optimizer_state_of(*options_.optimizer, *module_);
  if (!options_.logdir.empty()) log_ = std::make_unique<EventFileWriter>(options_.logdir);
}

void Watch::refuse_input_writers() const {
  const std::vector<NestedKey>& inputs = module_->in_keys();
  for (const WatchedModule& watched : writers_) {
    for (const NestedKey& key : watched.keys) {
      if (std::find(inputs.begin(), inputs.end(), key) != inputs.end()) {
        fail<Error>(
            "Watch: a snapshot keeps the step's inputs, read from the TensorDict after the "
            "forward pass, but module '{}' writes the input key {} there",
            watched.path, key.str());
      }
    }
  }
}

void Watch::write_snapshot(const TensorDict& td) {
  std::vector<std::pair<std::string, at::Tensor>> inputs;
  for (const NestedKey& key : module_->in_keys()) {
    inputs.emplace_back(key.joined("_"), td.get(key).detach());
  }
  // Exported now, before the optimizer's step: the weights before this step's update.
  ExportedProgram program = export_program(module_, inputs);
  std::map<std::string, at::Tensor> examples;
  for (const InputSpec& spec : program.graph_signature().inputs) {
    if (spec.kind != InputKind::kUserInput) continue;
    for (const auto& [joined, value] : inputs) {
      if (joined == spec.target) examples[spec.name] = value.clone();
    }
  }
  program.set_example_inputs(std::move(examples));
  if (options_.optimizer) {
    program.set_optimizer_state(optimizer_state_of(*options_.optimizer, *module_));
  }
  // A copy of the weights as they are now: the program's state is the module's own tensors.
  save(program, options_.snapshot);
}

Watch::~Watch() = default;

std::string Watch::log_path() const { return log_ ? log_->path() : std::string(); }

void Watch::record(int64_t step, const std::string& tag, double value) {
  if (options_.keep_records) records_.push_back({step, tag, value});
  if (log_) scalars_.emplace_back(tag, value);
}

void Watch::histogram(const std::string& tag, const at::Tensor& values,
                      const detail::Moments& moments) {
  if (log_) histograms_.emplace_back(tag, histogram_from(values, moments));
}

WatchCheck Watch::check(int64_t step, const at::Tensor& loss, double& loss_value) const {
  if (!loss.defined() || loss.numel() != 1 || loss.is_complex() || loss.is_meta()) {
    fail<Error>("Watch::observe(step {}): the loss must be a real tensor of one element{}", step,
                !loss.defined()     ? ""
                : loss.is_complex() ? ", not a complex one"
                : loss.is_meta()
                    ? ", not a meta tensor (it has no value)"
                    : fmt::format(", not of shape [{}]", fmt::join(loss.sizes(), ", ")));
  }
  loss_value = loss.detach().item<double>();
  // Every gradient, each in one pass over its data (all_finite: no ATen op for a CPU tensor).
  const std::string* culprit = nullptr;
  bool any_gradient = false, any_trainable = false;
  for (const auto& [path, parameter] : parameters_) {
    any_trainable = any_trainable || parameter.requires_grad();
    any_gradient = any_gradient || parameter.grad().defined();
    if (!detail::all_finite(stored_values(parameter.grad()))) {
      culprit = &path;
      break;
    }
  }
  if (any_trainable && !any_gradient && !culprit) {
    fail<Error>(
        "Watch::observe(step {}): no parameter has a gradient: call observe after "
        "loss.backward() and before the optimizer's zero_grad",
        step);
  }
  WatchCheck out;
  if (!std::isfinite(loss_value)) {
    out.bad = true;
    out.why = fmt::format("the loss is {}", std::isnan(loss_value) ? "NaN"
                                            : loss_value > 0       ? "Inf"
                                                                   : "-Inf");
  } else if (culprit) {
    out.bad = true;
    out.why = fmt::format("the gradient of {} holds NaN or Inf", *culprit);
  }
  if (!out.bad && options_.spike_sigmas > 0) {
    const auto n = static_cast<double>(recent_losses_.size());
    if (recent_losses_.size() == static_cast<size_t>(options_.spike_window)) {
      double mean = 0, squares = 0;
      for (const double l : recent_losses_) mean += l;
      mean /= n;
      for (const double l : recent_losses_) squares += (l - mean) * (l - mean);
      // A spread of at least 1e-4 of the mean: on a flat loss, a change in its last digits is
      // no spike.
      const double sd = std::max(std::sqrt(squares / (n - 1)), kSpikeFloor * std::abs(mean));
      if (std::abs(loss_value - mean) > options_.spike_sigmas * sd) {
        out.bad = true;
        out.why = fmt::format(
            "the loss {:.6g} is {:.1f} standard deviations from the mean {:.6g} of the last {} "
            "losses",
            loss_value, sd > 0 ? std::abs(loss_value - mean) / sd : INFINITY, mean,
            recent_losses_.size());
      }
    }
  }
  return out;
}

void Watch::record_update_ratios() {
  if (before_step_ < 0) return;
  const int64_t step = before_step_;
  before_step_ = -1;  // first: whatever follows, a step's ratios are taken once
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const at::Tensor& now = parameters_[i].second;
    const at::Tensor& before = before_update_[i];
    // A parameter given another shape, dtype or device since (set_data) has no ratio.
    if (!before.defined() || before.sizes() != now.sizes() ||
        before.scalar_type() != now.scalar_type() || before.device() != now.device()) {
      continue;
    }
    const double norm = norms_before_update_[i];
    // A weight of norm 0 (a bias initialised to zeros) has no ratio to its update.
    if (!(norm > 0)) continue;
    record(step, "update_ratio/" + parameters_[i].first, detail::distance(now, before) / norm);
  }
  // Recording every step, the copies are overwritten at the next one; else freed until then.
  if (options_.interval > 1) before_update_.clear();
  flush(-1);
}

namespace {

// The norm of a tensor from its moments: NaN when an element is not finite.
double norm_of(const detail::Moments& m) {
  return m.nonfinite > 0 ? std::numeric_limits<double>::quiet_NaN() : m.norm();
}

}  // namespace

void Watch::record_statistics(int64_t step, const TensorDict& td, bool histograms) {
  before_update_.resize(parameters_.size());
  norms_before_update_.clear();
  for (const WatchedModule& watched : modules_) {
    for (const NestedKey& key : watched.keys) {
      if (!td.contains(key)) continue;
      const at::Tensor value = td.get(key);
      if (value.is_complex() || value.numel() == 0 || value.is_sparse()) continue;
      const std::string tag = detail::watch_key_tag(watched.path, key);
      const detail::Moments m = detail::moments_of(value);
      record(step, "activation_nonfinite/" + tag, static_cast<double>(m.nonfinite));
      if (m.finite > 0) {
        record(step, "activation_mean/" + tag, m.mean);
        record(step, "activation_std/" + tag, m.std());
        record(step, "activation_min/" + tag, m.min);
        record(step, "activation_max/" + tag, m.max);
      }
      if (histograms) histogram("activations/" + tag, value, m);
    }
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const auto& [path, parameter] = parameters_[i];
    const at::Tensor grad = stored_values(parameter.grad());
    if (grad.defined()) {
      const detail::Moments m = detail::moments_of(grad);
      record(step, "grad_norm/" + path, norm_of(m));
      if (histograms) histogram("gradients/" + path, grad, m);
    }
    const detail::Moments m = detail::moments_of(parameter);
    record(step, "weight_norm/" + path, norm_of(m));
    if (histograms) histogram("weights/" + path, parameter, m);
    // The weights before this step's update: its ratio is recorded when the next step comes.
    at::Tensor& before = before_update_[i];
    if (before.defined() && before.sizes() == parameter.sizes() &&
        before.strides() == parameter.strides() && before.dtype() == parameter.dtype() &&
        before.device() == parameter.device()) {
      before.copy_(parameter.detach());
    } else {
      before = parameter.detach().clone();
    }
    norms_before_update_.push_back(m.norm());
  }
  before_step_ = step;
}

void Watch::flush(int64_t step) {
  if (!log_) return;
  // Update ratios belong to the step before: their own record.
  if (!scalars_.empty()) log_->add_scalars(step < 0 ? last_sampled_ : step, scalars_);
  if (!histograms_.empty()) log_->add_histograms(step, histograms_);
  scalars_.clear();
  histograms_.clear();
}

void Watch::require_keys(int64_t step, const TensorDict& td) const {
  if (modules_.empty()) return;
  for (const WatchedModule& watched : modules_) {
    for (const NestedKey& key : watched.keys) {
      if (td.contains(key)) return;
    }
  }
  fail<Error>(
      "Watch::observe(step {}): the TensorDict holds none of the keys the pipeline's modules "
      "write: give observe the TensorDict the forward pass wrote",
      step);
}

WatchCheck Watch::observe(int64_t step, const TensorDict& td, const at::Tensor& loss) {
  if (step < 0 || (last_step_ && step <= *last_step_)) {
    fail<Error>("Watch::observe(step {}): steps are counted up from 0{}", step,
                last_step_ ? fmt::format(", and the last step observed was {}", *last_step_)
                           : std::string());
  }
  // The update of the last sampled step has been made: its ratio.
  record_update_ratios();
  // A call that fails leaves the watch as it was: nothing of this step recorded or logged, its
  // step number free to observe again.
  const size_t records_before = records_.size();
  try {
    double loss_value = 0;
    WatchCheck verdict = check(step, loss, loss_value);
    const bool sampled = step % options_.interval == 0;
    if (sampled || verdict.bad) {
      require_keys(step, td);
      record(step, "loss", loss_value);
      const bool histograms =
          options_.histogram_interval > 0 && step % options_.histogram_interval == 0;
      record_statistics(step, td, histograms);
    }
    if (verdict.bad && !first_bad_) {
      if (!options_.snapshot.empty()) {
        try {
          write_snapshot(td);
        } catch (const std::exception& e) {
          // The step's verdict goes with the failure, or the loop would lose why it stopped.
          fail<Error>(
              "Watch::observe(step {}): the step is bad ({}), but its snapshot could not be "
              "written: {}",
              step, verdict.why, e.what());
        }
        verdict.snapshot = options_.snapshot;
      }
      first_bad_ = step;
      record(step, "first_bad_step", static_cast<double>(step));
    }
    flush(step);
    if (sampled || verdict.bad) last_sampled_ = step;
    last_step_ = step;
    // The spike check's history: the losses of good steps.
    if (!verdict.bad && options_.spike_sigmas > 0) {
      recent_losses_.push_back(loss_value);
      if (recent_losses_.size() > static_cast<size_t>(options_.spike_window)) {
        recent_losses_.pop_front();
      }
    }
    return verdict;
  } catch (...) {
    records_.erase(records_.begin() + static_cast<std::ptrdiff_t>(records_before), records_.end());
    scalars_.clear();
    histograms_.clear();
    before_step_ = -1;  // statistics taken in part: no update ratio for this step
    throw;
  }
}

}  // namespace tdfx
