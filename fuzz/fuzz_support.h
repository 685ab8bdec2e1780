#pragma once
// Shared by the fuzz targets: a real program to start from, and running
// whatever the loader accepts. Any exception but tdfx::Error is a finding.

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/zip.h"

namespace tdfx::fuzz {

/// Seed 000's exported program (fixed weights).
inline const ExportedProgram& seed_program() {
  static const ExportedProgram program = [] {
    at::manual_seed(0);
    return export_program(samples::seed_000_model(), {{"x", at::randn({1, 3})}});
  }();
  return program;
}

/// Loads `archive`; when it loads, prints it every way and runs it on small
/// inputs of its placeholders' meta. Refusals and run errors are tdfx::Error.
inline void load_print_run(const std::string& archive) {
  LoadOptions options;
  options.memory_budget = uint64_t{64} << 20;  // keeps the fuzzer's memory bounded
  try {
    const ExportedProgram program = load_bytes(archive, "fuzz", options);
    (void)program.print_readable();
    (void)program.code();
    (void)to_string(program.graph());
    (void)program.graph_signature().str();
    std::vector<at::Tensor> inputs;
    for (const InputSpec& in : program.graph_signature().inputs) {
      if (in.kind != InputKind::kUserInput) continue;
      const Node* node = nullptr;
      for (const Node* n : program.graph().nodes()) {
        if (n->name() == in.name) node = n;
      }
      const TensorMeta& meta = node->meta().tensor;
      if (!meta.shape || !meta.dtype) return;
      int64_t numel = 1;
      for (int64_t d : *meta.shape) {
        if (d > 64) return;
        numel *= d;
      }
      if (numel > 4096) return;
      inputs.push_back(at::ones(*meta.shape, at::TensorOptions().dtype(*meta.dtype)));
    }
    (void)program.module()(inputs);
  } catch (const Error&) {
    // Refused, or failed while running with a message: what tdfx promises.
  }
}

}  // namespace tdfx::fuzz
