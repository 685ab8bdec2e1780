#include "tdfx/debug/gradients.h"

#include <ATen/ops/isfinite.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"
#include "tdfx/graph/interpreter.h"

namespace tdfx {

// ---- Loss ----------------------------------------------------------------------------------

Loss Loss::sum() { return Loss(); }

Loss Loss::output(std::string name, Reduction reduction) {
  Loss loss;
  loss.kind_ = Kind::kOutput;
  loss.output_ = std::move(name);
  loss.reduction_ = reduction;
  return loss;
}

Loss Loss::of(std::function<at::Tensor(const std::vector<at::Tensor>&)> fn) {
  if (!fn) fail<Error>("Loss::of: the function is empty");
  Loss loss;
  loss.kind_ = Kind::kFunction;
  loss.fn_ = std::move(fn);
  return loss;
}

std::string Loss::describe() const {
  switch (kind_) {
    case Kind::kSum:
      return "sum of every output";
    case Kind::kOutput:
      return fmt::format("{} of {}", reduction_ == Reduction::kSum ? "sum" : "mean", output_);
    case Kind::kFunction:
      return "a function of the outputs";
  }
  return "";
}

at::Tensor Loss::compute(const std::vector<at::Tensor>& outputs,
                         const std::vector<std::vector<std::string>>& names) const {
  auto floating = [](const at::Tensor& t) {
    return t.defined() && at::isFloatingType(t.scalar_type());
  };
  switch (kind_) {
    case Kind::kSum: {
      at::Tensor total;
      for (const at::Tensor& out : outputs) {
        if (!floating(out)) continue;
        total = total.defined() ? total + out.sum() : out.sum();
      }
      if (!total.defined()) fail<Error>("loss: the graph has no floating output to sum");
      return total;
    }
    case Kind::kOutput:
      // A key first: a node of the same name (`linear`, when a key is named so too) comes
      // second.
      for (size_t rank = 0; rank < 2; ++rank) {
        for (size_t i = 0; i < outputs.size() && i < names.size(); ++i) {
          if (names[i].size() <= rank || names[i][rank] != output_) continue;
          if (!floating(outputs[i])) {
            fail<Error>("loss: output {} is not a floating tensor", output_);
          }
          return reduction_ == Reduction::kSum ? outputs[i].sum() : outputs[i].mean();
        }
      }
      {
        std::vector<std::string> known;
        for (const auto& n : names) {
          if (n.empty()) continue;
          known.push_back(n.size() > 1 ? fmt::format("'{}' (node {})", n[0], n[1])
                                       : fmt::format("'{}'", n[0]));
        }
        fail<Error>("loss: no output is named '{}'; the outputs are {}", output_,
                    fmt::join(known, ", "));
      }
    case Kind::kFunction: {
      at::Tensor loss = fn_(outputs);
      if (!loss.defined() || loss.numel() != 1 || !at::isFloatingType(loss.scalar_type())) {
        fail<Error>("loss: the loss function must return a floating tensor with one element");
      }
      return loss.reshape({});
    }
  }
  fail<InternalError>("loss: unknown kind");
}

namespace {

// What the tables say of a node, parameter or module the loss does not reach.
constexpr std::string_view kNoGradient = "no gradient";

// ---- One forward and backward pass ---------------------------------------------------------

// Runs the graph keeping every value, hooks the gradient of each value that requires grad
// (not leaves: a hook on a parameter would stay on it), and notes the order autograd reaches
// them in.
class GradRun : public Interpreter {
 public:
  explicit GradRun(const GraphModule& module) : Interpreter(module, Options{false}) {}

  std::unordered_map<const Node*, at::Tensor> grads;
  std::vector<const Node*> order;
  /// Every node whose value was hooked, in program order: those missing from `grads` got no
  /// gradient.
  std::vector<const Node*> hooked;

