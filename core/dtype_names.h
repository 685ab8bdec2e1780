#pragma once

/// \file
/// The names torch prints for dtypes, shared by every printer.

#include <c10/core/ScalarType.h>

#include <string>

namespace tdfx {

/// `torch.float32` for kFloat, as Python prints a dtype.
std::string dtype_repr(c10::ScalarType dtype);

/// torch's short name for annotations: `f32`, `i64`, `b8`.
std::string dtype_short(c10::ScalarType dtype);

}  // namespace tdfx
