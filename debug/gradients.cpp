// grad_stats: each node's and parameter's gradient statistics from one backward pass, and
// their tables. The pass is grad_pass.cpp's, the flow per module grad_flow.cpp's, the loss
// loss.cpp's, the first non-finite gradient first_nonfinite_grad.cpp's.
#include "tdfx/debug/gradients.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tdfx/core/error.h"
#include "tdfx/debug/grad_pass.h"

namespace tdfx {

using detail::forward_backward;
using detail::kNoGradient;
using detail::make_flow;
using detail::NodeGradStats;
using detail::nonfinite_origin;
using detail::Pass;
using detail::user_grad_fns;

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

}  // namespace tdfx