  c10::IValue run_node(const Node& node) override {
    c10::IValue value = Interpreter::run_node(node);
    if (node.op() == OpCode::kOutput || !value.isTensor()) return value;
    const at::Tensor& t = value.toTensor();
    if (!t.requires_grad() || t.is_leaf()) return value;
    const Node* self = &node;
    hooked.push_back(self);
    // Autograd calls the hook with an undefined gradient for an output of a function that the
    // loss does not reach (`scale` when the loss reads only `loc` of one chunk): that node has
    // no gradient, as one whose function never runs.
    t.register_hook([this, self](const at::Tensor& grad) {
      if (grad.defined() && grads.emplace(self, grad).second) order.push_back(self);
    });
    return value;
  }
};

// The traced module's parameters that require grad, named from the pipeline.
std::vector<std::pair<std::string, at::Tensor>> root_parameters(const Debuggee& debuggee) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  const auto& root = debuggee.module->root();
  if (!root) return out;
  const std::string prefix =
      debuggee.parameter_prefix.empty() ? "" : debuggee.parameter_prefix + ".";
  // A parameter shared by two modules is one tensor, listed at its first path (as an exported
  // program lists it): its gradient is counted once.
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& item : root->named_parameters(true)) {
    if (!item.value().requires_grad()) continue;
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) {
      out.emplace_back(prefix + item.key(), item.value());
    }
  }
  return out;
}

struct Pass {
  std::unique_ptr<GradRun> run;
  at::Tensor loss;
  /// What the gradients were taken with respect to, with their names, and the gradients
  /// (undefined for one the loss does not reach).
  std::vector<std::pair<std::string, at::Tensor>> wrt;
  std::vector<at::Tensor> wrt_grads;
  /// The norm of the gradient the loss hands to the outputs, all outputs together.
  double output_grad_norm = 0;
};

// The norm of d loss / d outputs: the loss taken again on detached copies of the outputs.
double loss_grad_norm(const Loss& loss, const std::vector<at::Tensor>& outputs,
                      const std::vector<std::vector<std::string>>& names) {
  std::vector<at::Tensor> leaves;
  std::vector<at::Tensor> floating;
  for (const at::Tensor& out : outputs) {
    if (out.defined() && at::isFloatingType(out.scalar_type())) {
      leaves.push_back(out.detach().requires_grad_(true));
      floating.push_back(leaves.back());
    } else {
      leaves.push_back(out);
    }
  }
  const at::Tensor again = loss.compute(leaves, names);
  if (!again.requires_grad()) return 0;
  const auto grads = torch::autograd::grad({again}, floating, {}, false, false, true);
  double squares = 0;
  for (const at::Tensor& g : grads) {
    if (g.defined()) squares += std::pow(tensor_stats(g).norm, 2);
  }
  return std::sqrt(squares);
}

std::vector<at::Tensor> tensors_of(const c10::IValue& value) {
  std::vector<at::Tensor> out;
  if (value.isTensor()) {
    out.push_back(value.toTensor());
  } else if (value.isTuple()) {
    for (const auto& item : value.toTupleRef().elements()) {
      out.push_back(item.isTensor() ? item.toTensor() : at::Tensor());
    }
  } else if (value.isList()) {
    for (const auto& item : value.toListRef()) {
      out.push_back(item.isTensor() ? item.toTensor() : at::Tensor());
    }
  }
  return out;
}

