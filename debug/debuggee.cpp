#include "tdfx/debug/debuggee.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <deque>
#include <mutex>
#include <sstream>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/export/program.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace tdfx {

DebugRun::DebugRun(const Debuggee& debuggee) {
  if (!debuggee.module) {
    fail<Error>(
        "the debuggee has no graph: make it with debuggee(traced_module, tensordict) or "
        "debuggee(program, user_inputs)");
  }
  {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator_state_ = generator.get_state();
  }
  at::NoGradGuard no_grad;
  auto save = [&](const at::Tensor& buffer) {
    if (buffer.defined()) saved_.emplace_back(buffer, buffer.detach().clone());
  };
  if (const auto& root = debuggee.module->root()) {
    for (const auto& item : root->named_buffers(true)) save(item.value());
  }
  for (size_t index : debuggee.buffer_inputs) {
    if (index < debuggee.inputs.size() && debuggee.inputs[index].isTensor()) {
      save(debuggee.inputs[index].toTensor());
    }
  }
}

DebugRun::~DebugRun() {
  try {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(generator_state_);
  } catch (const std::exception&) {
    // A destructor must not throw; the state was read from this generator, so it fits.
  }
  at::NoGradGuard no_grad;
  for (auto& [buffer, copy] : saved_) {
    try {
      buffer.detach().copy_(copy);
    } catch (const std::exception&) {
      // A same-shaped copy does not fail in practice; a destructor must not throw.
    }
  }
}

Debuggee debuggee(const TDGraphModule& gm, const TensorDict& td) {
  Debuggee d;
  d.module = &gm.graph_module();
  d.inputs = gm.graph_inputs(td);
  d.output_keys = gm.out_keys();
  d.code = gm.code();
  d.parameter_prefix = gm.root_prefix();
  return d;
}

Debuggee debuggee(const ExportedProgram& program, const std::vector<at::Tensor>& user_inputs) {
  Debuggee d;
  const ExportedModule module = program.module();
  d.module = &program.graph_module();
  d.inputs = module.graph_inputs(user_inputs);
  for (const auto& out : program.graph_signature().outputs) d.output_keys.push_back(out.key);
  d.code = program.code();
  const auto& inputs = program.graph_signature().inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].kind == InputKind::kParameter) d.state_inputs.emplace_back(i, inputs[i].target);
    // A constant is put back as a buffer is: a stranger's program may write to it.
    if (inputs[i].kind == InputKind::kBuffer || inputs[i].kind == InputKind::kConstant) {
      d.buffer_inputs.push_back(i);
    }
  }
  return d;
}

std::string code_line(const std::string& code, const Node& node) {
  const std::string assigned = node.name() + " = ";
  std::istringstream lines(code);
  for (std::string line; std::getline(lines, line);) {
    const auto start = line.find_first_not_of(' ');
    if (start == std::string::npos) continue;
    const std::string_view text = std::string_view(line).substr(start);
    const bool def = text.rfind("def forward(", 0) == 0;
    if ((node.op() == OpCode::kPlaceholder && def) ||
        (node.op() == OpCode::kOutput && text.rfind("return ", 0) == 0) ||
        text.rfind(assigned, 0) == 0) {
      return std::string(text);
    }
  }
  return "";
}

std::optional<NestedKey> key_fed(const Debuggee& debuggee, const Node& node) {
  const std::vector<Node*> returned = output_values(debuggee.module->graph());
  if (returned.empty() || debuggee.output_keys.empty()) return std::nullopt;
  std::deque<const Node*> queue{&node};
  std::unordered_set<const Node*> seen{&node};
  while (!queue.empty()) {
    const Node* n = queue.front();
    queue.pop_front();
    for (size_t i = 0; i < returned.size() && i < debuggee.output_keys.size(); ++i) {
      if (returned[i] == n) return debuggee.output_keys[i];
    }
    for (const Node* user : n->users()) {
      if (seen.insert(user).second) queue.push_back(user);
    }
  }
  return std::nullopt;
}

}  // namespace tdfx
