#include "tdfx/debug/debuggee.h"

#include <deque>
#include <sstream>
#include <unordered_set>

#include "tdfx/export/program.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace tdfx {

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
    if (inputs[i].kind == InputKind::kBuffer) d.buffer_inputs.push_back(i);
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
