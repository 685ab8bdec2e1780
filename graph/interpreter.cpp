#include "tdfx/graph/interpreter.h"

#include "tdfx/core/error.h"
#include "tdfx/graph/plan.h"

namespace tdfx {

Interpreter::Interpreter(const GraphModule& module) : Interpreter(module, Options{}) {}

Interpreter::Interpreter(const GraphModule& module, Options options)
    : module_(module), plan_(module.shared_plan()), options_(options) {}

Interpreter::~Interpreter() = default;

c10::IValue Interpreter::run(std::vector<c10::IValue> inputs) {
  plan_ = module_.shared_plan();
  const uint64_t generation = module_.graph().generation();
  if (inputs.size() != plan_->placeholders.size()) {
    fail<RunError>("the graph takes {} inputs ({} given)", plan_->placeholders.size(),
                   inputs.size());
  }
  env_.assign(plan_->slot_count, c10::IValue());
  computed_.assign(plan_->slot_count, false);
  inputs_ = std::move(inputs);
  next_input_ = 0;
  for (current_ = 0; current_ < plan_->steps.size(); ++current_) {
    const detail::Step& step = plan_->steps[current_];
    c10::IValue value =
        rethrow_foreign_as<RunError>([&] { return "while executing " + plan_->shown(*step.node); },
                                     [&] { return run_node(*step.node); });
    // An edit during the run may have erased the nodes still ahead (the plan itself is held).
    if (module_.graph().generation() != generation) {
      fail<GraphError>("the graph was edited during the run; recompile it and run again");
    }
    if (step.kind == detail::Step::Kind::kOutput) {
      // Without garbage collection every value stays readable after the run (value()).
      if (options_.garbage_collect_values) {
        env_.clear();
        computed_.clear();
      }
      inputs_.clear();
      return value;
    }
    env_[static_cast<size_t>(step.out)] = std::move(value);
    computed_[static_cast<size_t>(step.out)] = true;
    if (options_.garbage_collect_values) {
      for (int slot : step.release) {
        env_[static_cast<size_t>(slot)] = c10::IValue();
        computed_[static_cast<size_t>(slot)] = false;
      }
    }
  }
  return {};
}

const detail::Step& Interpreter::step_of(const Node& node) const {
  if (current_ < plan_->steps.size() && plan_->steps[current_].node == &node) {
    return plan_->steps[current_];
  }
  for (const auto& step : plan_->steps) {
    if (step.node == &node) return step;
  }
  fail<GraphError>("%{} is not a node of the interpreted graph", node.name());
}

c10::IValue Interpreter::run_node(const Node& node) {
  const detail::Step& step = step_of(node);
  switch (node.op()) {
    case OpCode::kPlaceholder:
      if (next_input_ >= inputs_.size()) {
        fail<RunError>("placeholder %{}: no input left ({} given)", node.name(), inputs_.size());
      }
      return placeholder(node, std::move(inputs_[next_input_++]));
    case OpCode::kGetAttr:
      return get_attr(node);
    case OpCode::kCallFunction:
      return call_function(node, fetch_args(node));
    case OpCode::kCallMethod:
      return call_method(node, fetch_args(node));
    case OpCode::kCallModule:
      return call_module(node, fetch_args(node));
    case OpCode::kOutput:
      return output(node, step.sources.at(0).materialize(env_));
  }
  throw InternalError(fmt::format("%{}: unknown opcode", node.name()));
}

c10::IValue Interpreter::placeholder(const Node&, c10::IValue input) { return input; }

c10::IValue Interpreter::get_attr(const Node& node) { return step_of(node).constant; }

c10::IValue Interpreter::call(const Node& node, std::vector<c10::IValue>& args) const {
  return detail::call_step(step_of(node), args);
}

c10::IValue Interpreter::call_function(const Node& node, std::vector<c10::IValue> args) {
  return call(node, args);
}

c10::IValue Interpreter::call_method(const Node& node, std::vector<c10::IValue> args) {
  return call(node, args);
}

c10::IValue Interpreter::call_module(const Node& node, std::vector<c10::IValue> args) {
  return call(node, args);
}

c10::IValue Interpreter::output(const Node&, c10::IValue result) { return result; }

std::vector<c10::IValue> Interpreter::fetch_args(const Node& node) const {
  const detail::Step& step = step_of(node);
  // Inside run(), program order guarantees every input is held; a call from elsewhere
  // (a subclass running nodes out of order) is checked.
  const bool in_order = current_ < plan_->steps.size() && plan_->steps[current_].node == &node;
  for (const auto* input : in_order ? InputNodes() : node.input_nodes()) {
    if (!has_value(*input)) {
      fail<GraphError>("%{} reads %{}, which has not run or was released", node.name(),
                       input->name());
    }
  }
  std::vector<c10::IValue> args;
  args.reserve(step.sources.size());
  detail::fetch_args(step, env_, args);
  return args;
}

bool Interpreter::has_value(const Node& node) const {
  const auto slot = static_cast<size_t>(step_of(node).out);
  return slot < computed_.size() && computed_[slot];
}

const c10::IValue& Interpreter::value(const Node& node) const {
  const auto slot = static_cast<size_t>(step_of(node).out);
  if (slot >= computed_.size() || !computed_[slot]) {
    fail<GraphError>("%{} has not run, or its value was released after its last reader",
                     node.name());
  }
  return env_[slot];
}

ShapeProp::ShapeProp(GraphModule& module) : Interpreter(module), graph_(module.mutable_graph()) {}

c10::IValue ShapeProp::propagate(std::vector<c10::IValue> inputs) { return run(std::move(inputs)); }

c10::IValue ShapeProp::run_node(const Node& node) {
  c10::IValue value = Interpreter::run_node(node);
  // The node belongs to graph_, which this ShapeProp was given to change: writing its meta
  // through the interpreter's const view writes to a non-const object.
  if (&node.graph() != &graph_) throw InternalError("ShapeProp ran a node of another graph");
  TensorMeta& meta = const_cast<Node&>(node).meta().tensor;
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    meta.dtype = t.scalar_type();
    meta.shape = t.sizes().vec();
    meta.stride = t.strides().vec();
    meta.device = t.device();
  }
  return value;
}

}  // namespace tdfx
