#pragma once

/// \file
/// NameScopes: the node names the tensordict prototype tracer gives, replayed. Python traces
/// every TensorDictModule's wrapped module on its own (its own namespace), then copies its
/// graph level by level into each enclosing sequential's graph (one namespace per level),
/// where the call_module and get_attr nodes of child i are renamed `_{i}_{name}`. Replaying
/// those create_name calls in program order gives exactly the names Python prints.
///
///     // a sequential of two TensorDictModules, each a Linear: each call names its node
///     // `linear`, the sequential makes them `linear` and `linear_1`, and prefixes the child:
///     _0_linear = getattr(self, "0").module(getitem)
///     _1_linear_1 = getattr(self, "1").module(_0_linear)

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tdfx/core/nested_key.h"
#include "tdfx/graph/namespace.h"
#include "tdfx/graph/node.h"
#include "tdfx/tracer/dispatch_trace.h"

namespace tdfx::detail {

/// The name scopes of one recording's graph (not of a leaf's body, which names its nodes
/// itself).
class NameScopes {
 public:
  /// For each TensorDictModule call (an index), its enclosing sequentials, innermost first:
  /// each one's level and the call's child index there (empty for a root TensorDictModule).
  using LevelsOf = std::function<const std::vector<std::pair<int, int>>&(size_t call)>;

  /// Scopes for a recording with `level_count` TensorDictSequential levels whose calls sit
  /// where `levels_of` says: one namespace per level, and one per call as it is first named.
  NameScopes(int level_count, LevelsOf levels_of);
  /// Scopes for `recording`'s calls; the recording must outlive them.
  explicit NameScopes(const PipelineRecording& recording);

  /// The name of a node of kind `op` that call `call` (an index into Recording::calls)
  /// creates from `base` (`linear`, `relu`): unique in the call's own namespace, then in each
  /// enclosing sequential's, with a `_{child}_` prefix per level for call_module and get_attr.
  std::string node_name(size_t call, const std::string& base, OpCode op);

  /// The name of the getitem node that reads `key` for call `call`. Python reads a key once
  /// per sequential graph, so each enclosing level, innermost first, that has not read `key`
  /// before names a getitem of its own; the first level that has stops the walk, and the
  /// last name made is the node's (`getitem` when even the innermost level had read it).
  std::string read_name(size_t call, const NestedKey& key);

 private:
  struct Level {
    Namespace names;
    std::set<NestedKey> keys;
  };

  /// The levels enclosing `call`, innermost first, each with the call's child index there.
  const std::vector<std::pair<int, int>>& chain(size_t call) const;

  LevelsOf levels_of_;
  std::vector<Level> levels_;
  /// One namespace per TensorDictModule call, made on first use: a leaf's
  /// body builder never needs them, and there may be thousands of calls.
  std::unordered_map<size_t, Namespace> inner_;
};

}  // namespace tdfx::detail
