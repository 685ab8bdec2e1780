#pragma once

/// \file
/// TorchScript export of an ExportedProgram: a `torch::jit::Module` whose
/// attributes are the program's parameters and buffers and whose `forward`
/// runs the program's aten graph, loadable by `torch::jit::load` and by
/// Python's `torch.jit.load` without tdfx. The forward's source is printed by
/// codegen/torchscript_code.h.

#include <torch/csrc/jit/api/module.h>

#include <string>

#include "tdfx/codegen/torchscript_code.h"
#include "tdfx/export/program.h"

namespace tdfx {

/// How to_torchscript builds the module.
struct TorchScriptOptions {
  /// The module is `__torch__.tdfx.<name>`; an identifier.
  std::string name = "ExportedProgram";
  /// What forward returns: a tuple in output order, as ExportedModule does (the default), or
  /// a `Dict[str, Tensor]` keyed by each output's key joined with "." (`"loc"`,
  /// `"some.output"`), which keeps the keys the outputs were written to.
  TorchScriptOutputs outputs = TorchScriptOutputs::kTuple;
};

/// The program as a TorchScript module `__torch__.tdfx.<options.name>`. Each
/// lifted parameter/buffer is registered (detached) under its placeholder name;
/// the forward takes the user inputs by name and returns one tensor per program
/// output, as a tuple or (TorchScriptOutputs::kDict) a dict by joined key. The
/// forward is generated TorchScript source calling each aten overload of the
/// graph with every schema argument:
///
///     def forward(self, x: Tensor) -> Tuple[Tensor]:
///         linear = torch.linear(x, self.p_fc_weight, self.p_fc_bias)
///         relu = torch.relu(linear)
///         return (relu,)
///
/// and with `outputs = kDict` the last two lines are
///
///     def forward(self, x: Tensor) -> Dict[str, Tensor]:
///         ...
///         return {'action.logits': relu}
///
/// Throws tdfx::Error naming the node for what TorchScript export does not
/// cover (call_module, call_method, get_attr, nested-key constants), when an
/// overload does not resolve to the graph's one, or naming both keys when two
/// outputs' joined keys collide in the dict.
torch::jit::Module to_torchscript(const ExportedProgram& program,
                                  const TorchScriptOptions& options = {});

/// to_torchscript with the default options but the module name `name`.
torch::jit::Module to_torchscript(const ExportedProgram& program, const std::string& name);

/// The TorchScript source of `to_torchscript(program, options)`'s forward (for
/// reading and for error messages).
std::string torchscript_code(const ExportedProgram& program,
                             const TorchScriptOptions& options = {});

/// Saves `to_torchscript(program, options)` to `path` atomically: written to a
/// temporary file beside `path`, then renamed over it, so a failed save
/// leaves no file. A module TorchScript cannot save is an ArchiveError, a file that
/// cannot be written a FileError, both naming `path`.
void save_torchscript(const ExportedProgram& program, const std::string& path,
                      const TorchScriptOptions& options = {});

}  // namespace tdfx
