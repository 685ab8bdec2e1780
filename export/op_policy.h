#pragma once

/// \file
/// What a loaded program may do. A `.pt2` can come from anyone, so a loaded
/// graph runs only pure tensor computation: every aten operator must be on
/// an allowlist of tensor math, shape and creation operators (no file,
/// storage or raw-pointer operators such as `aten::from_file`, `aten::set_`,
/// `aten::as_strided`), and constant sizes must fit a memory budget. The
/// allowlist, the refusal reasons and the counted creation operators are facts
/// of the operator table (graph/op_table.cpp), which this file reads.

#include <cstdint>
#include <string_view>
#include <vector>

#include "tdfx/graph/graph.h"

namespace tdfx {

/// True when a loaded program may call the aten operator `name` (without
/// namespace or overload: `add`, `softmax`, `add_`). In-place variants are
/// allowed when their functional form is.
bool is_allowed_operator(std::string_view name);

/// Why an operator that is pure math is still refused (an index ATen does not check), or
/// null when there is no particular reason.
const char* refusal_reason(std::string_view name);

/// The allowlist itself (functional names, sorted), for tools and fuzzers.
std::vector<std::string_view> allowed_operators();

/// Checks a graph read from an untrusted archive, bodies included: only
/// placeholder, output, getitem, allowlisted aten calls and call_module nodes
/// with a body; no list of sizes (or single size of a creation operator)
/// asks for more than `memory_budget` bytes. ArchiveError naming the node and
/// the operator otherwise; `where` prefixes the message.
void check_program_operations(const Graph& graph, uint64_t memory_budget, const std::string& where);

}  // namespace tdfx
