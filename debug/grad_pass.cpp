// One forward and backward pass of a debuggee, keeping every value and every gradient that
// reaches a node (grad_pass.h).
#include "tdfx/debug/grad_pass.h"

#include <ATen/ops/isfinite.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "tdfx/core/error.h"

namespace tdfx::detail {
namespace {

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

}  // namespace

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

}  // namespace tdfx::detail
