#include "tdfx/core/dtype_names.h"

namespace tdfx {
namespace {

struct DtypeName {
  c10::ScalarType dtype;
  const char* repr;
  const char* short_name;
};

// One row per dtype torch names; others fall back to c10's own name.
constexpr DtypeName kDtypeNames[] = {
    {c10::ScalarType::Float, "torch.float32", "f32"},
    {c10::ScalarType::Double, "torch.float64", "f64"},
    {c10::ScalarType::Half, "torch.float16", "f16"},
    {c10::ScalarType::BFloat16, "torch.bfloat16", "bf16"},
    {c10::ScalarType::ComplexHalf, "torch.complex32", "c32"},
    {c10::ScalarType::ComplexFloat, "torch.complex64", "c64"},
    {c10::ScalarType::ComplexDouble, "torch.complex128", "c128"},
    {c10::ScalarType::Long, "torch.int64", "i64"},
    {c10::ScalarType::Int, "torch.int32", "i32"},
    {c10::ScalarType::Short, "torch.int16", "i16"},
    {c10::ScalarType::Char, "torch.int8", "i8"},
    {c10::ScalarType::Byte, "torch.uint8", "u8"},
    {c10::ScalarType::Bool, "torch.bool", "b8"},
};

const DtypeName* find(c10::ScalarType dtype) {
  for (const auto& row : kDtypeNames) {
    if (row.dtype == dtype) return &row;
  }
  return nullptr;
}

}  // namespace

std::string dtype_repr(c10::ScalarType dtype) {
  const DtypeName* row = find(dtype);
  return row ? row->repr : std::string("torch.") + c10::toString(dtype);
}

std::string dtype_short(c10::ScalarType dtype) {
  const DtypeName* row = find(dtype);
  return row ? row->short_name : c10::toString(dtype);
}

std::string dtype_name(c10::ScalarType dtype) { return dtype_repr(dtype).substr(6); }

std::optional<c10::ScalarType> dtype_from_name(std::string_view name) {
  for (const auto& row : kDtypeNames) {
    if (std::string_view(row.repr).substr(6) == name) return row.dtype;
  }
  return std::nullopt;
}

}  // namespace tdfx
