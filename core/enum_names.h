#pragma once

/// \file
/// The names torch gives memory formats and layouts (`torch.channels_last`,
/// `torch.strided`), shared by every printer and the archive. Dtypes have
/// their own table in core/dtype_names.h.

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>

#include <optional>
#include <string>
#include <string_view>

namespace tdfx {

/// `torch.channels_last` for ChannelsLast, as Python prints a memory format.
std::string memory_format_repr(c10::MemoryFormat format);

/// The name without the module, `channels_last`, as archives store it.
std::string memory_format_name(c10::MemoryFormat format);

/// The memory format named `channels_last` (a name of torch's), or nullopt.
std::optional<c10::MemoryFormat> memory_format_from_name(std::string_view name);

/// `torch.sparse_coo` for Sparse, as Python prints a layout.
std::string layout_repr(c10::Layout layout);

/// The name without the module, `sparse_coo`, as archives store it.
std::string layout_name(c10::Layout layout);

/// The layout named `sparse_coo` (a name of torch's), or nullopt.
std::optional<c10::Layout> layout_from_name(std::string_view name);

}  // namespace tdfx
