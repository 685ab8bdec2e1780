#include "tdfx/graph/effects.h"

#include <set>
#include <string_view>

namespace tdfx {
namespace {

bool arg_is_true(const Node& node, size_t i) {
  return i < node.args().size() && node.args()[i].is<bool>() && node.args()[i].as<bool>();
}

bool arg_is_none(const Node& node, size_t i) {
  return i >= node.args().size() || node.args()[i].is<None>();
}

}  // namespace

bool has_effect(const Node& node) {
  if (node.op() != OpCode::kCallFunction || !node.target().is_aten()) return false;
  const c10::FunctionSchema& schema = node.target().schema();
  if (schema.is_mutable() || schema.returns().empty()) return true;
  static const std::set<std::string_view> random = {
      "bernoulli", "multinomial", "normal",  "poisson",      "rand",    "rand_like",
      "randn",     "randn_like",  "randint", "randint_like", "randperm"};
  // The dropouts draw only when training (their third argument).
  static const std::set<std::string_view> dropouts = {"dropout",        "feature_dropout",
                                                      "alpha_dropout",  "feature_alpha_dropout",
                                                      "native_dropout", "rrelu"};
  const std::string& name = node.target().op_name();
  if (random.count(name)) return true;
  if (dropouts.count(name)) return name == "rrelu" ? arg_is_true(node, 3) : arg_is_true(node, 2);
  for (const c10::Argument& formal : schema.arguments()) {
    c10::TypePtr type = formal.real_type();
    if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
    if (type->kind() == c10::TypeKind::GeneratorType) return true;
  }
  // Training-mode normalisation with running statistics writes them.
  const bool norm = name == "batch_norm" || name == "instance_norm" ||
                    name == "native_batch_norm" || name == "_batch_norm_impl_index";
  return norm && !arg_is_none(node, 3) && arg_is_true(node, 5);
}

}  // namespace tdfx
