#include "tdfx/diagram/program_diagram.h"

#include <fmt/format.h>

namespace tdfx {

RenderOptions diagram_options(const ExportedProgram& program) {
  RenderOptions options;
  options.modules = program.modules();
  for (const OutputSpec& output : program.graph_signature().outputs) {
    options.output_keys.push_back(output.key);
  }
  return options;
}

RenderOptions diff_render_options(const ExportedProgram& b, const ProgramDiff& diff) {
  RenderOptions options = diagram_options(b);
  for (const DiffNode& n : diff.added) options.overlay[n.name] = {"#b8e186", {"added"}, false};
  for (const NodeChange& c : diff.changed) {
    NodeOverlay& o = options.overlay[c.name_b];
    o.fill = "#fdb863";
    o.lines = c.what;
  }
  for (const WeightChange& w : diff.weights) {
    NodeOverlay& o = options.overlay[w.name_b];
    o.fill = "#fdb863";
    o.lines = {w.what};
  }
  options.overlay_label = "diff";
  options.title =
      fmt::format("diff: {} added (green), {} removed, {} changed, {} (orange); signature: {}",
                  diff.added.size(), diff.removed.size(), diff.changed.size(),
                  detail::plural(diff.weights.size(), "weight differs", "weights differ"),
                  detail::plural(diff.signature.size(), "change", "changes"));
  if (!diff.removed.empty()) {
    std::string names;
    for (const DiffNode& n : diff.removed) names += (names.empty() ? "" : ", ") + n.name;
    options.title += "; removed: " + names;
  }
  return options;
}

}  // namespace tdfx
