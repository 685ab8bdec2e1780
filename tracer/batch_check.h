#pragma once

/// \file
/// Batch-size checks of a graph: the batch a trace was specialised to, and
/// the batch of an example or of one run's inputs. How a trace finds out
/// whether it holds at other batches is in batch_generalise.h.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tdfx/graph/node.h"
#include "tdfx/tensordict/tensordict.h"

namespace tdfx {

/// Why a traced graph runs at its traced batch size only.
struct BatchSpecialisation {
  /// The batch size of the example the graph was traced with.
  int64_t traced_batch = 0;
  /// The first node whose recording changes with the batch size (`reshape`),
  /// "" when the trace at another batch failed outright.
  std::string node;
  /// That node's TensorDictModule path ("1"), "" when unknown.
  std::string module;

  /// ShapeError unless `batch` is the traced batch size:
  /// `traced at batch 8; this input has batch 7, and %reshape (module 1) was specialised to it`.
  void check(int64_t batch) const;
};

namespace detail {

/// The batch size of a trace's example: its first declared batch dimension,
/// else the leading size all its tensors share; nullopt when there is none.
std::optional<int64_t> example_batch(const TensorDict& example);

/// The batch size of one run's inputs, by the same rule as example_batch.
std::optional<int64_t> input_batch(const std::vector<at::Tensor>& inputs);

/// ShapeError unless `input` fits `traced`, the metadata of the placeholder it is passed to:
/// the same number of dimensions, and the traced size in each dimension that does not follow
/// the batch (a sequence length the trace saw as a constant). `name` names the input.
void check_input_shape(const TensorMeta& traced, const at::Tensor& input, const std::string& name);

/// `example` with one more row: every tensor whose leading size is `batch`
/// gets its first row appended (and a declared batch dimension grows by one).
TensorDict widened(const TensorDict& example, int64_t batch);

}  // namespace detail
}  // namespace tdfx
