#include "tdfx/export/module_table.h"

#include <limits>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/export/json_checks.h"

namespace tdfx::detail {
namespace {

using nlohmann::json;

json keys_to_json(const std::vector<NestedKey>& keys) {
  json out = json::array();
  for (const NestedKey& key : keys)
    out.push_back({{"key", key.parts()}, {"is_tuple", key.is_tuple()}});
  return out;
}

std::vector<NestedKey> keys_from_json(const json& entry, const char* name,
                                      const std::string& where) {
  std::vector<NestedKey> keys;
  for (const json& key : array(entry, name, where)) {
    const json& is_tuple = field(key, "is_tuple", where);
    if (!is_tuple.is_boolean()) fail<ArchiveError>("{}: is_tuple is not a bool", where);
    keys.push_back(key_from_json(field(key, "key", where), is_tuple.get<bool>(), where));
  }
  return keys;
}

int64_t count_from_json(const json& entry, const char* name, const std::string& where) {
  const json& value = field(entry, name, where);
  const bool valid =
      value.is_number_unsigned()
          ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
          : value.is_number_integer() && value.get<int64_t>() >= 0;
  if (!valid) {
    fail<ArchiveError>("{}: {} is not a non-negative int: {}", where, name, describe(value));
  }
  return value.get<int64_t>();
}

}  // namespace

json modules_to_json(const std::vector<ModuleBox>& modules) {
  json table = json::array();
  for (const ModuleBox& m : modules) {
    table.push_back({{"path", m.path},
                     {"type", m.type},
                     {"label", m.label},
                     {"sequential", m.sequential},
                     {"in_keys", keys_to_json(m.in_keys)},
                     {"out_keys", keys_to_json(m.out_keys)},
                     {"parameters", m.parameters},
                     {"buffers", m.buffers}});
  }
  return table;
}

std::vector<ModuleBox> modules_from_json(const json& table, const Graph& graph,
                                         const std::string& where) {
  if (!table.is_array()) fail<ArchiveError>("{}: 'modules' is not a list", where);
  std::vector<ModuleBox> modules;
  std::unordered_set<std::string> paths;
  for (size_t i = 0; i < table.size(); ++i) {
    const json& entry = table[i];
    const std::string here = fmt::format("{}: module {}", where, i);
    ModuleBox m;
    m.path = text(entry, "path", here);
    if (!m.path.empty() && !is_module_path(m.path)) {
      fail<ArchiveError>("{}: path {} is not a module path", here, python_repr(m.path));
    }
    if (!paths.insert(m.path).second) {
      fail<ArchiveError>("{}: path {} is given twice", here, python_repr(m.path));
    }
    m.type = printable(text(entry, "type", here), "type", here);
    m.label = printable(text(entry, "label", here), "label", here);
    const json& sequential = field(entry, "sequential", here);
    if (!sequential.is_boolean()) fail<ArchiveError>("{}: sequential is not a bool", here);
    m.sequential = sequential.get<bool>();
    if (m.sequential && m.path.empty()) {
      fail<ArchiveError>("{}: the root sequential is the program itself, not a module", here);
    }
    m.in_keys = keys_from_json(entry, "in_keys", here);
    m.out_keys = keys_from_json(entry, "out_keys", here);
    m.parameters = count_from_json(entry, "parameters", here);
    m.buffers = count_from_json(entry, "buffers", here);
    modules.push_back(std::move(m));
  }
  for (const Node* node : graph.nodes()) {
    const std::string& path = node->meta().td_module;
    if (!path.empty() && !paths.count(path)) {
      fail<ArchiveError>("{}: node %{} comes from module {}, which 'modules' does not list", where,
                         node->name(), python_repr(path));
    }
  }
  return modules;
}

}  // namespace tdfx::detail
