#pragma once

/// \file
/// The batch contract of a trace. C++ reads sizes as plain integers the recorder cannot see,
/// so no recording can tell whether the module branched on `x.size(0)`, looped over it or
/// reshaped by it. A trace is therefore one of two kinds:
/// - static (the default, as torch.export): the module is recorded once, and the graph runs
///   at the example's batch size only; a run at another is a ShapeError naming the traced
///   batch (BatchSpecialisation). Every dimension of an input must be as traced.
/// - dynamic (TraceOptions::dynamic_batch): the module is recorded at the example's batch B
///   and again at each probe batch (dynamic_batch_probes: B + 1, 1 and 4B + 3 unless the
///   caller names others: a module that cannot run at one of them, as BatchNorm in training
///   cannot at batch 1, is refused with a TraceError saying so). The recordings — tdfx graphs,
///   compared node by node — must be the same ops in the same order with the same constants,
///   but for integers that are a function of the batch across all of them: the batch itself
///   (B in the first recording, P in the probe at P), or, fitted on two recordings and checked
///   on every further one, `s0*a + c` or `s0//d` (graph/size_expr.h) — attention's
///   `[T, B*heads, d]`, `reshape({B*T, -1})`. Then they are one program, whatever shapes it
///   gives. Each such integer becomes size nodes (`size = x.size(0)`, then `mul = size * 2`
///   as torch.fx records arithmetic on a size), x the nearest tensor with a batch dimension,
///   and the dimensions that follow the batch are marked on the nodes (TensorMeta::batch_dims,
///   printed `s0`, and TensorMeta::derived_dims, printed `s0*2`). Anything else — a branch on
///   the batch that one probe takes and another does not, a loop over it, an integer that is
///   no such function — is a TraceError naming the first op where the recordings part and the
///   batch they part at. What is assumed is that the module does at every other batch what
///   it does at all of these.
/// Each recording starts from the same module state (parameters, buffers and the default
/// CPU generator), which is also what the module holds after the trace (dispatch_trace.h).

#include <optional>
#include <string>
#include <vector>

#include "tdfx/tracer/batch_check.h"
#include "tdfx/tracer/dispatch_trace.h"
#include "tdfx/tracer/fx_view.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx::detail {

/// The batch sizes a dynamic trace records besides the example's batch `batch`: `probes`
/// when given (TraceError unless each is positive, differs from `batch` and from the
/// others), else B + 1, 1 and 4B + 3, without 1 when B is 1.
std::vector<int64_t> dynamic_batch_probes(int64_t batch, const std::vector<int64_t>& probes);

/// Where the recordings of a dynamic trace part.
struct BatchDivergence {
  /// The first node of the example's recording that differs; its output node for the outputs.
  const Node* node = nullptr;
  /// The probe batch at which it differs.
  int64_t batch = 0;
  /// What differs, for the message: "another op", "a constant", "fewer ops", ...
  std::string what;
  /// Set when what differs is an integer argument that is no function of the batch: `what`
  /// then says its values and why, as a clause of its own.
  bool integer = false;
};

/// The recording of a trace under its batch contract.
struct ContractRecording {
  /// The recording at the example's batch; in a dynamic trace, with size nodes for the batch
  /// integers and the dimensions that follow the batch marked (TensorMeta::batch_dims).
  PipelineRecording recording;
  /// The example's batch; nullopt when it has none.
  std::optional<int64_t> batch;
  /// The batch sizes recorded, the example's first (one for a static trace).
  std::vector<int64_t> recorded;
  /// Set when a dynamic trace's recordings part: the caller names the printed node.
  std::optional<BatchDivergence> divergence;
  /// What every recording started from (its parameters and buffers, for export's lifting).
  PipelineLayout layout;
};

/// Records `module` on `example` under `options`' batch contract (see the file comment):
/// once when static, at the example's batch and every probe when dynamic. TraceError when a
/// dynamic trace has no batch (an example without one, or of batch 0) or the module fails
/// at a probe; a divergence is returned for the caller to name.
ContractRecording record_with_contract(TensorDictModuleBase& module, const TensorDict& example,
                                       const std::string& strip_prefix,
                                       const TraceOptions& options);

/// Compares `traced` (at `batch`) with a recording at each probe batch (`probes`, in the
/// order of `probe_batches`) node by node, and when they agree puts size nodes in `traced` for
/// its integers that are functions of the batch and marks the dimensions that are. Returns
/// where they part (the first integer that is no function of the batch, else the first op
/// that differs), or nullopt.
std::optional<BatchDivergence> generalise_batch(PipelineRecording& traced, int64_t batch,
                                                const std::vector<PipelineRecording>& probes,
                                                const std::vector<int64_t>& probe_batches);

/// TraceError for a dynamic trace whose recordings part, naming the node of its FX view the
/// divergent op became (`%relu`, module `1`) and the batches it was recorded at. The view is
/// made from `recorded`'s recording (unpruned), with `live` and `updates` made from it.
[[noreturn]] void refuse_divergence(ContractRecording& recorded, const LiveNodes& live,
                                    const StateUpdates& updates, const TraceOptions& options,
                                    const std::string& subject);

/// What a graph built from `recorded` promises about the batch: a static trace of an example
/// with a batch holds to it (the BatchSpecialisation every run checks); a dynamic one, or
/// one whose example has no batch, has none (its inputs' shapes are checked instead).
std::optional<BatchSpecialisation> specialisation_of(const ContractRecording& recorded);

}  // namespace tdfx::detail
