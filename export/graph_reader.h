#pragma once

/// \file
/// Reading a program from program.json, checked as untrusted: its graph (`nodes`), its
/// signature and its batch specialisation. Anything wrong is an ArchiveError saying where and
/// what.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tdfx/export/program.h"
#include "tdfx/graph/graph.h"
#include "tdfx/tracer/batch_check.h"

namespace tdfx::detail {

/// The graph of `nodes` (program.json's `nodes`), bodies included: each node's name a legal,
/// unreserved identifier given once, its op one a loaded program may hold (no get_attr or
/// call_method), its arguments well formed and reading only nodes before it, its names and
/// metadata checked, and the graph linted.
Graph graph_from_json(const nlohmann::json& nodes, const std::string& where);

/// The signature as program.json keeps it (`inputs` with their kinds, `outputs` with their
/// keys); check_signature checks it against the graph.
GraphSignature signature_from_json(const nlohmann::json& value, const std::string& where);

/// The signature must describe the graph exactly: its inputs are the
/// placeholders in order, its outputs the nodes the output node returns.
void check_signature(const Graph& graph, const GraphSignature& signature, const std::string& where);

/// A batch specialisation names a node of the graph (or none) and a batch of 0 or more.
std::optional<BatchSpecialisation> specialisation_from_json(const nlohmann::json& document,
                                                            const Graph& graph,
                                                            const std::string& where);

}  // namespace tdfx::detail
