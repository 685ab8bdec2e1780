// training_layer (diagram/overlay.h): a Watch's records as the page's charts.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/diagram/overlay.h"

namespace tdfx {

namespace {

constexpr const char* kTrainingNonFiniteFill = "#fde0dd";

class TrainingLayerBuilder {
 public:
  TrainingLayerBuilder(const Watch& watch, const RenderOptions& drawing)
      : watch_(watch), drawing_(drawing), bad_(watch.first_bad_step()) {
    for (const WatchRecord& r : watch.records()) {
      series_[r.tag][r.step] = r.value;
      last_step_ = std::max(last_step_, r.step);
    }
  }

  OverlayLayer build() {
    OverlayLayer layer;
    layer.name = "training";
    layer.marked_step = bad_;
    if (auto loss = chart("loss", {{"loss", "loss"}})) layer.timelines.push_back(std::move(*loss));
    // The module to ring: the first in pipeline order whose outputs held NaN or Inf at the bad
    // step, else the last whose gradients did, as gradients flow backwards (the root's path is
    // "").
    std::optional<std::string> ringed_by_outputs, ringed_by_gradients;
    for (const WatchedModule& m : watch_.modules()) {
      const std::string drawn = drawn_path(m.path);
      std::vector<Timeline> charts;
      NodeOverlay overlay;
      bool outputs_bad = false, gradients_bad = false;
      for (const NestedKey& key : m.keys) {
        const std::string tag = detail::watch_key_tag(m.path, key);
        const std::string name = key.joined(".");
        if (auto c = chart(name, {{"min", "activation_min/" + tag},
                                  {"mean", "activation_mean/" + tag},
                                  {"max", "activation_max/" + tag}})) {
          charts.push_back(std::move(*c));
        }
        const std::string nonfinite_tag = "activation_nonfinite/" + tag;
        if (any_above_zero(nonfinite_tag)) {
          if (auto c = chart(name + ": NaN/Inf count", {{"count", nonfinite_tag}})) {
            charts.push_back(std::move(*c));
          }
        }
        if (auto at = at_reference(nonfinite_tag); at && *at > 0) {
          outputs_bad = outputs_bad || bad_.has_value();
          overlay.lines.push_back(
              fmt::format("{}: {:g} NaN/Inf at step {}", name, *at, reference()));
        } else if (auto mean = at_reference("activation_mean/" + tag)) {
          overlay.lines.push_back(fmt::format("{}: mean {:.4g}, std {:.4g} at step {}", name, *mean,
                                              at_reference("activation_std/" + tag).value_or(NAN),
                                              reference()));
        }
      }
      for (const std::string& parameter : m.parameters) {
        const std::string name = relative(parameter, m.path);
        for (const auto& [what, prefix] : {std::pair{"gradient norm", "grad_norm/"},
                                           {"weight norm", "weight_norm/"},
                                           {"update ratio", "update_ratio/"}}) {
          if (auto c = chart(fmt::format("{}: {}", name, what), {{what, prefix + parameter}})) {
            charts.push_back(std::move(*c));
          }
        }
        if (auto norm = at_reference("grad_norm/" + parameter)) {
          if (!std::isfinite(*norm)) gradients_bad = gradients_bad || bad_.has_value();
          overlay.lines.push_back(
              std::isfinite(*norm)
                  ? fmt::format("{}: gradient norm {:.4g} at step {}", name, *norm, reference())
                  : fmt::format("{}: gradient holds NaN/Inf at step {}", name, reference()));
        }
      }
      if (outputs_bad || gradients_bad) overlay.fill = kTrainingNonFiniteFill;
      if (outputs_bad && !ringed_by_outputs) ringed_by_outputs = drawn;
      if (gradients_bad) ringed_by_gradients = drawn;
      if (!charts.empty()) layer.module_timelines[drawn] = std::move(charts);
      if (!overlay.lines.empty() || !overlay.fill.empty()) layer.modules[drawn] = overlay;
    }
    if (const auto& ringed = ringed_by_outputs ? ringed_by_outputs : ringed_by_gradients) {
      layer.modules[*ringed].marked = true;
    }
    layer.legend =
        "a chart per module of each key it writes (min, mean, max) and of its parameters' "
        "gradient norm, weight norm and update ratio, in its panel; the loss with nothing "
        "selected";
    if (bad_) {
      layer.legend += fmt::format(
          "; red line: the first bad step, {}; pink: NaN or Inf there; ringed red: the first "
          "module whose outputs hold it, else the last whose gradients do",
          *bad_);
    }
    return layer;
  }

