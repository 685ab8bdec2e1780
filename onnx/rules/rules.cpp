// The table of ONNX rules (rules.h): every family's rules, added once, by explicit calls.

#include "tdfx/onnx/rules/rules.h"

#include <fmt/format.h>

#include <utility>

namespace tdfx::onnx_detail {

void add_rules(RuleTable& table, RuleList entries) {
  for (const NamedRule& named : entries) {
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
