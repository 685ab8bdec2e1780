#pragma once

/// \file
/// Reading an archive's tensors: its weights, its example inputs and an optimizer's state, as
/// program.json's entries name them, from the records of the zip.

#include <ATen/core/Tensor.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tdfx/export/archive.h"
#include "tdfx/export/optimizer_state.h"
#include "tdfx/export/program.h"
#include "tdfx/export/zip.h"
#include "tdfx/graph/graph.h"

namespace tdfx::detail {

/// The tensors of an archive: its weights (`weights`, one per parameter and buffer input) and,
/// in version 4, its example inputs (`inputs`, any of the user inputs). Each entry names a
/// placeholder, a record of its own, a dtype and a shape, checked against the placeholder's
/// (a dimension that follows the batch may differ for an input) and, with every tensor read
/// before it, against the memory budget before anything is allocated.
struct ArchiveTensors {
  std::map<std::string, at::Tensor> weights, inputs;
  std::optional<OptimizerState> optimizer;
};

/// The tensors of `graph` (loaded, and described by `signature`) that program.json's entries
/// name, read from `zip`'s records: `weights`, the weights' entries; `inputs`, the example
/// inputs', or null; `optimizer`, an optimizer's state, or null. A record of `zip` that none of
/// them names (other than program.json) is refused. ArchiveError saying where and what.
ArchiveTensors tensors_from_json(const nlohmann::json& weights, const nlohmann::json* inputs,
                                 const nlohmann::json* optimizer, const Graph& graph,
                                 const GraphSignature& signature, const ZipReader& zip,
                                 const LoadOptions& options, const std::string& where);

}  // namespace tdfx::detail
