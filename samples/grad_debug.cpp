// The README's gradient example: an RMS normaliser whose forward is finite and whose
// gradient is NaN. Writes DIR/rms_policy.pt2 (the exported pipeline) and DIR/obs.pt (an
// input with a row of zeros), for `tdfx run DIR/rms_policy.pt2 --input obs=DIR/obs.pt
// --backward --find-nonfinite-grad`.
//
//   build/bin/grad_debug DIR
#include <filesystem>
#include <iostream>

#include "samples/pipelines.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/export/tensor_file.h"

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::cerr << "usage: grad_debug DIR\n";
    return 1;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  auto pipeline = tdfx::samples::rms_pipeline();
  const tdfx::TensorDict input = tdfx::samples::rms_input(*pipeline);
  const tdfx::ExportedProgram program = tdfx::export_program(pipeline, {{"obs", input.get("obs")}});
  tdfx::save(program, (dir / "rms_policy.pt2").string());
  tdfx::save_tensor_file(tdfx::TensorEntries{{"obs", input.get("obs")}}, (dir / "obs.pt").string());
  std::cout << "wrote " << (dir / "rms_policy.pt2").string() << " and " << (dir / "obs.pt").string()
            << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "grad_debug: " << e.what() << "\n";
  return 1;
}
