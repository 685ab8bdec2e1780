#include "tdfx/export/program_diagram.h"

namespace tdfx {

RenderOptions diagram_options(const ExportedProgram& program) {
  RenderOptions options;
  options.modules = program.modules();
  for (const OutputSpec& output : program.graph_signature().outputs) {
    options.output_keys.push_back(output.key);
  }
  return options;
}

}  // namespace tdfx
