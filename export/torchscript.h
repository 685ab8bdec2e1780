#pragma once

/// \file
/// TorchScript export of an ExportedProgram: a `torch::jit::Module` whose
/// attributes are the program's parameters and buffers and whose `forward`
/// runs the program's aten graph, loadable by `torch::jit::load` and by
/// Python's `torch.jit.load` without tdfx.

#include <torch/csrc/jit/api/module.h>

#include <string>

#include "tdfx/export/program.h"

namespace tdfx {

/// The program as a TorchScript module `__torch__.tdfx.<name>`. Each lifted
/// parameter/buffer is registered (detached) under its placeholder name; the
/// forward takes the user inputs by name and always returns a tuple, one
/// tensor per program output, as ExportedModule does. The forward is generated
/// TorchScript source calling each aten overload of the graph with every
/// schema argument:
///
///     def forward(self, x: Tensor) -> Tuple[Tensor]:
///         linear = torch.linear(x, self.p_fc_weight, self.p_fc_bias)
///         relu = torch.relu(linear)
///         return (relu,)
///
/// Throws tdfx::Error naming the node for what TorchScript export does not
/// cover (call_module, call_method, get_attr, nested-key constants) or when an
/// overload does not resolve to the graph's one.
torch::jit::Module to_torchscript(const ExportedProgram& program,
                                  const std::string& name = "ExportedProgram");

/// The TorchScript source of `to_torchscript(program)`'s forward (for reading
/// and for error messages).
std::string torchscript_code(const ExportedProgram& program);

/// Saves `to_torchscript(program)` to `path` atomically: written to a
/// temporary file beside `path`, then renamed over it, so a failed save
/// leaves no file. Throws ArchiveError naming `path` on failure.
void save_torchscript(const ExportedProgram& program, const std::string& path);

}  // namespace tdfx
