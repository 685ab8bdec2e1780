// The gradient flow per module of a pass: each TensorDictModule's and inner module's
// gradient norms, and the marks (vanishing, exploding, NaN/Inf) grad_stats gives them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tdfx/debug/grad_pass.h"
#include "tdfx/tracer/module_tree.h"

namespace tdfx {
namespace detail {
namespace {

// The norm of several tensors' norms taken together.
struct NormSum {
  double squares = 0;
  bool any = false;
  void add(double norm) {
    squares += norm * norm;
    any = true;
  }
  std::optional<double> norm() const {
    return any ? std::optional<double>(std::sqrt(squares)) : std::nullopt;
  }
};

// The common leading components of dotted paths (`0.module` for `0.module.fc1` and
// `0.module.fc2`).
std::string common_path(const std::vector<std::string>& paths) {
  auto split = [](const std::string& path) {
    std::vector<std::string> parts;
    for (size_t start = 0; start <= path.size();) {
      const size_t dot = std::min(path.find('.', start), path.size());
      parts.push_back(path.substr(start, dot - start));
      start = dot + 1;
    }
    return parts;
  };
  if (paths.empty()) return "";
  std::vector<std::string> common = split(paths.front());
  for (const std::string& path : paths) {
    const std::vector<std::string> parts = split(path);
    size_t n = 0;
    while (n < common.size() && n < parts.size() && common[n] == parts[n]) ++n;
    common.resize(n);
  }
  return fmt::format("{}", fmt::join(common, "."));
}

// The type a node's meta records without its configuration, namespace or `Impl`
// (`Linear`, `Net` for `tdfx::samples::NetImpl`).
std::string short_type(const std::string& module_type) {
  return detail::short_type_of(std::string_view(module_type).substr(0, module_type.find('(')));
}

struct FlowGroup {
  ModuleFlow flow;
  std::vector<const Node*> nodes;
};

}  // namespace

GradFlow make_flow(const Debuggee& debuggee, const GradReport& report, const NodeGradStats& grads,
                   double output_grad_norm, const FlowLimits& limits) {
  const Graph& graph = debuggee.module->graph();
  GradFlow flow;
  flow.limits = limits;
  flow.output_grad_norm = output_grad_norm;

  // The TensorDictModules in pipeline order, each with its nodes, then the modules inside. A
  // pipeline that is one TensorDictModule is the root (path ""), every node but the output
  // in it.
  bool sequential = false;
  for (const Node* node : graph.nodes()) sequential |= !node->meta().td_module.empty();
  std::vector<FlowGroup> groups;
  std::map<std::string, size_t> td_index;
  for (const Node* node : graph.nodes()) {
    const std::string& td = node->meta().td_module;
    if (td.empty() && (sequential || node->op() == OpCode::kOutput)) continue;
    auto [it, added] = td_index.emplace(td, groups.size());
    if (added) {
      FlowGroup group;
      group.flow.path = td;
      groups.push_back(std::move(group));
    }
    groups[it->second].nodes.push_back(node);
  }
  std::vector<FlowGroup> ordered;
  for (FlowGroup& td : groups) {
    std::vector<std::string> paths;
    for (const Node* node : td.nodes) {
      if (!node->meta().module_path.empty()) paths.push_back(node->meta().module_path);
    }
    const std::string own = common_path(paths);
    // Its type is that of its own nodes, outside any module inside it.
    for (const Node* node : td.nodes) {
      if (td.flow.type.empty() && node->meta().module_path == own) {
        td.flow.type = short_type(node->meta().module_type);
      }
    }
    std::vector<FlowGroup> inner;
    std::map<std::string, size_t> inner_index;
    for (const Node* node : td.nodes) {
      const std::string& path = node->meta().module_path;
      if (path.empty() || path == own) continue;
      auto [it, added] = inner_index.emplace(path, inner.size());
      if (added) {
        FlowGroup group;
        group.flow.path = path;
        group.flow.inner = true;
        group.flow.type = short_type(node->meta().module_type);
        inner.push_back(std::move(group));
      }
      inner[it->second].nodes.push_back(node);
    }
    ordered.push_back(std::move(td));
    for (FlowGroup& group : inner) ordered.push_back(std::move(group));
  }

  // Each parameter under every path it is in (`0`, `0.module`, `0.module.fc1` for
  // `0.module.fc1.weight`).
  const std::string prefix =
      debuggee.parameter_prefix.empty() ? "" : debuggee.parameter_prefix + ".";
  std::unordered_map<std::string, std::vector<const ParameterGrad*>> under;
  for (const ParameterGrad& parameter : report.parameters) {
    under[""].push_back(&parameter);  // the root's
    std::string name = parameter.name;
    if (!prefix.empty() && name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
      under[name.substr(0, dot)].push_back(&parameter);
    }
  }
  const Node* origin = nullptr;
  for (const auto& [node, stats] : grads) {
    if (node->name() == report.nonfinite_origin) origin = node;
  }
  for (FlowGroup& group : ordered) {
    ModuleFlow& f = group.flow;
    bool nonfinite = false;
    const std::unordered_set<const Node*> members(group.nodes.begin(), group.nodes.end());
    NormSum out;
    for (const Node* node : group.nodes) {
      auto grad = grads.find(node);
      if (grad == grads.end()) continue;
      nonfinite |= !grad->second->finite();
      bool leaves = false;
      for (const Node* user : node->users()) leaves |= members.count(user) == 0;
      if (leaves) out.add(grad->second->norm);
    }
    f.output_grad_norm = out.norm();
    // Against a zero or non-finite gradient at the outputs no multiple means anything.
    if (f.output_grad_norm && flow.output_grad_norm > 0 && std::isfinite(flow.output_grad_norm)) {
      f.scale = *f.output_grad_norm / flow.output_grad_norm;
    }
    NormSum parameter_grads, values;
    auto parameters = under.find(f.path);
    if (parameters != under.end()) {
      for (const ParameterGrad* parameter : parameters->second) {
        nonfinite |= !parameter->grad.finite();
        parameter_grads.add(parameter->grad.norm);
        values.add(parameter->value_norm);
      }
    }
    f.parameter_grad_norm = parameter_grads.norm();
    f.parameter_norm = values.norm();
    if (origin && members.count(origin) > 0) {
      f.mark = ModuleFlow::Mark::kOrigin;
    } else if (nonfinite) {
      f.mark = ModuleFlow::Mark::kNonFinite;
    } else if (f.scale && std::isfinite(*f.scale) && *f.scale > limits.exploding) {
      f.mark = ModuleFlow::Mark::kExploding;
    } else if (f.scale && *f.scale < limits.vanishing) {
      f.mark = ModuleFlow::Mark::kVanishing;
    }
    flow.modules.push_back(std::move(f));
  }
  return flow;
}

}  // namespace detail

using detail::kNoGradient;

std::string_view to_string(ModuleFlow::Mark mark) {
  switch (mark) {
    case ModuleFlow::Mark::kNone:
      return "";
    case ModuleFlow::Mark::kVanishing:
      return "vanishing";
    case ModuleFlow::Mark::kExploding:
      return "exploding";
    case ModuleFlow::Mark::kNonFinite:
      return "NaN/Inf";
    case ModuleFlow::Mark::kOrigin:
      return "NaN/Inf starts here";
  }
  return "";
}

Table flow_table(const GradFlow& flow, size_t width) {
  Table table({{"module", 0},
               {"type", 12},
               {"param grad", 10, true},
               {"grad/value", 10, true},
               {"output grad", 11, true},
               {"× outputs'", 10, true},
               {"mark", 19}},
              width);
  auto number = [](std::optional<double> value) {
    return value ? table_number(*value) : std::string();
  };
  for (const ModuleFlow& f : flow.modules) {
    std::optional<double> ratio;
    if (f.parameter_grad_norm && f.parameter_norm && *f.parameter_norm > 0) {
      ratio = *f.parameter_grad_norm / *f.parameter_norm;
    }
    table.add_row(
        {(f.inner ? "  " : "") + (f.path.empty() ? std::string("(root)") : f.path), f.type,
         number(f.parameter_grad_norm), number(ratio), number(f.output_grad_norm), number(f.scale),
         f.mark == ModuleFlow::Mark::kNone && !f.parameter_grad_norm && !f.output_grad_norm
             ? std::string(kNoGradient)
             : std::string(to_string(f.mark))});
  }
  return table;
}

}  // namespace tdfx
