#pragma once

/// \file
/// Watch: a cheap watch over a training run in the user's own loop — their optimizer, their
/// loss. Every step it checks the loss and every gradient for NaN and Inf (each gradient in
/// one pass over its data, no ATen op on the CPU) and, when asked, the loss for a spike; every
/// `interval` steps it records, per TensorDictModule, statistics of what the module wrote and, per
/// parameter, the gradient's and the weight's norms and the update ratio ‖ΔW‖/‖W‖; every
/// `histogram_interval` steps, histograms of the same. What it records it keeps (records()) and,
/// given a log folder, writes as TensorBoard event files.
///
///     tdfx::WatchOptions options;
///     options.logdir = "runs/ppo";
///     tdfx::Watch watch(policy, options);
///     for (int64_t step = 0;; ++step) {
///       tdfx::TensorDict td = batch();
///       policy->forward(td);
///       at::Tensor loss = loss_of(td);
///       optimizer.zero_grad();
///       loss.backward();
///       if (watch.observe(step, td, loss).bad) break;   // after backward, before the update
///       optimizer.step();
///     }

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tdfx/debug/moments.h"
#include "tdfx/debug/tensorboard.h"
#include "tdfx/export/optimizer_state.h"
#include "tdfx/tensordict/tensordict.h"
#include "tdfx/tensordict/tensordict_module.h"

namespace tdfx {

/// What a Watch records, how often, and where it writes.
struct WatchOptions {
  /// Statistics every `interval` steps (the steps divisible by it); at least 1.
  int64_t interval = 100;
  /// Histograms every `histogram_interval` steps (divisible by it), a multiple of `interval`;
  /// 0: none.
  int64_t histogram_interval = 1000;
  /// A folder for TensorBoard event files (EventFileWriter); "": records kept in memory only.
  std::string logdir;
  /// A loss more than `spike_sigmas` standard deviations from the mean of the last
  /// `spike_window` losses makes the step bad, the spread taken as at least 1e-4 of the mean
  /// (on a flat loss a change in the last digits is no spike); 0: no spike check.
  double spike_sigmas = 0;
  /// How many of the last losses the spike check takes the mean and standard deviation of.
  int64_t spike_window = 100;
  /// Keep every record in memory (records()): about 100 bytes each, a few per module and
  /// parameter each sampled step. false: only the log keeps them.
  bool keep_records = true;
  /// A file to write at the first bad step: the module exported on that step's inputs, with
  /// the weights before its update and those inputs kept in it (an archive of version 4, 5
  /// with the optimizer's state), so that `tdfx run FILE --backward --find-nonfinite-grad`
  /// replays the step. Its folder must exist when the watch is made. "": none.
  std::string snapshot;
  /// The loop's optimizer, one of LibTorch's (optimizer_kinds()), over the module's
  /// parameters: the snapshot keeps its state before the step's update
  /// (ExportedProgram::optimizer_state, archive format version 5), which
  /// restore_optimizer_state puts back. Not owned; it must outlive the watch. nullptr: none.
  const torch::optim::Optimizer* optimizer = nullptr;
};

/// One value the watch recorded: its tag (TensorBoard's: `loss`, `grad_norm/<parameter>`,
/// `activation_mean/<module>/<key>`, …) at a step.
struct WatchRecord {
  /// The step it was recorded at.
  int64_t step = 0;
  /// What it is, as TensorBoard's tag names it.
  std::string tag;
  /// The value.
  double value = 0;
};

/// What a step's check found.
struct WatchCheck {
  /// The loss or a gradient holds NaN or Inf, or the loss spiked.
  bool bad = false;
  /// Why, naming the loss or the first parameter whose gradient is not finite; "" when good.
  std::string why;
  /// The snapshot written at this step (WatchOptions::snapshot), "" when none.
  std::string snapshot;
};

/// A TensorDictModule the watch records: its path in the pipeline ("" for the root), the keys
/// recorded for it (those it writes last), and its parameters' names as the records name them
/// (`module.0.module.weight`), those of its own module and below.
struct WatchedModule {
  /// The TensorDictModule's path in the pipeline ("" for the root).
  std::string path;
  /// The keys recorded for it, those it writes last.
  std::vector<NestedKey> keys;
  /// Its parameters' names as the records name them (`module.0.module.weight`).
  std::vector<std::string> parameters;
};

namespace detail {
/// The part of a record's tag that names a module's key: `<module>/<key>` (the key's parts
/// joined by `.`), the root module as `module`; `activation_mean/` and the like go before it.
std::string watch_key_tag(const std::string& path, const NestedKey& key);
}  // namespace detail

/// A watch over a training run in the user's own loop, as the file comment says: call observe()
/// after each step's backward and before its update.
class Watch {
 public:
  /// Watches `module`'s parameters and the keys each TensorDictModule in it writes, read from
  /// the TensorDict after the forward pass: a key that a later module writes again is
  /// recorded for the last module that writes it (the TensorDict keeps only its last value).
  /// Error for a null module, an interval below 1, a histogram_interval that is not a
  /// multiple of it, or a spike_sigmas below 0 or NaN; with a snapshot file, FileError for one
  /// that cannot be written there, and Error for a module that writes one of the pipeline's
  /// input keys (the TensorDict after the forward pass would no longer hold that step's
  /// input); with an optimizer, Error for one tdfx does not keep or one with a parameter that
  /// is not the module's.
  explicit Watch(std::shared_ptr<TensorDictModuleBase> module, WatchOptions options = {});
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  /// Observes training step `step`: call it after `loss.backward()` and before the optimizer
  /// updates the parameters, with the TensorDict the forward pass wrote and the loss (one
  /// real element). Every step: the check of the loss and of every gradient (a sparse
  /// gradient's stored values), and the spike check. At a step divisible by `interval` (and at
  /// any bad step): the statistics of every real key (integer and bool too); at one divisible by
  /// `histogram_interval`: the histograms. The update ratio of a step's update is recorded at
  /// that step, computed when the next step is observed (none for a weight of norm 0). Error
  /// for a step below 0 or not above the last one observed, a loss that is not one real
  /// element, no gradient on any parameter that requires one (observe before backward), or, at
  /// a sampled step, a TensorDict without any key the modules write; at the first bad step, an
  /// Error that gives the step's verdict when its snapshot cannot be written. A call that
  /// throws leaves the watch as it was: nothing of its step recorded or logged, and the step
  /// free to observe again (a snapshot not written is tried again at the next bad step). A
  /// parameter given another shape, dtype or device between steps gets no update ratio for
  /// that update.
  WatchCheck observe(int64_t step, const TensorDict& td, const at::Tensor& loss);

