#pragma once

/// \file
/// first_nonfinite: the first node of a run whose output holds NaN or Inf
/// while all its inputs are finite — where a pipeline that returns NaN went
/// wrong.
///
///     if (auto bad = first_nonfinite(debuggee(gm, td))) std::cout << bad->str();

#include <optional>
#include <string>
#include <vector>

#include "tdfx/debug/debuggee.h"

namespace tdfx {

/// Where non-finite values started.
struct NonFinite {
  ///@{
  /// The node, and its description as printed (`%log = torch.log(%_0_fc1)`).
  std::string node;
  std::string description;
  ///@}
  ///@{
  /// The module whose forward produced it ("0.module"; "" at the root), and the
  /// TensorDictModule call it belongs to ("0"; "" outside any).
  std::string module_path;
  std::string td_module;
  ///@}
  /// For the call of a layer (a call_module node of a traced module's view): the parameter
  /// or buffer its body reads that holds NaN or Inf, by its path from the graph's root
  /// (`0.module.bias`), where the call's own inputs are finite; "" otherwise.
  std::string state;
  /// The first output key its value flows into, when it reaches one.
  std::optional<NestedKey> key;
  /// Its line of printed code.
  std::string code_line;
  ///@{
  /// How many of the value's elements are NaN, how many are Inf, and how many it has in all.
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  int64_t numel = 0;
  ///@}
  ///@{
  /// For a tensor value: the rows (indices along dim 0, the batch) that hold NaN or Inf, the
  /// first few, and how many there are.
  std::vector<int64_t> rows;
  int64_t row_count = 0;
  ///@}
  /// For a tensor value: the indices of its first few NaN or Inf elements (row, feature, …).
  std::vector<std::vector<int64_t>> indices;

  /// A few lines for a person: node, counts, module, key, code line, rows and elements.
  std::string str() const;
};

/// Runs `debuggee` once and returns the first node, in program order, whose value (a
/// tensor, or any tensor of a tuple or list) holds NaN or Inf while every tensor it reads is
/// finite; nullopt when every value is finite. A placeholder or parameter that holds NaN is
/// itself the origin; where a layer's call is one node (a traced module's view), that node is,
/// and NonFinite::state names the parameter or buffer inside it that holds NaN or Inf.
std::optional<NonFinite> first_nonfinite(const Debuggee& debuggee);

}  // namespace tdfx
