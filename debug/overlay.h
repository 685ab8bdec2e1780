#pragma once

/// \file
/// Overlays: a debugging run drawn on the diagram — nodes coloured by their
/// share of the time, statistics in their labels, the node where NaN or Inf
/// started marked.
///
///     RenderOptions options = diagram_options(gm);
///     options.overlay = profile_overlay(profile(debuggee(gm, td)));
///     save_diagram(gm.graph(), "profile.svg", options);

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tdfx/debug/first_nonfinite.h"
#include "tdfx/debug/node_stats.h"
#include "tdfx/debug/profile.h"
#include "tdfx/viz/render.h"

namespace tdfx {

/// Each timed node filled from white (no time) to red (the largest share), labelled with
/// its median time and share.
std::map<std::string, NodeOverlay> profile_overlay(const Profile& profile);

/// Each tensor node labelled with its min, max and mean, and its NaN/Inf counts when any;
/// nodes holding NaN or Inf filled pink.
std::map<std::string, NodeOverlay> stats_overlay(const std::vector<NodeStats>& stats);

/// Marks `origin`'s node in `overlay` (a thick red border and a "NaN/Inf starts here" row).
void mark_nonfinite(std::map<std::string, NodeOverlay>& overlay, const NonFinite& origin);

}  // namespace tdfx
