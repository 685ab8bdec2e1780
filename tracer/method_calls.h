#pragma once

/// \file
/// Which aten ops Python calls as Tensor methods: with TraceOptions::method_calls the graph
/// builder records those as call_method nodes, as torch.fx records `x.view(...)`, so that
/// the printed code is valid Python. A fact about torch 1.13's Python bindings, not about
/// any layer or graph, checked against Python by tests/tracer/test_fx_code.cpp, and kept as
/// the operator table's method-only and in-place-function facts (graph/op_table.h).

#include <string>

namespace tdfx::detail {

/// True for the aten ops that Python has as Tensor methods rather than torch functions
/// (`view`, `contiguous`, `to`) and for in-place ops that are Tensor methods (`sub_`,
/// `relu_`): with TraceOptions::method_calls they become call_method nodes.
///
///     prints_as_method("view")   // true: `x.view(...)`; there is no torch.view
///     prints_as_method("relu")   // false: `torch.relu(x)`
///     prints_as_method("relu_")  // true: `x.relu_()`
///     prints_as_method("elu_")   // false: `torch._C._nn.elu_(x)`
bool prints_as_method(const std::string& op_name);

}  // namespace tdfx::detail