Pass forward_backward(const Debuggee& debuggee, const Loss& loss) {
  Pass pass;
  // Buffers and the generator as they were when the pass is over (BatchNorm in training mode).
  const DebugRun restore(debuggee);
  pass.run = std::make_unique<GradRun>(*debuggee.module);
  std::vector<c10::IValue> inputs = debuggee.inputs;
  // An exported program's buffers get no gradient (BatchNorm's running statistics cannot);
  // the DebugRun above puts them back. Its parameters: floating tensors become leaves that require
  // grad, on copies.
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const auto& [index, name] : debuggee.state_inputs) {
    if (index >= inputs.size() || !inputs[index].isTensor()) continue;
    const at::Tensor& t = inputs[index].toTensor();
    if (!at::isFloatingType(t.scalar_type())) continue;
    at::Tensor leaf = t.detach().clone().requires_grad_(true);
    inputs[index] = leaf;
    state.emplace_back(name, leaf);
  }
  c10::IValue result;
  {
    at::AutoGradMode grad_mode(true);
    result = pass.run->run(std::move(inputs));
    const std::vector<at::Tensor> outputs = tensors_of(result);
    std::vector<std::vector<std::string>> names(outputs.size());
    const std::vector<Node*> returned = output_values(debuggee.module->graph());
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (i < debuggee.output_keys.size()) names[i].push_back(debuggee.output_keys[i].joined("_"));
      if (i < returned.size() && returned[i]) names[i].push_back(returned[i]->name());
    }
    rethrow_foreign_as<RunError>(fmt::format("loss ({})", loss.describe()), [&] {
      pass.loss = loss.compute(outputs, names);
      pass.output_grad_norm = loss_grad_norm(loss, outputs, names);
    });
  }
  if (!pass.loss.requires_grad()) {
    fail<Error>("loss ({}) does not require grad: nothing it depends on has a gradient",
                loss.describe());
  }
  pass.wrt = std::move(state);
  if (debuggee.state_inputs.empty()) pass.wrt = root_parameters(debuggee);
  std::vector<at::Tensor> wrt;
  for (const auto& [name, t] : pass.wrt) wrt.push_back(t);
  try {
    if (wrt.empty()) {
      // Gradients of intermediate values only (inputs that require grad): hooks see them.
      torch::autograd::backward({pass.loss}, {}, /*retain_graph=*/false);
    } else {
      pass.wrt_grads = torch::autograd::grad({pass.loss}, wrt, {}, /*retain_graph=*/false,
                                             /*create_graph=*/false, /*allow_unused=*/true);
    }
  } catch (const Error&) {
    throw;
  } catch (const InternalError&) {
    throw;
  } catch (const std::exception& e) {
    // Autograd runs a node's backward once its value's gradient has arrived: what failed (an
    // allocation past the budget, a kernel's check) is in the backward of the last node whose
    // gradient arrived, or of the loss when none had.
    const std::string at =
        pass.run->order.empty()
            ? std::string("in the backward of the loss")
            : fmt::format("in the backward of %{} (the last node whose gradient was computed)",
                          pass.run->order.back()->name());
    fail<RunError>("backward from the loss ({}), {}: {}", loss.describe(), at, library_message(e));
  }
  const bool reached =
      !pass.run->order.empty() || std::any_of(pass.wrt_grads.begin(), pass.wrt_grads.end(),
                                              [](const at::Tensor& g) { return g.defined(); });
  if (!reached) {
    fail<Error>("loss ({}) does not depend on the graph: no node or parameter got a gradient",
                loss.describe());
  }
  return pass;
}

// True when a value (a tensor, or a tuple or list of them: a GRU's output and state) holds a
// floating NaN or Inf.
bool holds_nonfinite(const c10::IValue& value) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    return t.is_floating_point() && !at::isfinite(t).all().item<bool>();
  }
  std::vector<c10::IValue> items;
  if (value.isTuple()) {
    for (const auto& item : value.toTupleRef().elements()) items.push_back(item);
  } else if (value.isList()) {
    for (const auto& item : value.toListRef()) items.push_back(item);
  }
  return std::any_of(items.begin(), items.end(), holds_nonfinite);
}

std::vector<std::string> user_grad_fns(const GradRun& run, const Node& node) {
  std::vector<std::string> names;
  for (const Node* user : node.users()) {
    if (!run.has_value(*user) || !run.value(*user).isTensor()) continue;
    const auto& fn = run.value(*user).toTensor().grad_fn();
    if (!fn) continue;
    const std::string name = fn->name();
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

// In backward order, the first node whose gradient holds NaN or Inf while its users' gradients
// are finite; null when there is none. `finite` tells whether a node's gradient is.
template <typename Finite>
const Node* nonfinite_origin(const GradRun& run, Finite finite) {
  for (const Node* node : run.order) {
    if (finite(node)) continue;
    bool from_finite = true;
    for (const Node* user : node->users()) {
      if (run.grads.count(user) > 0 && !finite(user)) from_finite = false;
    }
    if (from_finite) return node;
  }
  return nullptr;
}

// ---- Gradient flow per module --------------------------------------------------------------

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
  std::string type = module_type.substr(0, module_type.find('('));
  const size_t colons = type.rfind("::");
  if (colons != std::string::npos) type = type.substr(colons + 2);
  constexpr std::string_view kImpl = "Impl";
  if (type.size() > kImpl.size() &&
      type.compare(type.size() - kImpl.size(), kImpl.size(), kImpl) == 0) {
    type.resize(type.size() - kImpl.size());
  }
  return type;
}

struct FlowGroup {
  ModuleFlow flow;
  std::vector<const Node*> nodes;
};

// The gradient statistics grad_stats took, by node.
using NodeGradStats = std::unordered_map<const Node*, const TensorStats*>;

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

}  // namespace

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

