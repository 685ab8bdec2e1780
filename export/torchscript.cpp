#include "tdfx/export/torchscript.h"

#include <fmt/format.h>
#include <torch/csrc/jit/ir/ir.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/core/file_io.h"
#include "tdfx/core/python_repr.h"

namespace tdfx {
namespace {

// What the printer needs of the program: user inputs in signature order, the
// parameters and buffers it reads as attributes, and the output keys.
TorchScriptSignature printer_signature(const ExportedProgram& program) {
  TorchScriptSignature out;
  for (const auto& input : program.graph_signature().inputs) {
    (input.kind == InputKind::kUserInput ? out.inputs : out.attributes).push_back(input.name);
  }
  for (const auto& output : program.graph_signature().outputs)
    out.output_keys.push_back(output.key);
  return out;
}

TorchScriptForward print_forward(const ExportedProgram& program,
                                 const TorchScriptOptions& options) {
  return torchscript_forward(program.graph(), printer_signature(program), options.outputs);
}

std::string overload_str(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

// TorchScript picks overloads by argument types; make sure it picked the graph's.
void check_overloads(const torch::jit::Graph& graph, const std::vector<c10::OperatorName>& expected,
                     const std::string& source) {
  std::set<std::string> ops;
  for (const auto& name : expected) ops.insert(name.name);
  std::vector<std::string> resolved;
  for (const torch::jit::Node* node : graph.nodes()) {
    if (!ops.count(node->kind().toQualString())) continue;
    const c10::FunctionSchema* schema = node->maybeSchema();
    resolved.push_back(schema ? overload_str(schema->operator_name())
                              : std::string(node->kind().toQualString()) + " (no schema)");
  }
  std::vector<std::string> wanted;
  for (const auto& name : expected) wanted.push_back(overload_str(name));
  if (resolved != wanted) {
    fail<Error>("to_torchscript: TorchScript resolved the calls to {}, not {}; source:\n{}",
                fmt::join(resolved, ", "), fmt::join(wanted, ", "), source);
  }
}

}  // namespace

std::string torchscript_code(const ExportedProgram& program, const TorchScriptOptions& options) {
  return print_forward(program, options).source;
}

torch::jit::Module to_torchscript(const ExportedProgram& program,
                                  const TorchScriptOptions& options) {
  if (!is_python_identifier(options.name)) {
    fail<Error>("to_torchscript: the module name '{}' is not an identifier", options.name);
  }
  torch::jit::Module module{c10::QualifiedName("__torch__.tdfx." + options.name)};
  for (const auto& input : program.graph_signature().inputs) {
    if (input.kind == InputKind::kUserInput) continue;
    at::Tensor tensor = program.state().at(input.name).detach();
    if (input.kind == InputKind::kParameter) {
      module.register_parameter(input.name, tensor, /*is_buffer=*/false);
    } else {
      module.register_buffer(input.name, tensor);
    }
  }
  const TorchScriptForward forward = print_forward(program, options);
  try {
    module.define(forward.source);
  } catch (const c10::Error& e) {
    fail<Error>("to_torchscript: TorchScript rejected the generated forward: {}\nsource:\n{}",
                e.what_without_backtrace(), forward.source);
  }
  check_overloads(*module.get_method("forward").graph(), forward.overloads, forward.source);
  return module;
}

torch::jit::Module to_torchscript(const ExportedProgram& program, const std::string& name) {
  TorchScriptOptions options;
  options.name = name;
  return to_torchscript(program, options);
}

void save_torchscript(const ExportedProgram& program, const std::string& path,
                      const TorchScriptOptions& options) {
  const torch::jit::Module module = to_torchscript(program, options);
  // Serialised in memory first: TorchScript's own file writer aborts the
  // process when a write fails half-way.
  std::ostringstream bytes;
  try {
    module.save(bytes);
  } catch (const c10::Error& e) {
    fail<ArchiveError>("{}: cannot save the TorchScript module: {}", path,
                       e.what_without_backtrace());
  }
  write_file_atomically(path, bytes.str());
}

}  // namespace tdfx
