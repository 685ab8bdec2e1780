#include "tdfx/graph/target.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include "tdfx/core/error.h"

namespace tdfx {

Target::Target(std::string name) : name_(std::move(name)) {}

Target Target::aten(const std::string& qualified_name) {
  const auto dot = qualified_name.find('.');
  const std::string op = qualified_name.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : qualified_name.substr(dot + 1);
  auto handle = c10::Dispatcher::singleton().findOp({op, overload == "default" ? "" : overload});
  if (!handle) {
    fail<GraphError>("unknown operator {}: the dispatcher has no such schema", qualified_name);
  }
  Target target;
  target.kind_ = Kind::kAten;
  target.overload_ = overload == "default" ? "" : overload;
  target.name_ = target.overload_.empty() ? op : op + "." + target.overload_;
  const auto colon = op.find("::");
  target.op_name_ = colon == std::string::npos ? op : op.substr(colon + 2);
  target.handle_ = std::make_shared<const c10::OperatorHandle>(*handle);
  return target;
}

Target Target::method(const Target& op) {
  if (!op.is_aten()) throw InternalError("Target::method of " + op.str() + ": not an aten target");
  Target target = op;
  target.kind_ = Kind::kMethod;
  target.name_ = op.op_name_;
  return target;
}

Target Target::as_function() const {
  if (kind_ == Kind::kAten) return *this;
  if (kind_ != Kind::kMethod) throw InternalError("target " + name_ + " has no aten operator");
  Target target = *this;
  target.kind_ = Kind::kAten;
  target.name_ = handle_->schema().name() + (overload_.empty() ? "" : "." + overload_);
  return target;
}

Target Target::getitem() {
  Target target("operator.getitem");
  target.kind_ = Kind::kGetItem;
  return target;
}

Target Target::size_arith(SizeArith op) {
  static constexpr const char* kNames[] = {"add", "sub", "mul", "floordiv"};
  const char* name = kNames[static_cast<int>(op)];
  Target target(std::string("operator.") + name);
  target.kind_ = Kind::kSizeArith;
  target.op_name_ = name;
  target.arith_ = op;
  return target;
}

std::optional<Target> Target::builtin(const std::string& name) {
  if (name == "operator.getitem") return getitem();
  for (const SizeArith op :
       {SizeArith::kAdd, SizeArith::kSub, SizeArith::kMul, SizeArith::kFloorDiv}) {
    Target target = size_arith(op);
    if (target.str() == name) return target;
  }
  return std::nullopt;
}

Target::SizeArith Target::arith() const {
  if (kind_ != Kind::kSizeArith) throw InternalError("target " + name_ + " is not size arithmetic");
  return arith_;
}

const c10::FunctionSchema& Target::schema() const { return handle().schema(); }

const c10::OperatorHandle& Target::handle() const {
  if (!handle_) throw InternalError("target " + name_ + " has no aten operator");
  return *handle_;
}

}  // namespace tdfx
