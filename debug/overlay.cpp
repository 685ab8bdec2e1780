#include "tdfx/debug/overlay.h"

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
      o.fill = "#f4c7c3";
      o.lines.push_back(fmt::format("{} NaN, {} Inf", s.nan_count, s.inf_count));
    }
  }
  return overlay;
}

void mark_nonfinite(std::map<std::string, NodeOverlay>& overlay, const NonFinite& origin) {
  NodeOverlay& o = overlay[origin.node];
  o.marked = true;
  o.fill = "#f4c7c3";
  o.lines.push_back(
      fmt::format("NaN/Inf starts here ({} NaN, {} Inf)", origin.nan_count, origin.inf_count));
}

}  // namespace tdfx
