#pragma once

/// \file
/// Diagrams of traced pipelines: the render options that show a
/// TDGraphModule's TensorDictModules, written keys and leaf modules.

#include "tracer/symbolic_trace.h"
#include "viz/render.h"

namespace tdfx {

/// One box per TensorDictModule, the key each output is written to, and each
/// call_module's configuration and parameters (dtype and shape).
RenderOptions diagram_options(const TDGraphModule& module, bool show_parameters = true);

/// Draws `module` to `path` (.svg, .png, .pdf, .dot; .html: the interactive page), atomically.
void write_diagram(const TDGraphModule& module, const std::string& path,
                   bool show_parameters = true);

}  // namespace tdfx
