#pragma once

/// \file
/// Gradients of a training step through the graph: run forward and backward once and report
/// each node's output gradient and each parameter's gradient (grad_stats), or find the first
/// node, in backward order, whose gradient is NaN or Inf while the gradients flowing into it
/// are finite (first_nonfinite_grad).
///
///     auto report = grad_stats(debuggee(gm, td), Loss::output("loss"));
///     std::cout << grad_table(report).str();
///     if (auto bad = first_nonfinite_grad(debuggee(gm, td), Loss::sum())) std::cout << bad->str();
///
/// The gradients are taken with torch::autograd::grad: nothing accumulates into the
/// parameters' `.grad`, and the module is left as it was. Hooks go on the values the graph
/// produces, not into the graph.

#include <ATen/core/Tensor.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tdfx/core/text_table.h"
#include "tdfx/debug/debuggee.h"
#include "tdfx/debug/node_stats.h"

namespace tdfx {

/// The loss that backward starts from.
class Loss {
 public:
  /// How Loss::output reduces its output to one number: the sum or the mean of its elements.
  enum class Reduction { kSum, kMean };
  /// The sum of every floating output's sum (the default).
  static Loss sum();
  /// The sum, or mean, of one output, named by its key joined with "_" (`loc`, `agents_action`)
  /// or by the output node's name in the graph (`getitem_3`).
  static Loss output(std::string name, Reduction reduction = Reduction::kSum);
  /// A function of the outputs, in output order; it must return a tensor with one element.
  static Loss of(std::function<at::Tensor(const std::vector<at::Tensor>&)> fn);

  /// The loss for `outputs` (keys and output node names in `names`, in output order).
  /// tdfx::Error naming the output when it is unknown or not a floating tensor.
  at::Tensor compute(const std::vector<at::Tensor>& outputs,
                     const std::vector<std::vector<std::string>>& names) const;
  /// What it is, for a report: `sum of every output`, `mean of loc`, `a function of the outputs`.
  std::string describe() const;

