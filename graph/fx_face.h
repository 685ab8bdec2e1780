#pragma once

/// \file
/// The torch.fx face of a node: how a call prints in FX style. Nodes keep aten
/// targets with their schema; printers show them as torch.fx would
/// (`torch.softmax(mul, dim = 1)`, `a * b`), and run them through the
/// dispatcher. This file holds that mapping and FX's two ways of printing an
/// argument (`str` in graph text, `repr` in code).

#include <ATen/core/ivalue.h>

#include <string>

#include "tdfx/core/dtype_names.h"
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
/// name (`truediv` for `a / b` on aten::div.Tensor, `relu`, `getitem`).
std::string fx_name(const Target& target, const Args& args, const Kwargs& kwargs);

/// The full argument list of an aten node in schema order: positional
/// arguments, then keyword arguments by name, then schema defaults. Throws
/// GraphError naming the node when an argument is missing or unknown.
Args schema_arguments(const Node& node);
/// schema_arguments() of a call not yet in a graph; `name` is used in messages.
Args schema_arguments(const Target& target, const Args& args, const Kwargs& kwargs,
                      const std::string& name);

/// An int whose schema type (`type`, a real_type(): `MemoryFormat?`) is a dtype,
/// memory format or layout, as that enum (`torch.channels_last`, not `2`); any
/// other int, and one outside the enum, stays an int.
Argument enum_or_int(int64_t value, const c10::TypePtr& type);

/// True when `arg` equals the schema default `value`.
bool equals_default(const Argument& arg, const c10::IValue& value);

/// An argument as torch.fx's graph text prints it (`%x`, `(input, x)`, `1e-05`).
std::string fx_str(const Argument& arg);
/// An argument as torch.fx's generated code prints it (`x`, `('input', 'x')`).
std::string fx_repr(const Argument& arg);
/// A node's positional arguments as torch.fx's graph text prints them: `(%x, 1)`.
std::string fx_args_str(const Args& args);
/// A node's keyword arguments as torch.fx's graph text prints them: `{dim: 1}`.
std::string fx_kwargs_str(const Kwargs& kwargs);

}  // namespace tdfx
