#pragma once

/// \file
/// Target: what a node calls or names. An aten operator with its schema
/// (`aten::add.Tensor`), the builtin `operator.getitem`, or a plain name (a
/// placeholder's name, a module or attribute path, a method name).

#include <memory>
#include <string>

namespace c10 {
class OperatorHandle;
struct FunctionSchema;
}  // namespace c10

namespace tdfx {

/// The target of a node. Cheap to copy.
class Target {
 public:
  enum class Kind { kName, kAten, kGetItem };

  /// A plain name: placeholder name, module path, attribute path, method name.
  Target(std::string name = "");                           // NOLINT(google-explicit-constructor)
  Target(const char* name) : Target(std::string(name)) {}  // NOLINT(google-explicit-constructor)

  /// An aten operator by its schema name, `aten::softmax.int` or
  /// `aten::relu` (default overload). Throws GraphError when the dispatcher
  /// knows no such operator.
  static Target aten(const std::string& qualified_name);
  /// Python's `operator.getitem`: `x[i]` on lists/tuples, `td[key]` on TensorDicts.
  static Target getitem();

  Kind kind() const { return kind_; }
  bool is_aten() const { return kind_ == Kind::kAten; }
  bool is_getitem() const { return kind_ == Kind::kGetItem; }

  /// The plain name, or `aten::add.Tensor`, or `operator.getitem`.
  const std::string& str() const { return name_; }
  /// For aten targets: the operator name without namespace and overload (`add`).
  const std::string& op_name() const { return op_name_; }
  /// For aten targets: the overload name (`Tensor`), "" for the default one.
  const std::string& overload() const { return overload_; }
  /// For aten targets: the operator's schema.
  const c10::FunctionSchema& schema() const;
  /// For aten targets: the dispatcher handle (cached at construction).
  const c10::OperatorHandle& handle() const;

  friend bool operator==(const Target& a, const Target& b) { return a.name_ == b.name_; }

 private:
  Kind kind_ = Kind::kName;
  std::string name_;
  std::string op_name_;
  std::string overload_;
  // Shared, so that a Target stays cheap to copy and its header needs no dispatcher.
  std::shared_ptr<const c10::OperatorHandle> handle_;
};

}  // namespace tdfx
