#include "tdfx/core/enum_names.h"

#include <fmt/format.h>

namespace tdfx {
namespace {

template <typename Enum>
struct EnumName {
  Enum value;
  const char* name;  // the attribute of Python's torch module
};

// Python's names, checked against torch 1.13 by tests/graph/test_python_oracle.cpp.
constexpr EnumName<c10::MemoryFormat> kMemoryFormats[] = {
    {c10::MemoryFormat::Contiguous, "contiguous_format"},
    {c10::MemoryFormat::Preserve, "preserve_format"},
    {c10::MemoryFormat::ChannelsLast, "channels_last"},
    {c10::MemoryFormat::ChannelsLast3d, "channels_last_3d"},
};

constexpr EnumName<c10::Layout> kLayouts[] = {
    {c10::Layout::Strided, "strided"},      {c10::Layout::Sparse, "sparse_coo"},
    {c10::Layout::SparseCsr, "sparse_csr"}, {c10::Layout::SparseCsc, "sparse_csc"},
    {c10::Layout::SparseBsr, "sparse_bsr"}, {c10::Layout::SparseBsc, "sparse_bsc"},
    {c10::Layout::Mkldnn, "_mkldnn"},
};

// A value outside the table can only come from casting an int: it prints as
// `memory_format(9)`, which names its type and is no name torch has.
template <typename Enum, size_t N>
std::string name_of(const EnumName<Enum> (&table)[N], Enum value, const char* type) {
  for (const auto& row : table) {
    if (row.value == value) return row.name;
  }
  return fmt::format("{}({})", type, static_cast<int>(value));
}

template <typename Enum, size_t N>
std::optional<Enum> from_name(const EnumName<Enum> (&table)[N], std::string_view name) {
  for (const auto& row : table) {
    if (name == row.name) return row.value;
  }
  return std::nullopt;
}

}  // namespace

std::string memory_format_repr(c10::MemoryFormat format) {
  return "torch." + memory_format_name(format);
}

std::string memory_format_name(c10::MemoryFormat format) {
  return name_of(kMemoryFormats, format, "memory_format");
}

std::optional<c10::MemoryFormat> memory_format_from_name(std::string_view name) {
  return from_name(kMemoryFormats, name);
}

std::string layout_repr(c10::Layout layout) { return "torch." + layout_name(layout); }

std::string layout_name(c10::Layout layout) { return name_of(kLayouts, layout, "layout"); }

std::optional<c10::Layout> layout_from_name(std::string_view name) {
  return from_name(kLayouts, name);
}

}  // namespace tdfx
