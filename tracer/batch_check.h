#pragma once

/// \file
/// Batch-size checks of a graph: the batch a trace was specialised to, and
/// the batch of an example or of one run's inputs. How a trace finds out
/// whether it holds at other batches is in dynamic_batch.h.

#include <cstdint>
#include <functional>
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
  /// "" for a static trace, which holds to its batch because it was asked to. An archive
  /// written before static traces were the default may name the first node whose recording
  /// changed with the batch size (`reshape`).
  std::string node;
  /// That node's TensorDictModule path ("1"), "" when unknown.
  std::string module;

  /// ShapeError unless `batch` is the traced batch size: `traced at batch 8 with a static
  /// batch; this input has batch 7: trace with TraceOptions::dynamic_batch ...`.
  void check(int64_t batch) const;
};

namespace detail {

/// The batch size of a trace's example: its first declared batch dimension,
/// else the leading size all its tensors share; nullopt when there is none.
std::optional<int64_t> example_batch(const TensorDict& example);

/// The batch size of one run's inputs, by the same rule as example_batch.
std::optional<int64_t> input_batch(const std::vector<at::Tensor>& inputs);

/// ShapeError unless `input` fits `traced`, the metadata of the placeholder it is passed to:
/// the traced dtype, the same number of dimensions, and the traced size in each dimension that
/// does not follow the batch (a sequence length the trace saw as a constant). `name` names
/// the input.
void check_input_shape(const TensorMeta& traced, const at::Tensor& input, const std::string& name);

/// check_input_shape for each of `inputs` against `traced` (one per input, in order), and
/// ShapeError unless every dimension that follows the batch has the same size in all of them
/// (one s0). `name(i)` names input i; it is called only for a message.
void check_inputs(const std::vector<TensorMeta>& traced, const std::vector<at::Tensor>& inputs,
                  const std::function<std::string(size_t)>& name);

/// Makes each of `inputs` that is not contiguous but was when traced (`traced_contiguous[i]`;
/// every input when `traced_contiguous` is empty, as for a loaded program, whose archive does
/// not say) contiguous, as a `contiguous()` in the traced code would have: that call does not
/// dispatch for a contiguous tensor, so the recording holds no copy. ShapeError naming input i
/// (`name(i)`) instead when `written(i)`: the program writes into it, and a copy would leave the
/// caller's tensor unwritten where the code may have written it; and ShapeError naming both
/// when another input the program writes into shares its memory, a write the copy would not
/// see. `written` is asked only when an input needs the copy. RunError naming the input when
/// the copy fails (a memory budget it does not fit).
void contiguous_as_traced(std::vector<at::Tensor>& inputs,
                          const std::vector<bool>& traced_contiguous,
                          const std::function<bool(size_t)>& written,
                          const std::function<std::string(size_t)>& name);

/// `example` at batch `to`: every tensor whose leading size is `batch` gets rows 0, 1, ...
/// of its own, repeated as often as needed (row r is row r % batch), and a declared batch
/// dimension becomes `to`. The tensors a dynamic trace probes the module with. TraceError when
/// they would take more than the machine's physical memory, or LibTorch cannot allocate them.
TensorDict resized(const TensorDict& example, int64_t batch, int64_t to);

}  // namespace detail
}  // namespace tdfx