GradReport grad_stats(const Debuggee& debuggee, const Loss& loss, const FlowLimits& limits) {
  if (!(limits.vanishing > 0 && limits.vanishing <= 1 && limits.exploding >= 1 &&
        std::isfinite(limits.exploding))) {
    fail<Error>(
        "FlowLimits: vanishing must be in (0, 1] and exploding a finite number of at least 1; "
        "got vanishing {} and exploding {}",
        limits.vanishing, limits.exploding);
  }
  Pass pass = forward_backward(debuggee, loss);
  GradReport report;
  report.loss_name = loss.describe();
  report.loss = pass.loss.item<double>();
  report.loss_finite = std::isfinite(report.loss);
  for (const Node* node : pass.run->order) {
    NodeGrad entry;
    entry.node = node->name();
    entry.op = describe_op(*node);
    entry.grad = tensor_stats(pass.run->grads.at(node));
    entry.grad_fns = user_grad_fns(*pass.run, *node);
    entry.module_path = node->meta().module_path;
    entry.td_module = node->meta().td_module;
    report.nodes.push_back(std::move(entry));
  }
  for (const Node* node : pass.run->hooked) {
    if (pass.run->grads.count(node) == 0) report.nodes_without_gradient.push_back(node->name());
  }
  for (size_t i = 0; i < pass.wrt_grads.size(); ++i) {
    if (!pass.wrt_grads[i].defined()) {
      report.parameters_without_gradient.push_back(pass.wrt[i].first);
      continue;
    }
    ParameterGrad entry;
    entry.name = pass.wrt[i].first;
    entry.gradient = pass.wrt_grads[i];
    entry.grad = tensor_stats(pass.wrt_grads[i]);
    entry.value_norm = tensor_stats(pass.wrt[i].second.detach()).norm;
    entry.ratio = entry.value_norm == 0 ? std::numeric_limits<double>::quiet_NaN()
                                        : entry.grad.norm / entry.value_norm;
    report.parameters.push_back(std::move(entry));
  }
  NodeGradStats grads;
  for (size_t i = 0; i < report.nodes.size(); ++i)
    grads[pass.run->order[i]] = &report.nodes[i].grad;
  if (report.loss_finite) {
    const Node* origin =
        nonfinite_origin(*pass.run, [&](const Node* node) { return grads.at(node)->finite(); });
    if (origin) report.nonfinite_origin = origin->name();
  }
  report.flow = make_flow(debuggee, report, grads, pass.output_grad_norm, limits);
  return report;
}

namespace {

// The zeros column: a share of the elements, none for an empty tensor; the other numbers of
// an empty tensor are blank too.
std::string zeros(const TensorStats& s) {
  return s.numel == 0 ? std::string() : fmt::format("{:.0f}%", 100 * s.zero_fraction);
}

std::string number(const TensorStats& s, double value) {
  return s.numel == 0 ? std::string() : table_number(value);
}

}  // namespace

Table grad_table(const GradReport& report, size_t width) {
  Table table({{"node", 0},
               {"dtype", 5},
               {"shape", 12},
               {"norm", kNumberWidth, true},
               {"min", kNumberWidth, true},
               {"max", kNumberWidth, true},
               {"mean", kNumberWidth, true},
               {"nan", 6, true},
               {"inf", 6, true},
               {"zeros", 5, true}},
              width);
  for (const NodeGrad& entry : report.nodes) {
    const TensorStats& s = entry.grad;
    table.add_row({entry.node, dtype_short(s.dtype), shape_text(s.shape), number(s, s.norm),
                   number(s, s.min), number(s, s.max), number(s, s.mean),
                   std::to_string(s.nan_count), std::to_string(s.inf_count), zeros(s)});
  }
  for (const std::string& node : report.nodes_without_gradient) {
    table.add_row({node, "", std::string(kNoGradient), "", "", "", "", "", "", ""});
  }
  return table;
}

