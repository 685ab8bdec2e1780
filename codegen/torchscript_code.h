#pragma once

/// \file
/// The TorchScript source printer: a graph of aten calls as the `forward` of a
/// TorchScript module, with the aten overload each call must resolve to (what
/// export/torchscript.h compiles and checks).

#include <ATen/core/operator_name.h>

#include <string>
#include <string_view>
#include <vector>

#include "tdfx/core/nested_key.h"
#include "tdfx/graph/graph.h"

namespace tdfx {

/// How a TorchScript forward returns the graph's outputs.
enum class TorchScriptOutputs {
  /// `-> Tuple[Tensor, Tensor]`, one tensor per output in output order, as ExportedModule
  /// returns them: `return (loc, scale)`.
  kTuple,
  /// `-> Dict[str, Tensor]` keyed by each output's key joined with "." (tensordict's
  /// flatten_keys separator: ("a", "b") is "a.b", "loc" is "loc"), in output order:
  /// `return {'loc': loc, 'a.b': scale}`.
  kDict,
};

/// What the printer needs to know of a program besides its graph.
struct TorchScriptSignature {
  /// The placeholders the forward takes as parameters, in order (the user inputs: `x`).
  std::vector<std::string> inputs;
  /// The placeholders read as module attributes (`self.p_fc_weight`): the parameters and
  /// buffers, which the module registers under these names.
  std::vector<std::string> attributes;
  /// The key of each value the output node returns, in its order; TorchScriptOutputs::kDict
  /// needs one per output, kTuple does not read them.
  std::vector<NestedKey> output_keys;
};

/// A printed forward and what TorchScript must make of it.
struct TorchScriptForward {
  /// `def forward(self, x: Tensor) -> Tuple[Tensor]:` and its body, 4-space indented.
  std::string source;
  /// The operator each aten call must resolve to, in graph order (`aten::add.Scalar` where the
  /// graph adds a number to a tensor through `aten::add.Tensor`; see torchscript_forward).
  std::vector<c10::OperatorName> overloads;
};

/// `graph` as TorchScript source calling each aten overload with every schema argument, after
/// an assert of each user input's traced rank and sizes (but for the dimensions that follow
/// the batch, TensorMeta::batch_dims), so that a static program refuses another batch in
/// TorchScript as ExportedModule does:
///
///     def forward(self, x: Tensor) -> Tuple[Tensor]:
///         assert x.dim() == 2 and x.size(1) == 3, 'input x has another shape than [s0, 3], ...'
///         linear = torch.linear(x, self.p_fc_weight, self.p_fc_bias)
///         relu = torch.relu(linear)
///         return (relu,)
///
/// A number where the schema takes a Tensor goes to the overload that takes a Scalar when
/// there is one (`add.Tensor` → `add.Scalar`, which wraps it as the graph runner does), else
/// becomes `torch.tensor(v, dtype=...)`; enums are the ints TorchScript types them as; an
/// empty list or one holding None is a local named with its type. Throws tdfx::Error naming
/// the node for what TorchScript cannot express here (call_module, call_method, get_attr,
/// nested-key constants, a name that is not an identifier), and, for kDict, naming both keys
/// when two outputs' joined keys are the same, or the key when it holds a carriage return
/// (TorchScript 1.13 saves one as `\r`, which its loader refuses).
TorchScriptForward torchscript_forward(const Graph& graph, const TorchScriptSignature& signature,
                                       TorchScriptOutputs outputs = TorchScriptOutputs::kTuple);

/// `text` as a TorchScript string literal: Python's repr (python_repr) where TorchScript reads
/// that back, with the control characters TorchScript has no short escape for (`\r`, `\x01`)
/// as 3-digit octal escapes (`\015`), since its lexer refuses `\x` and `\r`.
std::string torchscript_string(std::string_view text);

}  // namespace tdfx
