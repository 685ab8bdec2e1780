#pragma once

/// \file
/// Diagrams of traced pipelines, the glue between the tracer and viz/: the render options
/// that show a TDGraphModule's TensorDictModules, written keys and leaf modules, and a
/// pipeline's module view without a trace.

#include <memory>
#include <string>

#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/symbolic_trace.h"
#include "tdfx/viz/render.h"

namespace tdfx {

/// Everything both views draw of a traced pipeline: its TensorDictModules and nested
/// sequentials (boxes in the op view, nodes and boxes in the module view), the key each
/// output is written to, and each call_module's configuration, parameters and buffers
/// (dtype and shape). Linear in the graph and the module's tensors. The op view is the
/// default; set `view` for the other:
///
///     RenderOptions options = diagram_options(gm);
///     options.view = View::kModules;
///     save_diagram(gm.graph(), "modules.svg", options);
RenderOptions diagram_options(const TDGraphModule& module, bool show_parameters = true);

/// Draws `module` to `path` (.svg, .png, .pdf, .dot; .html: the interactive page), atomically.
void save_diagram(const TDGraphModule& module, const std::string& path,
                  bool show_parameters = true);

/// The module view's options for `module`, drawn without tracing it: pipeline_modules
/// (paths as symbolic_trace names them) and its selected out keys.
RenderOptions module_view_options(const std::shared_ptr<TensorDictModuleBase>& module);

}  // namespace tdfx