Table parameter_grad_table(const GradReport& report, size_t width) {
  Table table({{"parameter", 0},
               {"shape", 12},
               {"grad norm", kNumberWidth, true},
               {"value norm", 10, true},
               {"ratio", kNumberWidth, true},
               {"nan", 6, true},
               {"inf", 6, true},
               {"zeros", 5, true}},
              width);
  for (const ParameterGrad& entry : report.parameters) {
    const TensorStats& s = entry.grad;
    table.add_row({entry.name, shape_text(s.shape), table_number(s.norm),
                   table_number(entry.value_norm),
                   // No ratio to a zero value (a bias initialised to 0): left blank, not "nan".
                   entry.value_norm == 0 ? std::string() : table_number(entry.ratio),
                   std::to_string(s.nan_count), std::to_string(s.inf_count), zeros(s)});
  }
  for (const std::string& name : report.parameters_without_gradient) {
    table.add_row({name, std::string(kNoGradient), "", "", "", "", "", ""});
  }
  return table;
}

// ---- The first non-finite gradient ---------------------------------------------------------

std::string NonFiniteGrad::str() const {
  if (loss_nonfinite) {
    return fmt::format(
        "the loss is not finite ({}): its NaN or Inf comes from the forward values, not from "
        "backward; look at them (first_nonfinite, tdfx run --find-nonfinite)\n",
        table_number(loss));
  }
  std::string out;
  if (!parameter.empty()) {
    out = fmt::format(
        "first non-finite gradient: parameter {} ({} NaN, {} Inf of {} values); every node's "
        "gradient is finite, so the backward of the node that reads it made it from a forward "
        "value\n",
        parameter, grad.nan_count, grad.inf_count, grad.numel);
  } else {
    out = fmt::format("first non-finite gradient: %{} ({} NaN, {} Inf of {} values)\n", node,
                      grad.nan_count, grad.inf_count, grad.numel);
  }
  if (!description.empty()) out += fmt::format("  node:     {}\n", description);
  if (!td_module.empty()) out += fmt::format("  in:       TensorDictModule {}\n", td_module);
  if (!module_path.empty()) out += fmt::format("  module:   {}\n", module_path);
  if (key) out += fmt::format("  feeds:    {}\n", key->repr());
  if (!code_line.empty()) out += fmt::format("  code:     {}\n", code_line);
  if (!grad_fns.empty()) out += fmt::format("  from:     {}\n", fmt::join(grad_fns, ", "));
  auto summary = [](const TensorStats& s) {
    return fmt::format("{} {} min {} max {} mean {}, {} NaN, {} Inf, {:.0f}% zeros",
                       dtype_short(s.dtype), shape_text(s.shape), table_number(s.min),
                       table_number(s.max), table_number(s.mean), s.nan_count, s.inf_count,
                       100 * s.zero_fraction);
  };
  if (value) out += fmt::format("  value:    {}\n", summary(*value));
  for (const auto& [name, stats] : inputs) {
    out += fmt::format("  input %{}: {}\n", name, summary(stats));
  }
  if (row_count > 0) {
    out += fmt::format("  rows:     {} of dim 0 ({}{})\n", row_count, fmt::join(rows, ", "),
                       row_count > static_cast<int64_t>(rows.size()) ? ", …" : "");
  }
  if (!indices.empty()) {
    out += fmt::format("  at:       {}\n", indices_text(indices, grad.nan_count + grad.inf_count));
  }
  for (const std::string& user : nonfinite_users) {
    out += fmt::format(
        "  note:     the forward value of its user %{} holds NaN/Inf, so the gradient comes "
        "from the forward values (first_nonfinite finds where they start)\n",
        user);
  }
  return out;
}

