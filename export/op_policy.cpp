#include "tdfx/export/op_policy.h"

#include <algorithm>
#include <limits>

#include "tdfx/core/error.h"
#include "tdfx/graph/op_table.h"
#include "tdfx/graph/value_type.h"

namespace tdfx {
namespace {

// Whether a loaded program may call `name` itself: a loadable row of the operator table.
bool allowed_exactly(std::string_view name) {
  return detail::op_has(name, detail::OpFact::kLoadable);
}

// The number of elements a constant argument asks for: the product of an int
// list, or an int itself for counted creation operators; 0 when it asks for none.
uint64_t requested_elements(const Argument& arg, bool counts) {
  if (counts && arg.is<int64_t>())
    return static_cast<uint64_t>(std::max<int64_t>(arg.as<int64_t>(), 0));
  if (!arg.is<ArgumentList>()) return 0;
  uint64_t product = 1;
  bool all_ints = true;
  for (const Argument& item : arg.as<ArgumentList>().items) {
    if (!item.is<int64_t>()) {
      all_ints = false;
      break;
    }
    const int64_t v = item.as<int64_t>();
    const auto d = static_cast<uint64_t>(v < 0 ? 0 : v);
    if (d != 0 && product > std::numeric_limits<uint64_t>::max() / d)
      return std::numeric_limits<uint64_t>::max();
    product *= d;
  }
  return all_ints ? product : 0;
}

void check_graph(const Graph& graph, uint64_t budget, const std::string& where) {
  for (const Node* node : graph.nodes()) {
    switch (node->op()) {
      case OpCode::kPlaceholder:
      case OpCode::kOutput:
        break;
      case OpCode::kGetAttr:
      case OpCode::kCallMethod:
        fail<ArchiveError>("{}: node %{} is a {} ('{}'); a loaded program runs aten operators only",
                           where, node->name(), to_string(node->op()), node->target().str());
      case OpCode::kCallModule:
        if (!node->body()) {
          fail<ArchiveError>("{}: call_module %{} has no body graph to run", where, node->name());
        }
        check_graph(*node->body(), budget, where);
        break;
      case OpCode::kCallFunction: {
        // Indexing and int arithmetic (checked for overflow as it runs) allocate nothing.
        if (node->target().is_getitem()) break;
        if (node->target().is_size_arith()) {
          const bool by_zero = node->target().arith() == Target::SizeArith::kFloorDiv &&
                               node->args().size() == 2 && node->args()[1].is<int64_t>() &&
                               node->args()[1].as<int64_t>() == 0;
          if (by_zero)
            fail<ArchiveError>("{}: node %{}: operator.floordiv divides by zero", where,
                               node->name());
          break;
        }
        const std::string& op = node->target().op_name();
        if (node->target().str().rfind("aten::", 0) != 0 || !is_allowed_operator(op)) {
          if (const char* why = refusal_reason(op)) {
            fail<ArchiveError>("{}: node %{} calls {}, which a loaded program may not run: {}",
                               where, node->name(), node->target().str(), why);
          }
          fail<ArchiveError>(
              "{}: node %{} calls {}, which a loaded program may not run (only pure tensor "
              "operators are allowed: tdfx::allowed_operators() lists them)",
              where, node->name(), node->target().str());
        }
        const bool counts = detail::op_has(op, detail::OpFact::kCountedCreation);
        auto check = [&](const Argument& arg) {
          const uint64_t elements = requested_elements(arg, counts);
          // Eight bytes an element: the widest real dtype.
          if (elements > budget / 8) {
            fail<ArchiveError>(
                "{}: node %{} ({}) asks for {} elements, over the memory budget of {} bytes "
                "(LoadOptions::memory_budget)",
                where, node->name(), node->target().str(), elements, budget);
          }
        };
        for (const Argument& arg : node->args()) check(arg);
        for (const auto& [name, arg] : node->kwargs()) check(arg);
        break;
      }
    }
  }
}

}  // namespace

const char* refusal_reason(std::string_view name) {
  const detail::OpRow* row = detail::find_op(name);
  return row ? row->refusal : nullptr;
}

bool is_allowed_operator(std::string_view name) {
  if (allowed_exactly(name)) return true;
  // In-place variants (`add_`, `relu_`) of allowed operators; not `_foo` privates.
  return name.size() > 1 && name.back() == '_' && allowed_exactly(name.substr(0, name.size() - 1));
}

std::vector<std::string_view> allowed_operators() {
  std::vector<std::string_view> names;
  for (const detail::OpRow& row : detail::op_rows()) {
    if (row.has(detail::OpFact::kLoadable)) names.push_back(row.name);
  }
  return names;
}

void check_program_operations(const Graph& graph, uint64_t memory_budget,
                              const std::string& where) {
  check_graph(graph, memory_budget, where);
  // Every value is taken as its type allows (getitem of a list or tuple, arithmetic on ints).
  try {
    check_value_types(graph, ValueTypes(graph));
  } catch (const GraphError& e) {
    fail<ArchiveError>("{}: {}", where, e.what());
  }
}

}  // namespace tdfx
