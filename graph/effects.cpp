#include "tdfx/graph/effects.h"

#include <set>
#include <string_view>

namespace tdfx {
namespace {

// Argument `i` of an aten call, given by position or by its schema name (an edited graph may
// pass it as a keyword); null when left to its default.
const Argument* argument_at(const Node& node, size_t i) {
  if (i < node.args().size()) return &node.args()[i];
  const auto& formals = node.target().schema().arguments();
  if (i >= formals.size()) return nullptr;
  for (const auto& [name, value] : node.kwargs()) {
    if (name == formals[i].name()) return &value;
  }
  return nullptr;
}

// Both defaults (False, None) are what these answer for an argument left out.
bool arg_is_true(const Node& node, size_t i) {
  const Argument* arg = argument_at(node, i);
  return arg && arg->is<bool>() && arg->as<bool>();
}

bool arg_is_none(const Node& node, size_t i) {
  const Argument* arg = argument_at(node, i);
  return !arg || arg->is<None>();
}

// The rule for one aten call, written as a function or as a method (whose first argument is
// `self`, so the argument positions are the same).
bool aten_call_has_effect(const Node& node) {
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

}  // namespace

bool has_effect(const Node& node) {
  switch (node.op()) {
    case OpCode::kCallFunction:
      return node.target().is_aten() && aten_call_has_effect(node);
    case OpCode::kCallMethod:
      return node.target().has_operator() && aten_call_has_effect(node);
    case OpCode::kCallModule:
      if (!node.body()) return false;
      for (const Node* inner : node.body()->nodes()) {
        if (has_effect(*inner)) return true;
      }
      return false;
    default:
      return false;
  }
}

}  // namespace tdfx
