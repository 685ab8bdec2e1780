// The table of ONNX rules (rules.h): every family's rules, added once, by explicit calls, each
// under an operator the operator table (graph/op_table.h) knows.

#include "tdfx/onnx/rules/rules.h"

#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "tdfx/graph/op_table.h"

namespace tdfx::onnx_detail {

void add_rules(RuleTable& table, RuleList entries) {
  for (const NamedRule& named : entries) {
    // Registered against the operator table: by the operator's name, less any overload.
    const std::string_view op = std::string_view(named.name).substr(0, named.name.find('.'));
    if (!detail::find_op(op)) {
      throw InternalError(fmt::format(
          "onnx export: a rule for aten::{}, an operator graph/op_table.cpp has no row for",
          named.name));
    }
    if (!table.emplace(named.name, named.entry).second) {
      throw InternalError(fmt::format("onnx export: two rules for aten::{}", named.name));
    }
  }
}

const RuleTable& rules() {
  static const auto* table = [] {
    RuleTable built;
    add_elementwise_rules(built);
    add_activation_rules(built);
    add_linear_algebra_rules(built);
    add_shape_rules(built);
    add_indexing_rules(built);
    add_creation_rules(built);
    add_reduction_rules(built);
    add_normalisation_rules(built);
    add_convolution_rules(built);
    add_recurrent_rules(built);
    add_loss_rules(built);
    return new RuleTable(std::move(built));
  }();
  return *table;
}

}  // namespace tdfx::onnx_detail
