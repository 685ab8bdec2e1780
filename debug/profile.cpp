#include "tdfx/debug/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "tdfx/graph/interpreter.h"

namespace tdfx {
namespace {

class Timer : public Interpreter {
 public:
  using Interpreter::Interpreter;
  /// Per node, in program order: one time per run, in microseconds.
  std::map<const Node*, std::vector<double>> times;

  c10::IValue run_node(const Node& node) override {
    const auto start = std::chrono::steady_clock::now();
    c10::IValue value = Interpreter::run_node(node);
    const auto end = std::chrono::steady_clock::now();
    if (recording && node.op() != OpCode::kOutput) {
      times[&node].push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
    return value;
  }
  bool recording = false;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Table table(const std::vector<ProfileEntry>& entries, const std::string& name,
            const std::string& what, size_t width) {
  Table t({{name, 0}, {what, 0}, {"median µs", 10, true}, {"share", 6, true}}, width);
  for (const auto& e : entries) {
    t.add_row({e.name, e.what, fmt::format("{:.1f}", e.median_us),
               fmt::format("{:.1f}%", 100 * e.share)});
  }
  return t;
}

void sort_slowest_first(std::vector<ProfileEntry>& entries) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.median_us > b.median_us; });
}

}  // namespace

Table Profile::node_table(size_t width) const { return table(nodes, "node", "op", width); }
Table Profile::module_table(size_t width) const { return table(modules, "module", "nodes", width); }

Profile profile(const Debuggee& debuggee, size_t repeats) {
  Profile out;
  out.repeats = std::max<size_t>(repeats, 1);
  const DebugRun run(debuggee);
  Timer timer(*debuggee.module);
  timer.run(debuggee.inputs);  // warm-up: first-call allocations are not the node's cost
  timer.recording = true;
  for (size_t i = 0; i < out.repeats; ++i) timer.run(debuggee.inputs);

  std::map<std::string, std::pair<double, size_t>> by_module;
  std::vector<std::string> module_order;
  for (const Node* node : debuggee.module->graph().nodes()) {
    auto it = timer.times.find(node);
    if (it == timer.times.end()) continue;
    const double us = median(it->second);
    out.nodes.push_back(
        {node->name(), fmt::format("{} {}", to_string(node->op()), node->target().str()), us, 0});
    std::string module =
        node->meta().td_module.empty() ? node->meta().module_path : node->meta().td_module;
    if (module.empty()) module = "(outside modules)";
    auto [entry, inserted] = by_module.try_emplace(module, 0.0, 0);
    if (inserted) module_order.push_back(module);
    entry->second.first += us;
    entry->second.second += 1;
    out.total_us += us;
  }
  for (const auto& module : module_order) {
    const auto& [us, count] = by_module.at(module);
    out.modules.push_back({module, fmt::format("{} node{}", count, count == 1 ? "" : "s"), us, 0});
  }
  for (auto* entries : {&out.nodes, &out.modules}) {
    for (auto& e : *entries) e.share = out.total_us > 0 ? e.median_us / out.total_us : 0;
    sort_slowest_first(*entries);
  }
  return out;
}

}  // namespace tdfx
