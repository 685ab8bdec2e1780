#pragma once

/// \file
/// The names torch prints for dtypes, shared by every printer.

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <string_view>

namespace tdfx {

/// `torch.float32` for kFloat, as Python prints a dtype.
std::string dtype_repr(c10::ScalarType dtype);

/// torch's short name for annotations: `f32`, `i64`, `b8`.
std::string dtype_short(c10::ScalarType dtype);

/// torch's name without the module, `float32`, as archives store it.
std::string dtype_name(c10::ScalarType dtype);

/// The dtype named `float32` (one of the names in torch's table), or nullopt.
std::optional<c10::ScalarType> dtype_from_name(std::string_view name);

}  // namespace tdfx
