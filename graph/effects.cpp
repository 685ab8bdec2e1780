#include "tdfx/graph/effects.h"

#include <string_view>
#include <unordered_map>

#include "tdfx/graph/graph.h"
#include "tdfx/graph/op_table.h"

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

// Training-mode normalisation with running statistics (arguments 3 and 4) writes them,
// although its schema does not say so.
bool writes_running_stats(const Node& node) {
  return updates_running_stats(node.target().op_name()) && !arg_is_none(node, 3) &&
         arg_is_true(node, 5);
}

constexpr std::string_view kUninitialised = "uninitialised";

// What an operator's schema and the operator table say of its effect, worked out once per
// operator and thread (aten_call_effect runs for every node of every pass that looks for
// effects): the effect, or which of its arguments decide it.
struct OperatorEffect {
  enum class Decider : uint8_t { kNone, kTrainingArg, kRunningStats };
  std::string_view effect;  // when decided by the operator alone
  Decider decider = Decider::kNone;
  uint8_t training_arg = 0;  // for kTrainingArg: the argument that says it is training
};

OperatorEffect operator_effect(const c10::FunctionSchema& schema, const std::string& name) {
  using Decider = OperatorEffect::Decider;
  if (schema.is_mutable()) return {"mutates"};
  if (schema.returns().empty()) return {"asserts"};
  const detail::OpRow* row = detail::find_op(name);
  const auto has = [row](detail::OpFact fact) { return row && row->has(fact); };
  if (has(detail::OpFact::kRandom)) return {"random"};
  // The dropouts and rrelu draw only when training.
  if (has(detail::OpFact::kDropoutLike)) return {"", Decider::kTrainingArg, row->training_arg};
  for (const c10::Argument& formal : schema.arguments()) {
    c10::TypePtr type = formal.real_type();
    if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
    if (type->kind() == c10::TypeKind::GeneratorType) return {"random"};
  }
  if (has(detail::OpFact::kRunningStats)) return {"", Decider::kRunningStats};
  if (has(detail::OpFact::kUninitialised)) return {kUninitialised};
  return {};
}

// The rule for one aten call, written as a function or as a method (whose first argument is
// `self`, so the argument positions are the same): its effect's word (effect_of), "" for none.
std::string_view aten_call_effect(const Node& node) {
  const c10::FunctionSchema& schema = node.target().schema();
  // By the schema's address, checked against its name: an operator registered after another
  // was removed may reuse the address.
  struct Cached {
    c10::OperatorName name;
    OperatorEffect effect;
  };
  thread_local std::unordered_map<const c10::FunctionSchema*, Cached> cache;
  auto it = cache.find(&schema);
  if (it == cache.end() || !(it->second.name == schema.operator_name())) {
    it = cache
             .insert_or_assign(&schema, Cached{schema.operator_name(),
                                               operator_effect(schema, node.target().op_name())})
             .first;
  }
  const OperatorEffect& effect = it->second.effect;
  switch (effect.decider) {
    case OperatorEffect::Decider::kNone:
      return effect.effect;
    case OperatorEffect::Decider::kTrainingArg:
      return arg_is_true(node, effect.training_arg) ? "random" : "";
    case OperatorEffect::Decider::kRunningStats:
      return writes_running_stats(node) ? "running stats" : "";
  }
  return "";
}

// A call_method given only a name (`g.call_method("add_", ...)` in an edit, which the plan
// refuses to run until it names an operator): by torch's naming, a method ending in one `_`
// updates its tensor in place, and the random ones draw.
std::string_view method_name_effect(const Node& node) {
  const std::string& name = node.target().str();
  if (name.size() > 1 && name.back() == '_' && name.front() != '_') return "mutates";
  return detail::op_has(name, detail::OpFact::kRandom) ? "random" : "";
}

}  // namespace

std::string_view effect_of(const Node& node) {
  switch (node.op()) {
    case OpCode::kCallFunction:
      return node.target().is_aten() ? aten_call_effect(node) : "";
    case OpCode::kCallMethod:
      return node.target().has_operator() ? aten_call_effect(node) : method_name_effect(node);
    case OpCode::kCallModule:
      if (!node.body()) return "";
      for (const Node* inner : node.body()->nodes()) {
        const std::string_view effect = effect_of(*inner);
        if (!effect.empty() && effect != kUninitialised) return effect;
      }
      return "";
    default:
      return "";
  }
}

bool updates_running_stats(std::string_view op_name) {
  return detail::op_has(op_name, detail::OpFact::kRunningStats);
}

bool has_effect(const Node& node) {
  const std::string_view effect = effect_of(node);
  return !effect.empty() && effect != kUninitialised;
}

std::vector<bool> inputs_written(const Graph& graph) {
  // The placeholders each node's value may be (a view of), by placeholder index.
  std::unordered_map<const Node*, std::vector<size_t>> roots;
  std::vector<bool> written;
  auto roots_of = [&](const Argument& arg) {
    std::vector<size_t> found;
    for_each_node(arg, [&](Node* n) {
      auto it = roots.find(n);
      if (it != roots.end()) found.insert(found.end(), it->second.begin(), it->second.end());
    });
    return found;
  };
  for (const Node* node : graph.nodes()) {
    if (node->op() == OpCode::kPlaceholder) {
      roots[node] = {written.size()};
      written.push_back(false);
      continue;
    }
    if (node->target().is_getitem()) {
      if (!node->args().empty()) {
        std::vector<size_t> found = roots_of(node->args()[0]);
        if (!found.empty()) roots[node] = std::move(found);
      }
      continue;
    }
    const bool aten = (node->op() == OpCode::kCallFunction && node->target().is_aten()) ||
                      (node->op() == OpCode::kCallMethod && node->target().has_operator());
    if (!aten) continue;
    const c10::FunctionSchema& schema = node->target().schema();
    const auto& formals = schema.arguments();
    const bool norm_writes = writes_running_stats(*node);
    std::vector<size_t> aliased;  // what a result aliasing an argument may be
    for (size_t i = 0; i < formals.size(); ++i) {
      const Argument* arg = argument_at(*node, i);
      if (!arg) continue;
      const c10::AliasInfo* alias = formals[i].alias_info();
      const bool writes = (alias && alias->isWrite()) || (norm_writes && (i == 3 || i == 4));
      if (!alias && !writes) continue;
      const std::vector<size_t> found = roots_of(*arg);
      if (writes) {
        for (const size_t root : found) written[root] = true;
      }
      if (alias) aliased.insert(aliased.end(), found.begin(), found.end());
    }
    bool result_aliases = false;
    for (const c10::Argument& ret : schema.returns()) result_aliases |= ret.alias_info() != nullptr;
    if (result_aliases && !aliased.empty()) roots[node] = std::move(aliased);
  }
  return written;
}

}  // namespace tdfx
