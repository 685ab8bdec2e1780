#pragma once

/// \file
/// Whether a trace holds at other batch sizes. C++ reads sizes as plain integers the tracer
/// cannot see, so a module that computes `reshape({x.size(0), -1})` or loops
/// `x.size(0)` times records the example's batch as a constant. The module
/// is therefore recorded a second time at the next batch size (the example's
/// first rows repeated) and the two recordings are compared op by op:
/// - the same ops with the same constants: the graph runs at any batch;
/// - the same ops, but a constant is the batch in one and batch + 1 in the
///   other, where the op takes a tensor with a dimension of that size: the
///   constant becomes a size node (`size = x.size(0)`), and the graph runs
///   at any batch;
/// - anything else (a loop over the batch, a size of a tensor the op does not
///   take, another multiple of it): the graph is specialised, and every run
///   checks its input's batch against the traced one (ShapeError naming the
///   first node that differs).
/// An example of batch 0 has no row to repeat: its graph is specialised. The
/// dimensions that follow the batch are marked on the nodes
/// (TensorMeta::batch_dims); every other dimension of an input must be as
/// traced (check_input_shape in batch_check.h).

#include <optional>

#include "tdfx/tracer/batch_check.h"
#include "tdfx/tracer/graph_builder.h"
#include "tdfx/tracer/recorder.h"

namespace tdfx::detail {

/// A recording of a module, compared with one at the next batch size.
struct CheckedRecording {
  /// The recording at the example's batch, with size nodes for the batch constants.
  Recording recording;
  /// The example's batch; nullopt when it has none (nothing was compared).
  std::optional<int64_t> batch;
  /// The recording does not hold at other batches.
  bool specialised = false;
  /// The first node of `recording` that differs at the other batch; null when
  /// the module failed to run at the other batch.
  const torch::jit::Node* differs_at = nullptr;
};

/// Records `module` on `example` (as record() does) and, when the example has a batch, again
/// at batch + 1; turns the batch constants into size nodes and marks the
/// dimensions that follow the batch (Recording::batch_dims), or says where it is specialised.
CheckedRecording record_batch_checked(TensorDictModuleBase& module, const TensorDict& example,
                                      const std::string& strip_prefix, const TraceOptions& options);

/// Compares `traced` (at `batch`) with `wider` (at batch + 1) op by op, and on success puts
/// size nodes in `traced` for its batch constants. Returns the first node of `traced` that
/// cannot hold at other batches, or null when it holds at any.
const torch::jit::Node* generalise_batch(Recording& traced, const Recording& wider, int64_t batch);

/// What specialises the graph `built` from `checked`, by its printed node; nullopt when the
/// graph runs at any batch.
std::optional<BatchSpecialisation> specialisation_of(const CheckedRecording& checked,
                                                     const BuiltGraph& built);

}  // namespace tdfx::detail
