#pragma once
// The body shared by the trace_* samples: trace, print graph and code, run
// the graph module and the eager module, report whether they agree bit for bit.

#include <iostream>

#include "tdfx/codegen/python_code.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/symbolic_trace.h"

namespace tdfx::samples {

/// Traces `module` on `input`; prints the graph, the code and the comparison;
/// draws the graph to `diagram` unless it is empty. Returns the exit code.
inline int trace_and_compare(const std::shared_ptr<TensorDictModuleBase>& module,
                             const TensorDict& input, const std::string& diagram = "") {
  TDGraphModule graph_module = symbolic_trace(module, input);
  std::cout << graph_module.graph() << "\n";
  std::cout << graph_module.code() << "\n";

  TensorDict eager(input);
  module->forward(eager);
  TensorDict traced(input);
  graph_module.forward(traced);
  bool identical = true;
  for (const NestedKey& key : module->selected_out_keys()) {
    const bool same = at::equal(eager.get(key), traced.get(key));
    std::cout << "output " << key << ": " << (same ? "bit-identical" : "DIFFERS") << "\n";
    identical &= same;
  }
  std::cout << (identical ? "all outputs bit-identical" : "outputs differ") << "\n";
  if (!diagram.empty()) {
    save_diagram(graph_module, diagram);
    std::cout << "wrote " << diagram << "\n";
  }
  return identical ? 0 : 1;
}

}  // namespace tdfx::samples
