#pragma once
// Internal to debug/ (not installed): the forward and backward pass that grad_stats
// (gradients.cpp) and first_nonfinite_grad (first_nonfinite_grad.cpp) both take
// (grad_pass.cpp), and the gradient flow per module that grad_stats makes of it
// (grad_flow.cpp).

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tdfx/debug/gradients.h"
#include "tdfx/graph/interpreter.h"

namespace tdfx::detail {

/// What the tables say of a node, parameter or module the loss does not reach.
inline constexpr std::string_view kNoGradient = "no gradient";

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

/// One forward and backward pass of a debuggee.
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

/// Runs `debuggee` forward, takes `loss` of its outputs and runs backward, keeping every value
/// and every gradient that reaches a node; the debuggee's buffers and generator are as they
/// were after. Error when the loss reaches nothing; RunError naming the node whose backward
/// failed.
Pass forward_backward(const Debuggee& debuggee, const Loss& loss);

/// True when a value (a tensor, or a tuple or list of them: a GRU's output and state) holds a
/// floating NaN or Inf.
bool holds_nonfinite(const c10::IValue& value);

/// The names of the autograd functions of `node`'s users' values (what its gradient came
/// from), each once.
std::vector<std::string> user_grad_fns(const GradRun& run, const Node& node);

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

/// The gradient statistics grad_stats took, by node.
using NodeGradStats = std::unordered_map<const Node*, const TensorStats*>;

/// The gradient flow per module of a pass (GradReport::flow).
GradFlow make_flow(const Debuggee& debuggee, const GradReport& report, const NodeGradStats& grads,
                   double output_grad_norm, const FlowLimits& limits);

}  // namespace tdfx::detail
