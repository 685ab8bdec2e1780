#pragma once

/// \file
/// Graph-level passes that need no module or tracer.

#include "tdfx/graph/graph.h"

namespace tdfx {

/// Replaces every call_module node that has a body by the body's nodes, its
/// placeholders bound to the call's arguments and its get_attr targets made
/// relative to the graph root. The result computes the same values with
/// aten ops only:
///
///     before: %_0_fc1 = call_module[0.module.fc1](%x)     body: addmm(bias, input, t(weight))
///     after:  %weight = get_attr[0.module.fc1.weight]; %t = aten.t(%weight); ...
///             %addmm = aten.addmm(%bias, %x, %t)
///
/// Calls whose arguments are not all nodes, or whose body returns a tuple,
/// are left alone. Returns the number inlined; lint()s the graph.
size_t inline_call_modules(Graph& graph);

}  // namespace tdfx
