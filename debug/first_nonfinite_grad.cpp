// first_nonfinite_grad: the first node, in backward order, whose gradient holds NaN or Inf
// from finite ones (gradients.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tdfx/core/error.h"
#include "tdfx/debug/grad_pass.h"
#include "tdfx/debug/gradients.h"

namespace tdfx {

using detail::forward_backward;
using detail::GradRun;
using detail::holds_nonfinite;
using detail::nonfinite_origin;
using detail::Pass;
using detail::user_grad_fns;

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

namespace {

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

}  // namespace

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
