#include "tdfx/tracer/name_scopes.h"

namespace tdfx::detail {

NameScopes::NameScopes(const PipelineRecording& recording)
    : NameScopes(recording.level_count,
                 [&recording](size_t call) -> const std::vector<std::pair<int, int>>& {
                   return recording.calls[call].levels;
                 }) {}

NameScopes::NameScopes(int level_count, LevelsOf levels_of)
    : levels_of_(std::move(levels_of)), levels_(static_cast<size_t>(level_count)) {
  // Every sequential's forward takes `tensordict`, so no node there may take that name.
  for (auto& level : levels_) level.names.reserve("tensordict");
}

std::string NameScopes::node_name(size_t call, const std::string& base, OpCode op) {
  std::string name = inner_[call].create_name(base);
  for (const auto& [level, child] : chain(call)) {
    name = levels_[static_cast<size_t>(level)].names.create_name(name);
    if (child >= 0 && (op == OpCode::kCallModule || op == OpCode::kGetAttr)) {
      name = "_" + std::to_string(child) + "_" + name;
    }
  }
  return name;
}

std::string NameScopes::read_name(size_t call, const NestedKey& key) {
  std::string name = "getitem";
  for (const auto& [level, child] : chain(call)) {
    Level& scope = levels_[static_cast<size_t>(level)];
    if (!scope.keys.insert(key).second) break;
    name = scope.names.create_name("getitem");
  }
  return name;
}

const std::vector<std::pair<int, int>>& NameScopes::chain(size_t call) const {
  // A root TensorDictModule has level 0 to itself, and no child index to prefix.
  static const std::vector<std::pair<int, int>> root = {{0, -1}};
  const auto& levels = levels_of_(call);
  return levels.empty() ? root : levels;
}

}  // namespace tdfx::detail
