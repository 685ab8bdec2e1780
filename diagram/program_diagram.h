#pragma once

/// \file
/// Diagrams of exported programs and of their diffs: what a loaded `.pt2` draws with, so that it
/// draws as a live trace does — its TensorDictModules (boxes of the op view, nodes of the module
/// view) and the key each output is written to.

#include "tdfx/export/program.h"
#include "tdfx/export/program_diff.h"
#include "tdfx/viz/render.h"

namespace tdfx {

/// The modules and output keys of `program`, for either view (the op view by default). A
/// program of an archive of version 2 has no modules: its op view has no boxes, and its
/// module view shows its outputs alone.
RenderOptions diagram_options(const ExportedProgram& program);

/// What a drawing of the diff shows over program `b`'s diagram (diagram_options): added nodes
/// filled green, changed nodes and weights orange with a row per change (labelled `diff` in
/// the page's panel), and a title with the counts and the nodes removed from `a`, which `b`
/// has no place for.
RenderOptions diff_render_options(const ExportedProgram& b, const ProgramDiff& diff);

}  // namespace tdfx
