#pragma once

/// \file
/// The `modules` table of program.json (format version 3): the TensorDictModules and nested
/// sequentials an exported program came from, which its diagrams draw (the module view, and
/// the op view's boxes).
///
///     "modules": [{"path": "module.0", "type": "Linear",
///                  "label": "Linear(in_features=3, out_features=4, bias=true)",
///                  "sequential": false, "in_keys": [{"key": ["x"], "is_tuple": false}],
///                  "out_keys": [...], "parameters": 16, "buffers": 0}, ...]

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tdfx/graph/graph.h"
#include "tdfx/tensordict/module_box.h"

namespace tdfx::detail {

/// `modules` as program.json keeps them.
nlohmann::json modules_to_json(const std::vector<ModuleBox>& modules);

/// The table read back, checked as untrusted: each path a module path (or "" for a root
/// module, which is no sequential) and given once; type and label without control
/// characters; keys as the signature's; counts non-negative; and every node's `td_module`
/// one of the paths. ArchiveError saying where and what.
std::vector<ModuleBox> modules_from_json(const nlohmann::json& table, const Graph& graph,
                                         const std::string& where);

}  // namespace tdfx::detail