 private:
  // The step a module's lines describe: the first bad step, else the last sampled one.
  int64_t reference() const { return bad_ ? *bad_ : last_step_; }

  std::optional<double> at_reference(const std::string& tag) const {
    const auto found = series_.find(tag);
    if (found == series_.end()) return std::nullopt;
    const auto at = found->second.find(reference());
    if (at == found->second.end()) return std::nullopt;
    return at->second;
  }

  bool any_above_zero(const std::string& tag) const {
    const auto found = series_.find(tag);
    if (found == series_.end()) return false;
    return std::any_of(found->second.begin(), found->second.end(),
                       [](const auto& entry) { return entry.second > 0; });
  }

  // A chart of the given series (name, tag) over the steps any of them was recorded at, a step
  // one of them misses as NaN (activation statistics of a key with no finite element);
  // nullopt when none was recorded.
  std::optional<Timeline> chart(
      const std::string& label,
      const std::vector<std::pair<std::string, std::string>>& tags) const {
    std::set<int64_t> all;
    std::vector<const std::map<int64_t, double>*> found;
    for (const auto& [name, tag] : tags) {
      const auto it = series_.find(tag);
      found.push_back(it == series_.end() ? nullptr : &it->second);
      if (found.back()) {
        for (const auto& entry : *found.back()) all.insert(entry.first);
      }
    }
    if (all.empty()) return std::nullopt;
    Timeline out;
    out.label = label;
    out.steps = thin(std::vector<int64_t>(all.begin(), all.end()));
    for (size_t i = 0; i < tags.size(); ++i) {
      std::vector<double> values;
      values.reserve(out.steps.size());
      for (const int64_t step : out.steps) {
        double value = std::numeric_limits<double>::quiet_NaN();
        if (found[i]) {
          if (const auto at = found[i]->find(step); at != found[i]->end()) value = at->second;
        }
        values.push_back(value);
      }
      out.series.emplace_back(tags[i].first, std::move(values));
    }
    return out;
  }

  // At most kTimelinePoints steps: every k-th, the last, and the bad step.
  std::vector<int64_t> thin(std::vector<int64_t> steps) const {
    if (steps.size() <= kTimelinePoints) return steps;
    const size_t every = (steps.size() + kTimelinePoints - 3) / (kTimelinePoints - 2);
    std::vector<int64_t> kept;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (i % every == 0 || i + 1 == steps.size() || (bad_ && steps[i] == *bad_)) {
        kept.push_back(steps[i]);
      }
    }
    return kept;
  }

  // A watched module's path in the drawing: the watch names modules as exported programs do
  // (`module.0.module.1`), a trace's drawing without the first `module.` (`0.module.1`).
  std::string drawn_path(const std::string& path) const {
    const auto drawn = [&](const std::string& p) {
      return std::any_of(drawing_.modules.begin(), drawing_.modules.end(),
                         [&](const ModuleBox& box) { return box.path == p; });
    };
    if (drawn(path)) return path;
    constexpr std::string_view kPrefix = "module.";
    if (path.rfind(kPrefix, 0) == 0 && drawn(path.substr(kPrefix.size()))) {
      return path.substr(kPrefix.size());
    }
    fail<Error>(
        "training_layer: the drawing (RenderOptions::modules) has no module '{}', which the watch "
        "records: draw the module the watch watches",
        path);
  }

  // A parameter's name under its module's path (`module.weight` under `module.0`).
  static std::string relative(const std::string& parameter, const std::string& path) {
    return path.empty() ? parameter : parameter.substr(path.size() + 1);
  }

  const Watch& watch_;
  const RenderOptions& drawing_;
  const std::optional<int64_t> bad_;
  int64_t last_step_ = 0;  // the last step recorded
  std::unordered_map<std::string, std::map<int64_t, double>> series_;
};

}  // namespace

OverlayLayer training_layer(const Watch& watch, const RenderOptions& drawing) {
  if (!watch.options().keep_records) {
    fail<Error>(
        "training_layer: the watch kept no records (WatchOptions::keep_records is false); its "
        "event files hold them");
  }
  return TrainingLayerBuilder(watch, drawing).build();
}

}  // namespace tdfx
