#pragma once

/// \file
/// Batch-size checks of a trace. C++ reads sizes as plain integers the tracer
/// cannot see, so a module that computes `reshape({x.size(0), -1})` or loops
/// `x.size(0)` times records the example's batch as a constant. The trace is
/// therefore repeated at the next batch size (the example's first rows
/// repeated): when both traces give the same program, the graph holds no
/// batch-size constant and runs at any batch; otherwise it is specialised,
/// and every run checks its input's batch against the traced one.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "tensordict/tensordict.h"

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

/// `example` with one more row: every tensor whose leading size is `batch`
/// gets its first row appended (and a declared batch dimension grows by one).
TensorDict widened(const TensorDict& example, int64_t batch);

/// Compares a graph traced at the example's batch with `retrace`, a function
/// tracing at batch + 1; returns what specialises the first graph, or nullopt
/// when both print the same program (bodies included).
std::optional<BatchSpecialisation> compare_batches(const Graph& traced, int64_t batch,
                                                   const std::function<Graph()>& retrace);

}  // namespace detail
}  // namespace tdfx
