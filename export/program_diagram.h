#pragma once

/// \file
/// Diagrams of exported programs: what a loaded `.pt2` draws with, so that it draws as a
/// live trace does — its TensorDictModules (boxes of the op view, nodes of the module view)
/// and the key each output is written to.

#include "tdfx/export/program.h"
#include "tdfx/viz/render.h"

namespace tdfx {

/// The modules and output keys of `program`, for either view (the op view by default). A
/// program of an archive of version 2 has no modules: its op view has no boxes, and its
/// module view shows its outputs alone.
RenderOptions diagram_options(const ExportedProgram& program);

}  // namespace tdfx
