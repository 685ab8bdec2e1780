#include "tdfx/diagram/overlay.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tdfx {
namespace {

// White at 0, red at 1: a heat scale for time shares.
std::string heat(double fraction) {
  const double f = std::clamp(fraction, 0.0, 1.0);
  const int gb = static_cast<int>(std::lround(255 * (1 - 0.75 * f)));
  return fmt::format("#ff{:02x}{:02x}", gb, gb);
}

constexpr const char* kNonFiniteFill = "#f4c7c3";

// A gradient's scale (its norm over the outputs') on a log scale: white at 1, blue towards
// `limits.vanishing` and below, red towards `limits.exploding` and above.
std::string scale_colour(double scale, const FlowLimits& limits) {
  if (!(scale > 0)) return "#6a8fd0";  // zero: as vanished as it gets
  const double decades = std::log10(scale);
  const bool grows = decades > 0;
  const double limit = std::log10(grows ? limits.exploding : limits.vanishing);
  const double f = limit == 0 ? 1.0 : std::clamp(decades / limit, 0.0, 1.0);
  const int fade = static_cast<int>(std::lround(255 * (1 - 0.7 * f)));
  const int mid = static_cast<int>(std::lround(255 * (1 - 0.35 * f)));
  return grows ? fmt::format("#ff{:02x}{:02x}", fade, fade)
               : fmt::format("#{:02x}{:02x}ff", fade, mid);
}

}  // namespace

std::map<std::string, NodeOverlay> profile_overlay(const Profile& profile) {
  double top = 0;
  for (const auto& e : profile.nodes) top = std::max(top, e.share);
  std::map<std::string, NodeOverlay> overlay;
  for (const auto& e : profile.nodes) {
    NodeOverlay& o = overlay[e.name];
    o.fill = heat(top > 0 ? e.share / top : 0);
    o.lines.push_back(fmt::format("time: {:.1f} µs, {:.1f}%", e.median_us, 100 * e.share));
  }
  return overlay;
}

std::map<std::string, NodeOverlay> stats_overlay(const std::vector<NodeStats>& stats) {
  std::map<std::string, NodeOverlay> overlay;
  for (const auto& entry : stats) {
    if (!entry.stats) continue;
    const TensorStats& s = *entry.stats;
    NodeOverlay& o = overlay[entry.node];
    o.lines.push_back(fmt::format("min {}  max {}  mean {}", table_number(s.min),
                                  table_number(s.max), table_number(s.mean)));
    if (!s.finite()) {
      o.fill = kNonFiniteFill;
      o.lines.push_back(fmt::format("{} NaN, {} Inf", s.nan_count, s.inf_count));
    }
  }
  return overlay;
}

void mark_nonfinite(std::map<std::string, NodeOverlay>& overlay, const NonFinite& origin) {
  NodeOverlay& o = overlay[origin.node];
  o.marked = true;
  o.fill = kNonFiniteFill;
  o.lines.push_back(
      fmt::format("NaN/Inf starts here ({} NaN, {} Inf)", origin.nan_count, origin.inf_count));
}

std::map<std::string, NodeOverlay> grad_overlay(const GradReport& report) {
  std::map<std::string, NodeOverlay> overlay;
  const double outputs = report.flow.output_grad_norm;
  for (const NodeGrad& entry : report.nodes) {
    NodeOverlay& o = overlay[entry.node];
    const TensorStats& g = entry.grad;
    if (!g.finite()) {
      o.fill = kNonFiniteFill;
      o.lines.push_back(fmt::format("grad: {} NaN, {} Inf", g.nan_count, g.inf_count));
    } else {
      o.fill = scale_colour(outputs > 0 ? g.norm / outputs : 0, report.flow.limits);
      o.lines.push_back(fmt::format("grad norm {}", table_number(g.norm)));
    }
    if (entry.node == report.nonfinite_origin) {
      o.marked = true;
      o.lines.push_back("non-finite gradient starts here");
    }
  }
  for (const std::string& node : report.nodes_without_gradient) {
    overlay[node].lines.emplace_back("no gradient");
  }
  return overlay;
}

std::map<std::string, NodeOverlay> flow_overlay(const GradFlow& flow) {
  std::map<std::string, NodeOverlay> overlay;
  for (const ModuleFlow& f : flow.modules) {
    if (f.inner) continue;  // the module view draws TensorDictModules
    NodeOverlay& o = overlay[f.path];
    const bool nonfinite =
        f.mark == ModuleFlow::Mark::kNonFinite || f.mark == ModuleFlow::Mark::kOrigin;
    // No gradient at all (a module the loss does not reach, or a detached one) is not a
    // vanishing one: it keeps its colour and says so.
    if (nonfinite) {
      o.fill = kNonFiniteFill;
    } else if (f.scale) {
      o.fill = scale_colour(*f.scale, flow.limits);
    } else if (!f.output_grad_norm && !f.parameter_grad_norm) {
      o.lines.emplace_back("no gradient");
    }
    if (f.output_grad_norm) {
      o.lines.push_back(fmt::format("output grad {}", table_number(*f.output_grad_norm)) +
                        (f.scale ? fmt::format(" (×{})", table_number(*f.scale)) : ""));
    }
    if (f.parameter_grad_norm) {
      o.lines.push_back(fmt::format("param grad {}", table_number(*f.parameter_grad_norm)));
    }
    if (f.mark != ModuleFlow::Mark::kNone) o.lines.emplace_back(to_string(f.mark));
    o.marked = f.mark == ModuleFlow::Mark::kOrigin;
  }
  return overlay;
}

OverlayLayer stats_layer(const std::vector<NodeStats>& stats,
                         const std::optional<NonFinite>& origin) {
  OverlayLayer layer;
  layer.name = "statistics";
  layer.legend =
      "each node's min, max and mean in its panel; pink: it holds NaN or Inf; ringed red: where "
      "NaN or Inf starts";
  layer.nodes = stats_overlay(stats);
  if (origin) mark_nonfinite(layer.nodes, *origin);
  return layer;
}

OverlayLayer profile_layer(const Profile& profile) {
  OverlayLayer layer;
  layer.name = "time";
  layer.legend = fmt::format(
      "fill: the node's share of the time, white (none) to red (the largest); median of {} runs",
      profile.repeats);
  layer.nodes = profile_overlay(profile);
  return layer;
}

OverlayLayer grad_layer(const GradReport& report) {
  OverlayLayer layer;
  layer.name = "gradients";
  layer.legend = fmt::format(
      "fill: the gradient norm over the outputs', log scale: blue as it shrinks to {:g}, white "
      "at 1, red as it grows to {:g}; pink: NaN or Inf; ringed red: where the first non-finite "
      "gradient starts",
      report.flow.limits.vanishing, report.flow.limits.exploding);
  layer.nodes = grad_overlay(report);
  layer.modules = flow_overlay(report.flow);
  return layer;
}

}  // namespace tdfx
