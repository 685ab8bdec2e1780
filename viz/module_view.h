#pragma once

/// \file
/// The module view's DOT text (viz/module_view.cpp): one node per TensorDictModule, one edge
/// per key, drawn from RenderOptions alone.

#include <string>
#include <vector>

#include "tdfx/viz/render_options.h"

namespace tdfx {

/// The module view's DOT text, from `options.modules` and `options.output_keys` alone (a
/// pipeline need not be traced to be drawn so): deterministic, like to_dot.
std::string module_view_dot(const RenderOptions& options);

/// The keys the module view draws at its borders, in the order of their Graphviz IDs:
/// `inputs[N]` is node `input:N` (a key read before any module writes it), `outputs[N]` node
/// `output:N` (an output nothing reads afterwards).
struct ModuleViewBorder {
  std::vector<NestedKey> inputs;
  std::vector<NestedKey> outputs;
};
ModuleViewBorder module_view_border(const RenderOptions& options);

}  // namespace tdfx
