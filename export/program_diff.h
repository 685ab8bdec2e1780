#pragma once

/// \file
/// Comparing two exported programs node by node (`tdfx diff A.pt2 B.pt2`): the same pipeline
/// before and after a change, or exported from two checkpoints.
///
///     const ProgramDiff diff = diff_programs(before, after);
///     if (!diff.equal()) std::cout << diff.report();
///
/// Nodes are matched by structure, not by name: each node's label is its op, its target, its
/// constant arguments and the contents of the weights it reads (a node's name and the names
/// of its inputs are left out), and the two programs' node sequences are aligned on their
/// longest common subsequence of labels. Between two aligned nodes, the nodes left over are
/// paired in order when they have the same op and target (a layer whose width or weights
/// changed), then when they have the same op (an activation swapped, an input key renamed);
/// what is still left over is added or removed. A paired node is changed when its target, its
/// arguments (a node argument must be the match of the other's), its dtype and shape or its
/// module path differ; a node renamed alone is the same node.

#include <string>
#include <vector>

#include "tdfx/export/program.h"

namespace tdfx {

/// A node only one program has: its name and its line of forward code with its type and
/// module (`linear_3 = torch.ops.aten.linear.default(relu_2, ...)  # f32[16, 64] 3.module`).
struct DiffNode {
  /// The node's name.
  std::string name;
  /// Its line of forward code, with its type and module.
  std::string line;
};

/// A node both programs have, and what differs: `target aten::relu -> aten::tanh`.
struct NodeChange {
  ///@{
  /// The node's name in A, and in B (the same unless it was renamed).
  std::string name_a;
  std::string name_b;
  ///@}
  /// What differs, one line each (`target aten::relu -> aten::tanh`).
  std::vector<std::string> what;
};

/// A parameter or buffer both programs have whose value differs: a shape or dtype (`what`),
/// or, for the same shape and dtype, how far it moved as people compare checkpoints — the
/// relative change ‖B − A‖ / ‖A‖ and the cosine similarity A·B / (‖A‖ ‖B‖), over the
/// elements finite in both, in double — and, as detail, the largest absolute difference and
/// the largest relative one (|a − b| / max(|a|, |b|), elementwise). Two NaNs, or two
/// infinities of one sign, are equal; any other difference at an element that is not finite
/// in both is counted in `non_finite` and left out of the sums. ‖A‖ = 0 gives a relative
/// change of infinity (a bias that started at zero; 0 when B is zero there too) and a cosine
/// of NaN, as does ‖B‖ = 0. The weights are read in one pass, in blocks, with no copy in
/// double (a complex weight as pairs of reals).
struct WeightChange {
  ///@{
  /// The weight's placeholder name in A, and in B.
  std::string name_a;
  std::string name_b;
  ///@}
  /// What differs, in one line: the shape or dtype (`f32[8, 4] -> f32[16, 4]`), or the relative
  /// change, the cosine and the largest differences as `tdfx diff` prints them.
  std::string what;
  /// The largest absolute difference |a − b| over the elements finite in both.
  double max_abs = 0;
  /// The largest relative difference |a − b| / max(|a|, |b|) over the elements finite in both.
  double max_rel = 0;
  /// How many elements differ where a value is not finite in both (left out of the sums).
  int64_t non_finite = 0;
  /// The parameter or buffer's path in B (`module.0.module.weight`).
  std::string path;
  /// NaN, as `cosine`, when the shape or dtype differs.
  double relative_change = 0;
  /// The cosine similarity A·B / (‖A‖ ‖B‖).
  double cosine = 1;
};

/// How far one module's parameters moved, all of them together: their relative change
/// ‖B − A‖ / ‖A‖ and cosine similarity, as WeightChange computes them, over their elements
/// taken as one vector. Its parameters of one shape and dtype in both programs count, those
/// that did not change too; those of another shape or dtype cannot and are left out (they are
/// in `weights`), as are buffers, such as BatchNorm's running statistics.
struct ModuleChange {
  /// Its path in B (`module.0.module`): its parameters' paths without their last part.
  std::string path;
  /// The relative change ‖B − A‖ / ‖A‖ of its parameters taken as one vector.
  double relative_change = 0;
  /// Their cosine similarity A·B / (‖A‖ ‖B‖).
  double cosine = 1;
  ///@{
  /// How many of its parameters were compared, and how many of those differ.
  int64_t weights = 0;
  int64_t changed = 0;
  ///@}
  /// How many of its parameters changed shape or dtype, left out of the sums.
  int64_t other_type = 0;
};

/// How program B differs from program A.
struct ProgramDiff {
  /// Nodes of B with no match in A, in B's order.
  std::vector<DiffNode> added;
  /// Nodes of A with no match in B, in A's order.
  std::vector<DiffNode> removed;
  /// Matched nodes that differ, in B's order (parameters and buffers are in `weights`).
  std::vector<NodeChange> changed;
  /// Changes of the signature: an input or output key added, removed or renamed, an output
  /// now written from another node, a dimension that now follows the batch or no longer does.
  std::vector<std::string> signature;
  /// The parameters and buffers whose values differ.
  std::vector<WeightChange> weights;
  /// The modules with a parameter that differs in value (not in shape or dtype), largest
  /// relative change first, ties in B's order.
  std::vector<ModuleChange> modules;
  /// For each node of B, the name of its match in A, "" when it was added; in B's order.
  std::vector<std::pair<std::string, std::string>> matches;

  /// True when nothing differs (nodes renamed alone are equal).
  bool equal() const;
  /// The text `tdfx diff` prints: a summary line, then the sections that have entries
  /// (signature, added, removed, changed, modules by relative change, weights); "" when
  /// equal.
  std::string report() const;
};

/// How `b` differs from `a`. Programs exported from one module share its tensors
/// (export_program): to compare a module before and after training, compare a saved and
/// loaded copy of the first.
ProgramDiff diff_programs(const ExportedProgram& a, const ExportedProgram& b);

/// How traced module `b` differs from traced module `a`: their exported programs compared.
ProgramDiff diff_programs(const TDGraphModule& a, const TDGraphModule& b);

namespace detail {
/// `1 change`, `3 changes`: `n` and the word for it.
std::string plural(size_t n, const char* one, const char* many);
}  // namespace detail

}  // namespace tdfx
