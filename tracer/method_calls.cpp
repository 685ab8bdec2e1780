#include "tdfx/tracer/method_calls.h"

#include "tdfx/graph/op_table.h"

namespace tdfx::detail {

bool prints_as_method(const std::string& op) {
  // What Python has as a Tensor method but not as a torch function, and the in-place ops that
  // are functions only: the operator table's facts (torch 1.13; checked against Python by
  // tests/tracer/test_fx_code.cpp).
  const OpRow* row = find_op(op);
  if (row && row->has(OpFact::kMethodOnly)) return true;
  // Every other in-place op but the private ones is a Tensor method; C++ calls it as one
  // (`x.sub_(1)`), and some (`sub_`) exist only so.
  const bool inplace = op.size() > 1 && op.back() == '_' && op[0] != '_';
  return inplace && !(row && row->has(OpFact::kInPlaceFunction));
}

}  // namespace tdfx::detail
