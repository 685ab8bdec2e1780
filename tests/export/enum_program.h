#pragma once
// A program whose operators take memory formats and layouts, exported from a traced module:
// shared by the archive and TorchScript tests.

#include <ATen/ATen.h>

#include "tdfx/export/program.h"
#include "tdfx/tensordict/modules.h"

namespace tdfx::testing {

/// clone to channels-last, zeros_like with a layout and a memory format, and `to` a double
/// with a layout: the program prints `torch.channels_last`, `torch.strided`, ...
inline at::Tensor memory_formats_forward(const at::Tensor& x) {
  const at::Tensor c = x.clone(at::MemoryFormat::ChannelsLast);
  const at::Tensor z =
      at::zeros_like(c, at::TensorOptions().layout(at::kStrided), at::MemoryFormat::Contiguous);
  return (c + z).to(at::TensorOptions().dtype(at::kDouble).layout(at::kStrided));
}

/// memory_formats_forward exported at an "x" of `x`'s shape.
inline ExportedProgram memory_formats_program(const at::Tensor& x) {
  return export_program(make_td_module(memory_formats_forward, {"x"}, {"y"}), {{"x", x}});
}

}  // namespace tdfx::testing
