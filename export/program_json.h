#pragma once

/// \file
/// Writing an archive's program.json: the graph, signature, module table and batch
/// specialisation as JSON, and the tensors (weights, example inputs, an optimizer's state) as
/// records of raw bytes with their entries.

#include <ATen/core/Tensor.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tdfx/export/program.h"

namespace tdfx::detail {

/// Each weight, and each example input, is one record of raw bytes, C-contiguous and
/// little-endian, and one entry of `weights` (or `inputs`) in program.json saying its record,
/// dtype and shape.
struct WeightRecords {
  nlohmann::json entries = nlohmann::json::array();
  nlohmann::json inputs = nlohmann::json::array();
  // The optimizer's state, `optimizer/N` records for its tensors; null when there is none.
  nlohmann::json optimizer;
  std::vector<std::pair<std::string, at::Tensor>> records;
};

/// The records of `program`'s weights, example inputs and optimizer state; ArchiveError for a
/// tensor of a dtype archives do not store.
WeightRecords weight_records(const ExportedProgram& program);

/// program.json's text; ArchiveError naming a string JSON cannot hold, by where it is.
std::string document_text(const ExportedProgram& program, const WeightRecords& weights);

}  // namespace tdfx::detail
