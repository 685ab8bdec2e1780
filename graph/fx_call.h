#pragma once

/// \file
/// The torch.fx face of a call_function node: the Python function or operator torch.fx
/// shows an aten call as (`torch.softmax(mul, dim = 1)`, `a * b`, `torch._C._nn.gelu`),
/// with its arguments as FX records them. Nodes keep aten targets with their schema; the
/// printers show them through this face.

#include <string>

#include "tdfx/graph/node.h"

namespace tdfx {

/// A call_function node as torch.fx shows it.
struct FxCall {
  /// `torch.relu`, `operator.mul`, `operator.getitem`.
  std::string target;
  /// For Python operators, the format of the expression (`{} * {}`), else "".
  std::string python_operator;
  /// Tensor arguments first, positionally.
  Args args;
  /// Other arguments that differ from their schema default, by name.
  Kwargs kwargs;
};

/// True for the aten ops that Python has in `torch._C._nn` and not in `torch` (`gelu`,
/// `softplus`, `linear`): torch.fx records torch.nn.functional's calls of them with targets
/// like `torch._C._nn.gelu`, and so does their face.
bool is_nn_function(const std::string& op);

/// True for the aten ops that Python has neither in `torch` nor in `torch._C._nn` nor as
/// Tensor methods (`slice`, `_to_copy`): their face is `torch.ops.aten.slice`, so that the
/// printed code still runs.
bool is_aten_only(const std::string& op);

/// The FX face of a call_function node (aten or getitem).
FxCall fx_call(const Node& node);
/// The FX face of a call of `target` with these arguments; `name` is the
/// node's name in messages.
FxCall fx_call(const Target& target, const Args& args, const Kwargs& kwargs,
               const std::string& name);

/// The name torch.fx gives a node calling `target` so: its face's function
/// name (`truediv` for `a / b` on aten::div.Tensor, `relu`, `getitem`). The
/// arguments are bound to the schema (and checked) only for the operators
/// that have a Python operator face; the name is all it gives.
std::string fx_name(const Target& target, const Args& args, const Kwargs& kwargs);

}  // namespace tdfx
