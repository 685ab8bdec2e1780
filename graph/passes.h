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
/// A body that returns a tuple (a recurrent layer's `(output, (h, c))`) binds
/// each getitem user of the call to the tuple's item, which replaces it. The
/// copies belong to the call's module (NodeMeta module_path, module_type and
/// td_module are the call's) and name the call in errors
/// (shown_as). A tuple of nodes passed for one placeholder (an LSTM's state,
/// `lstm(x, (h, c))`) binds each getitem the body reads it with to the item. Calls
/// with other arguments that are not nodes, whose body reads a tuple argument
/// otherwise, or whose result is used otherwise than by getitem with a constant
/// index, are left alone.
/// Returns the number inlined; lint()s the graph. TDGraphModule::recompile() lowers an
/// edited view with it (tracer/lower_view.h).
size_t inline_call_modules(Graph& graph);

/// Makes in-place updates of values the program computed itself functional, as torch.export
/// does: `%sub_ = aten.sub_.Tensor(%t, %x)` becomes `%sub = aten.sub.Tensor(%t, %x)`, and what
/// reads `%t` after the update reads `%sub`. Then an allocation filled at once becomes one op:
/// `fill(empty_like(x), v)` is `full_like(x, v)` (C++'s `1 - x` is `empty_like` + `fill_` +
/// `sub_`, which becomes `full_like` + `sub`). An update stays in place, as an effect, when
/// its tensor is an input, a parameter, a buffer or a view (anything but the sole result of
/// an aten op whose result aliases no argument), when something read that tensor earlier in a
/// way that may share its memory (a view, another in-place op), when the op rebinds the
/// tensor's memory (`set_`, `resize_`, `resize_as_`), when the op has no functional
/// overload of the same arguments, or when a tensor argument's dtype, bool aside, differs from
/// the updated tensor's (the functional op would promote where the in-place one casts back).
/// Returns the number of nodes rewritten.
size_t functionalize(Graph& graph);

}  // namespace tdfx
