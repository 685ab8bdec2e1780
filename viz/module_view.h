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
  /// The pipeline's inputs: `inputs[N]` is node `input:N`.
  std::vector<NestedKey> inputs;
  /// Its outputs nothing reads afterwards: `outputs[N]` is node `output:N`.
  std::vector<NestedKey> outputs;
};
/// The inputs and outputs the module view of `options` draws at its border, by their node numbers.
ModuleViewBorder module_view_border(const RenderOptions& options);

}  // namespace tdfx
