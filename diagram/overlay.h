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
#include "tdfx/debug/gradients.h"
#include "tdfx/debug/node_stats.h"
#include "tdfx/debug/profile.h"
#include "tdfx/debug/watch.h"
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

/// A training step's gradients on the op view: each node with a gradient filled by its norm
/// as a multiple of the outputs' on a log scale (blue as it shrinks to the flow's
/// FlowLimits::vanishing, white at 1, red as it grows to FlowLimits::exploding) and labelled
/// with its norm; a node whose gradient holds NaN or Inf is pink, the node where the first
/// non-finite gradient starts ringed.
std::map<std::string, NodeOverlay> grad_overlay(const GradReport& report);

/// The same on the module view, per TensorDictModule path (RenderOptions::module_overlay):
/// coloured by its output gradient, labelled with its output and parameter gradient norms and
/// its mark; the module where a non-finite gradient starts ringed.
std::map<std::string, NodeOverlay> flow_overlay(const GradFlow& flow);

///@{
/// The layers of a run for the interactive page (RenderOptions::layers), each with a legend
/// that says what its colours and marks mean: forward statistics (`statistics`, with the
/// node where NaN or Inf starts when `origin` is given), the profile (`time`) and a training
/// step's gradients (`gradients`: the nodes by grad_overlay, the modules by flow_overlay).
OverlayLayer stats_layer(const std::vector<NodeStats>& stats,
                         const std::optional<NonFinite>& origin = std::nullopt);
OverlayLayer profile_layer(const Profile& profile);
OverlayLayer grad_layer(const GradReport& report);
///@}

/// A training run the watch recorded, as the page's `training` layer for a drawing of the
/// watched module (`drawing`: its RenderOptions, whose `modules` name the boxes; a trace's
/// drawing names them without the first `module.` of the watch's paths). In each
/// TensorDictModule's panel: a chart over the sampled steps of each key it writes (min, mean,
/// max; and its NaN/Inf count when it had any) and of each of its parameters' gradient norm,
/// weight norm and update ratio; the loss's chart in the panel when nothing is selected; the
/// first bad step marked on every chart. A module whose outputs or gradients held NaN or Inf at
/// that step is pink; ringed is the first in pipeline order whose outputs held them, else the
/// last whose gradients did (gradients flow backwards: that is where they turned). A chart of
/// more than kTimelinePoints steps keeps every k-th step, the last, and the bad step. Error
/// when the watch keeps no records (WatchOptions::keep_records), or a module it watches is
/// not in the drawing.
///
///     TDGraphModule gm = symbolic_trace(policy, td);
///     RenderOptions options = diagram_options(gm);
///     options.layers.push_back(training_layer(watch, options));
///     save_diagram(gm.graph(), "training.html", options);
OverlayLayer training_layer(const Watch& watch, const RenderOptions& drawing);

/// The most steps a chart of training_layer keeps.
inline constexpr size_t kTimelinePoints = 500;

}  // namespace tdfx
