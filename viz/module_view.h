#pragma once

/// \file
/// The module view's DOT text (viz/module_view.cpp): one node per TensorDictModule, one edge
/// per key, drawn from RenderOptions alone.

#include <string>

#include "tdfx/viz/render_options.h"

namespace tdfx {

/// The module view's DOT text, from `options.modules` and `options.output_keys` alone (a
/// pipeline need not be traced to be drawn so): deterministic, like to_dot.
std::string module_view_dot(const RenderOptions& options);

}  // namespace tdfx