  /// Everything recorded so far, in the order recorded.
  const std::vector<WatchRecord>& records() const { return records_; }

  /// The first step observe() found bad, if any.
  std::optional<int64_t> first_bad_step() const { return first_bad_; }

  /// The TensorDictModules watched, in pipeline order.
  const std::vector<WatchedModule>& modules() const { return modules_; }

  /// The options it was made with.
  const WatchOptions& options() const { return options_; }

  /// The event file written, "" without a log folder.
  std::string log_path() const;

 private:
  void record(int64_t step, const std::string& tag, double value);
  void histogram(const std::string& tag, const at::Tensor& values, const detail::Moments& moments);
  // Writes what the step recorded to the log as one record of scalars and one of histograms;
  // `step` -1: the update ratios, at the last sampled step.
  void flush(int64_t step);
  void record_statistics(int64_t step, const TensorDict& td, bool histograms);
  void record_update_ratios();
  // The step's verdict, and the loss's value in `loss_value`.
  WatchCheck check(int64_t step, const at::Tensor& loss, double& loss_value) const;
  // Error when `td` holds none of the keys the modules write (but for a pipeline without any).
  void require_keys(int64_t step, const TensorDict& td) const;
  void write_snapshot(const TensorDict& td);
  // Error when a TensorDictModule of the pipeline writes one of its input keys.
  void refuse_input_writers() const;

  std::shared_ptr<TensorDictModuleBase> module_;
  WatchOptions options_;
  std::vector<WatchedModule> modules_;  // each key with its last writer only
  std::vector<WatchedModule> writers_;  // every key each TensorDictModule writes
  std::vector<std::pair<std::string, at::Tensor>> parameters_;
  std::unique_ptr<EventFileWriter> log_;
  std::vector<WatchRecord> records_;
  // What the step being observed logs, written at its end (flush).
  std::vector<std::pair<std::string, double>> scalars_;
  std::vector<std::pair<std::string, Histogram>> histograms_;
  int64_t last_sampled_ = 0;
  std::optional<int64_t> last_step_;
  std::deque<double> recent_losses_;
  std::optional<int64_t> first_bad_;
  // The parameters as they were before the update of step `before_step_` (a sampled step),
  // for its update ratio, computed at the next observe(). Kept between steps, and overwritten,
  // when every step is sampled (interval 1).
  std::vector<at::Tensor> before_update_;
  std::vector<double> norms_before_update_;
  int64_t before_step_ = -1;
};

}  // namespace tdfx
