#pragma once

/// \file
/// Target: what a node calls or names. An aten operator with its schema
/// (`aten::add.Tensor`), a method face of one (`view`, running `aten::view`),
/// the builtin `operator.getitem`, Python's integer arithmetic on sizes (`operator.mul`), or a
/// plain name (a placeholder's name, a
/// module or attribute path, a method name with no operator).

#include <memory>
#include <optional>
#include <string>

namespace c10 {
class OperatorHandle;
struct FunctionSchema;
}  // namespace c10

namespace tdfx {

/// The target of a node. Cheap to copy.
class Target {
 public:
  /// What a target is: a plain name (placeholder, get_attr, call_module), an aten operator
  /// (call_function), a method (call_method), `operator.getitem`, or Python's integer operator on
  /// sizes (size_arith).
  enum class Kind { kName, kAten, kMethod, kGetItem, kSizeArith };
  /// Python's integer operators that size expressions use (graph/size_expr.h).
  enum class SizeArith { kAdd, kSub, kMul, kFloorDiv };

  ///@{
  /// A plain name: placeholder name, module path, attribute path, method name.
  Target(std::string name = "");                           // NOLINT(google-explicit-constructor)
  Target(const char* name) : Target(std::string(name)) {}  // NOLINT(google-explicit-constructor)
  ///@}

  /// An aten operator by its schema name, `aten::softmax.int` or
  /// `aten::relu` (default overload). Throws GraphError when the dispatcher
  /// knows no such operator.
  static Target aten(const std::string& qualified_name);
  /// A call_method target printed as the method name of `op` (`view` for `aten::view`),
  /// which runs `op`: what a call_method node runs is its target, as for call_function.
  /// InternalError unless `op` is an aten target.
  static Target method(const Target& op);
  /// The aten target of a method target's operator (`aten::view` for `view`); an aten
  /// target itself. InternalError for other kinds.
  Target as_function() const;
  /// Python's `operator.getitem`: `x[i]` on lists/tuples, `td[key]` on TensorDicts.
  static Target getitem();
  /// Python's `operator.add`, `operator.sub`, `operator.mul` or `operator.floordiv` on two
  /// ints (sizes), as torch.fx records arithmetic on a symbolic size; default name `add`,
  /// `sub`, `mul`, `floordiv`.
  static Target size_arith(SizeArith op);
  /// The builtin target printed as `name` (`operator.getitem`, `operator.mul`, ...), or nullopt.
  static std::optional<Target> builtin(const std::string& name);

  /// Which kind of target this is.
  Kind kind() const { return kind_; }
  /// True for an aten operator (Target::aten).
  bool is_aten() const { return kind_ == Kind::kAten; }
  /// True for `operator.getitem` (Target::getitem).
  bool is_getitem() const { return kind_ == Kind::kGetItem; }
  /// True for a call_method target (Target::method).
  bool is_method() const { return kind_ == Kind::kMethod; }
  /// True for an integer operator on sizes (Target::size_arith).
  bool is_size_arith() const { return kind_ == Kind::kSizeArith; }
  /// For a size_arith target, its operator; InternalError for other kinds.
  SizeArith arith() const;
  /// True for aten and method targets: those with an operator (schema(), handle()).
  bool has_operator() const { return handle_ != nullptr; }

  /// The plain name, or `aten::add.Tensor`, or the method name, or `operator.getitem`.
  const std::string& str() const { return name_; }
  /// For aten and method targets: the operator name without namespace and overload (`add`);
  /// for size_arith targets, the Python operator's name (`mul`).
  const std::string& op_name() const { return op_name_; }
  /// For aten and method targets: the overload name (`Tensor`), "" for the default one.
  const std::string& overload() const { return overload_; }
  /// For aten and method targets: the operator's schema.
  const c10::FunctionSchema& schema() const;
  /// For aten and method targets: the dispatcher handle (cached at construction).
  const c10::OperatorHandle& handle() const;

  /// Same kind, name and overload (a method face and a plain name are different targets).
  friend bool operator==(const Target& a, const Target& b) {
    return a.kind_ == b.kind_ && a.name_ == b.name_ && a.overload_ == b.overload_;
  }

 private:
  Kind kind_ = Kind::kName;
  std::string name_;
  std::string op_name_;
  std::string overload_;
  SizeArith arith_ = SizeArith::kAdd;
  // Shared, so that a Target stays cheap to copy and its header needs no dispatcher.
  std::shared_ptr<const c10::OperatorHandle> handle_;
};

}  // namespace tdfx