// The nodes whose backward makes a parameter's gradient, the parameter named as pass.wrt names
// it: the users of an exported program's placeholder for it (Debuggee::state_inputs) or of a
// traced module's get_attr, or the call_module of the leaf module that holds it.
std::vector<const Node*> parameter_readers(const Debuggee& debuggee, const std::string& name) {
  const Graph& graph = debuggee.module->graph();
  for (const auto& [index, input_name] : debuggee.state_inputs) {
    if (input_name != name) continue;
    size_t at = 0;
    for (const Node* node : graph.nodes()) {
      if (node->op() == OpCode::kPlaceholder && at++ == index) {
        return {node->users().begin(), node->users().end()};
      }
    }
  }
  const std::string prefix =
      debuggee.parameter_prefix.empty() ? "" : debuggee.parameter_prefix + ".";
  for (const Node* node : graph.nodes()) {
    const std::string target = node->target().str();
    if (node->op() == OpCode::kGetAttr && (target == name || prefix + target == name)) {
      return {node->users().begin(), node->users().end()};
    }
    if (node->op() == OpCode::kCallModule) {
      const auto dot = name.rfind('.');
      const std::string owner = dot == std::string::npos ? "" : name.substr(0, dot);
      if (owner == target || owner == prefix + target) return {node};
    }
  }
  return {};
}

std::optional<NonFiniteGrad> first_nonfinite_grad(const Debuggee& debuggee, const Loss& loss) {
  Pass pass = forward_backward(debuggee, loss);
  const double loss_value = pass.loss.item<double>();
  if (!std::isfinite(loss_value)) {
    NonFiniteGrad out;
    out.loss_nonfinite = true;
    out.loss = loss_value;
    return out;
  }
  const GradRun& run = *pass.run;
  auto finite = [&run](const Node* node) {
    return at::isfinite(run.grads.at(node)).all().item<bool>();
  };
  if (const Node* node = nonfinite_origin(run, finite)) {
    const at::Tensor& grad = run.grads.at(node);
    NonFiniteGrad out;
    out.loss = loss_value;
    out.node = node->name();
    out.description = describe(*node);
    out.module_path = node->meta().module_path;
    out.td_module = node->meta().td_module;
    out.key = key_fed(debuggee, *node);
    out.code_line = code_line(debuggee.code, *node);
    out.grad_fns = user_grad_fns(run, *node);
    out.grad = tensor_stats(grad);
    if (run.value(*node).isTensor()) out.value = tensor_stats(run.value(*node).toTensor().detach());
    for (const Node* input : node->input_nodes()) {
      if (run.has_value(*input) && run.value(*input).isTensor()) {
        out.inputs.emplace_back(input->name(), tensor_stats(run.value(*input).toTensor().detach()));
      }
    }
    nonfinite_rows(grad, out.rows, out.row_count);
    out.indices = nonfinite_indices(grad);
    for (const Node* user : node->users()) {
      if (run.has_value(*user) && holds_nonfinite(run.value(*user))) {
        out.nonfinite_users.push_back(user->name());
      }
    }
    return out;
  }
  // Every node's gradient is finite; a parameter's gradient is made from a node's gradient and
  // a forward value, and may still not be (a Linear's weight gradient multiplies its output's
  // gradient, 0 where a tanh saturated, by its input, which may hold Inf).
  for (size_t i = 0; i < pass.wrt.size() && i < pass.wrt_grads.size(); ++i) {
    const at::Tensor& grad = pass.wrt_grads[i];
    if (!grad.defined() || at::isfinite(grad).all().item<bool>()) continue;
    NonFiniteGrad out;
    out.loss = loss_value;
    out.parameter = pass.wrt[i].first;
    out.grad = tensor_stats(grad);
    nonfinite_rows(grad, out.rows, out.row_count);
    out.indices = nonfinite_indices(grad);
    const std::vector<const Node*> readers = parameter_readers(debuggee, out.parameter);
    for (const Node* reader : readers) {
      if (run.has_value(*reader) && holds_nonfinite(run.value(*reader))) {
        out.nonfinite_users.push_back(reader->name());
      }
    }
    // Named by the (first) node that reads it, whose backward made the gradient, with the
    // forward values of its tensor inputs.
    if (!readers.empty()) {
      const Node& reader = *readers.front();
      out.node = reader.name();
      out.description = describe(reader);
      out.module_path = reader.meta().module_path;
      out.td_module = reader.meta().td_module;
      out.code_line = code_line(debuggee.code, reader);
      for (const Node* input : reader.input_nodes()) {
        if (run.has_value(*input) && run.value(*input).isTensor()) {
          out.inputs.emplace_back(input->name(),
                                  tensor_stats(run.value(*input).toTensor().detach()));
        }
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace tdfx
