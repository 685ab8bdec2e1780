#pragma once

/// \file
/// The table of ONNX rules, one per aten operator (or overload), each returning the node's
/// value: what the converter looks an operator up in (the rules are in onnx_export.cpp).
/// Internal to the onnx library (namespace onnx_detail).

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "tdfx/onnx/converter.h"

namespace tdfx::onnx_detail {

/// A rule: writes the node being converted (Converter::node()) as ONNX nodes and returns its
/// value.
using Rule = std::function<Value(Converter&)>;
/// A rule and the ONNX ops it writes, as onnx_operators() lists them.
struct RuleEntry {
  std::string_view onnx;
  Rule rule;
};
/// The rules by aten operator (`linear`), or by overload (`max.dim`), sorted by name.
using RuleTable = std::map<std::string, RuleEntry, std::less<>>;

/// Every rule: the table built on first use.
const RuleTable& rules();

}  // namespace tdfx::onnx_detail