 private:
  enum class Kind { kSum, kOutput, kFunction } kind_ = Kind::kSum;
  std::string output_;
  Reduction reduction_ = Reduction::kSum;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> fn_;
};

/// The gradient of one node's output.
struct NodeGrad {
  /// The node's name.
  std::string node;
  /// The node's opcode and target (`call_module 0.module.fc1`).
  std::string op;
  /// The gradient's statistics (its norm among them).
  TensorStats grad;
  /// The autograd functions of the node's users that produced its gradient (`SqrtBackward0`),
  /// those of the users that require grad, in user order.
  std::vector<std::string> grad_fns;
  ///@{
  /// The node's module path and TensorDictModule, as its meta records them.
  std::string module_path, td_module;
  ///@}
};

/// The gradient of one parameter or buffer.
struct ParameterGrad {
  /// Its path (`module.0.module.weight`).
  std::string name;
  ///@{
  /// The gradient itself, and its statistics.
  at::Tensor gradient;
  TensorStats grad;
  ///@}
  ///@{
  /// The norm of its value, and grad norm / value norm (NaN for a zero value).
  double value_norm = 0;
  double ratio = 0;
  ///@}
};

/// How far a module's output gradient may grow or shrink on its way back from the outputs
/// before grad_flow marks it: as a multiple of the gradient at the outputs.
struct FlowLimits {
  /// Below this multiple: vanishing.
  double vanishing = 1e-2;
  /// Above it: exploding.
  double exploding = 1e2;
};

/// The gradient through one module: a TensorDictModule, or a module inside one (a leaf such as
/// `0.module.fc1`, or a child of a wrapped Sequential, `1.module.2`).
struct ModuleFlow {
  /// What flow_table and the drawings mark a module with (see `mark`).
  enum class Mark { kNone, kVanishing, kExploding, kNonFinite, kOrigin };
  /// Its path (`0` for a TensorDictModule, `0.module.fc1` for a module inside it); "" for a
  /// pipeline that is one TensorDictModule (flow_table shows it as `(root)`), whose inner
  /// modules' paths start at the module it wraps (`fc1`).
  std::string path;
  /// Its type as its nodes' meta records it (`Linear`), "" when unknown.
  std::string type;
  /// True for a module inside a TensorDictModule.
  bool inner = false;
  ///@{
  /// The norm of all its parameters' and buffers' gradients together, and of their values;
  /// nullopt when none got a gradient.
  std::optional<double> parameter_grad_norm, parameter_norm;
  ///@}
  ///@{
  /// The norm of the gradients of its outputs (its values that something outside it uses)
  /// together, and that as a multiple of GradFlow::output_grad_norm; nullopt when none got one.
  std::optional<double> output_grad_norm, scale;
  ///@}
  /// kOrigin: the first non-finite gradient starts in it; kNonFinite: one of its gradients is
  /// NaN or Inf; kExploding / kVanishing: `scale` is past FlowLimits.
  Mark mark = Mark::kNone;
};

/// "", "vanishing", "exploding", "NaN/Inf", "NaN/Inf starts here".
std::string_view to_string(ModuleFlow::Mark mark);

/// Gradient flow per module: where a gradient dies or blows up on its way back.
struct GradFlow {
  /// The norm of the gradient the loss hands to the graph's outputs, all together.
  double output_grad_norm = 0;
  /// The limits past which a module is marked vanishing or exploding.
  FlowLimits limits;
  /// In pipeline order, each TensorDictModule followed by the modules inside it.
  std::vector<ModuleFlow> modules;
};

/// One forward and backward pass.
struct GradReport {
  /// The loss as Loss::describe() says it (`sum of every output`).
  std::string loss_name;
  /// The loss's value.
  double loss = 0;
  /// False when the loss is NaN or Inf.
  bool loss_finite = true;
  /// The nodes whose output required grad and got a gradient, in backward order (the order
  /// autograd reached them).
  std::vector<NodeGrad> nodes;
  /// The parameters and buffers that got a gradient, in graph order.
  std::vector<ParameterGrad> parameters;
  ///@{
  /// The nodes whose value requires grad but got no gradient, because the loss does not
  /// depend on them (a node only another output reads), in program order; and likewise the
  /// parameters, by path. The tables list them as "no gradient".
  std::vector<std::string> nodes_without_gradient;
  std::vector<std::string> parameters_without_gradient;
  ///@}
  /// The node where the first non-finite gradient starts (see first_nonfinite_grad), "" when
  /// every gradient is finite or the loss is not.
  std::string nonfinite_origin;
  /// The gradient flow per module, with `limits`.
  GradFlow flow;
};

/// Runs `debuggee` forward and backward once from `loss`. The traced module's parameters keep
/// their `.grad`; an exported program's floating parameters and buffers are given gradients
/// on copies. tdfx::Error when the loss does not require grad (nothing it depends on does).
GradReport grad_stats(const Debuggee& debuggee, const Loss& loss = Loss::sum(),
                      const FlowLimits& limits = {});

/// Node gradients as a table at most `width` wide: node, dtype, shape, norm, min, max, mean,
/// nan, inf, zeros; then the nodes without a gradient, reading "no gradient".
Table grad_table(const GradReport& report, size_t width = kTerminalWidth);
/// Parameter gradients as a table: parameter, shape, grad norm, value norm, ratio (blank for a
/// zero value), nan, inf, zeros; then the parameters without a gradient, reading "no gradient".
Table parameter_grad_table(const GradReport& report, size_t width = kTerminalWidth);

/// The gradient flow as a table at most `width` wide: module, type, parameter gradient norm,
/// its ratio to the parameters' norm, output gradient norm, its multiple of the outputs', mark.
/// A module inside a TensorDictModule is indented under it; one with neither gradient is marked
/// "no gradient".
Table flow_table(const GradFlow& flow, size_t width = kTerminalWidth);

/// Where a non-finite gradient started.
struct NonFiniteGrad {
  /// Set when the loss itself is NaN or Inf; then no node is named.
  bool loss_nonfinite = false;
  /// The loss's value.
  double loss = 0;
  /// Set when every node's gradient is finite but this parameter's is not (a Linear whose
  /// input holds Inf where its output's gradient is 0: 0 × Inf is NaN); `node` is then the
  /// node that reads it (its placeholder, or get_attr), "" when none does.
  std::string parameter;
  /// The node where the non-finite gradient starts (with `parameter`: the node that reads it).
  std::string node;
  /// As printed (`%mean = torch.mean(%pow_1, [-1], True)`).
  std::string description;
  ///@{
  /// The node's module path and TensorDictModule, as its meta records them.
  std::string module_path, td_module;
  ///@}
  /// The first output key its value flows into.
  std::optional<NestedKey> key;
  /// Its line of printed code.
  std::string code_line;
  /// The autograd functions of its users, which produced the gradient (`SqrtBackward0`).
  std::vector<std::string> grad_fns;
  ///@{
  /// The gradient's statistics, and the forward value's of the node and of its inputs.
  TensorStats grad;
  std::optional<TensorStats> value;
  std::vector<std::pair<std::string, TensorStats>> inputs;
  ///@}
  ///@{
  /// The rows (indices along dim 0) of the gradient that hold NaN or Inf: the first few, and
  /// how many there are.
  std::vector<int64_t> rows;
  int64_t row_count = 0;
  ///@}
  /// The indices of the gradient's first few NaN or Inf elements (row, feature, …).
  std::vector<std::vector<int64_t>> indices;
  /// Its users whose forward value holds NaN or Inf (a layer with a NaN weight): the gradient
  /// then comes from the forward values, and first_nonfinite finds where they start.
  std::vector<std::string> nonfinite_users;
  /// A few lines for a person.
  std::string str() const;
};

/// Runs `debuggee` forward and backward once from `loss`, and returns the first node, in
/// backward order, whose output gradient holds NaN or Inf while the gradients of its users'
/// outputs are finite; a report of the loss alone when the loss is not finite; when every
/// node's gradient is finite, the first parameter (in the program's order) whose gradient is
/// not; nullopt when every gradient is finite.
std::optional<NonFiniteGrad> first_nonfinite_grad(const Debuggee& debuggee,
                                                  const Loss& loss = Loss::sum());

}  // namespace tdfx
