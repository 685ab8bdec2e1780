// The full argument list of an aten call in its schema's order, and the enum and default
// rules it uses; what the graph runner calls and the printers read.
#include "tdfx/graph/schema_arguments.h"

#include <fmt/format.h>

#include "tdfx/core/enum_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"

namespace tdfx {
namespace {

const Argument* find_kwarg(const Kwargs& kwargs, const std::string& name) {
  for (const auto& [key, arg] : kwargs) {
    if (key == name) return &arg;
  }
  return nullptr;
}

}  // namespace

Args schema_arguments(const Target& target, const Args& args, const Kwargs& kwargs,
                      const std::string& name) {
  const auto& schema = target.schema();
  const auto& formals = schema.arguments();
  if (args.size() > formals.size()) {
    fail<GraphError>("%{} passes {} arguments to {}, which takes {}", name, args.size(),
                     target.str(), formals.size());
  }
  for (const auto& [key, value] : kwargs) {
    if (!schema.argumentIndexWithName(key)) {
      fail<GraphError>("%{} passes keyword '{}' to {}, whose schema has no such argument", name,
                       key, target.str());
    }
  }
  Args full;
  for (size_t i = 0; i < formals.size(); ++i) {
    if (i < args.size()) {
      full.push_back(args[i]);
    } else if (const Argument* kw = find_kwarg(kwargs, formals[i].name())) {
      full.push_back(*kw);
    } else if (formals[i].default_value()) {
      const auto& value = *formals[i].default_value();
      // The schema's default as the Argument it equals; a kind no Argument holds is refused.
      if (value.isNone()) {
        full.push_back(None{});
      } else if (value.isBool()) {
        full.push_back(value.toBool());
      } else if (value.isInt()) {
        // A ScalarType/Layout/MemoryFormat default is an int too: typed by the schema.
        full.push_back(enum_or_int(value.toInt(), formals[i].real_type()));
      } else if (value.isDouble()) {
        full.push_back(value.toDouble());
      } else if (value.isString()) {
        full.push_back(value.toStringRef());
      } else if (value.isIntList()) {
        std::vector<Argument> items;
        for (int64_t v : value.toIntVector()) items.push_back(v);
        full.push_back(list(std::move(items)));
      } else {
        fail<GraphError>("%{}: cannot express the default of argument '{}' of {}", name,
                         formals[i].name(), target.str());
      }
    } else {
      fail<GraphError>("%{} gives no value for argument '{}' of {}", name, formals[i].name(),
                       target.str());
    }
  }
  return full;
}

Args schema_arguments(const Node& node) {
  return schema_arguments(node.target(), node.args(), node.kwargs(), node.name());
}

std::optional<Argument> constant_argument(const c10::IValue& value, const c10::TypePtr& type) {
  auto list_of = [](const auto& values) {
    std::vector<Argument> items;
    items.reserve(values.size());
    for (const auto& v : values) items.emplace_back(v);
    return list(std::move(items));
  };
  if (value.isNone()) return Argument(None{});
  if (value.isBool()) return Argument(value.toBool());
  if (value.isInt()) return enum_or_int(value.toInt(), type);
  if (value.isDouble()) return Argument(value.toDouble());
  if (value.isString()) return Argument(value.toStringRef());
  if (value.isDevice()) return Argument(value.toDevice());
  if (value.isIntList()) return list_of(value.toIntVector());
  if (value.isDoubleList()) return list_of(value.toDoubleVector());
  if (value.isBoolList()) {
    std::vector<Argument> items;
    for (bool v : value.toBoolList()) items.emplace_back(v);
    return list(std::move(items));
  }
  return std::nullopt;
}

Argument enum_or_int(int64_t value, const c10::TypePtr& type) {
  c10::TypePtr bare = type;
  if (bare && bare->kind() == c10::TypeKind::OptionalType) {
    bare = bare->castRaw<c10::OptionalType>()->getElementType();
  }
  auto within = [value](auto count) { return value >= 0 && value < static_cast<int64_t>(count); };
  switch (bare ? bare->kind() : c10::TypeKind::IntType) {
    case c10::TypeKind::ScalarTypeType:
      if (within(c10::ScalarType::NumOptions)) return static_cast<c10::ScalarType>(value);
      break;
    case c10::TypeKind::MemoryFormatType:
      if (within(c10::MemoryFormat::NumOptions)) return static_cast<c10::MemoryFormat>(value);
      break;
    case c10::TypeKind::LayoutType:
      if (within(c10::Layout::NumOptions)) return static_cast<c10::Layout>(value);
      break;
    default:
      break;
  }
  return value;
}

bool equals_default(const Argument& arg, const c10::IValue& value) {
  if (value.isNone()) return arg.is<None>();
  if (value.isBool()) return arg.is<bool>() && arg.as<bool>() == value.toBool();
  if (value.isInt()) {
    if (arg.is<int64_t>()) return arg.as<int64_t>() == value.toInt();
    if (arg.is<c10::ScalarType>())
      return static_cast<int64_t>(arg.as<c10::ScalarType>()) == value.toInt();
    if (arg.is<c10::MemoryFormat>())
      return static_cast<int64_t>(arg.as<c10::MemoryFormat>()) == value.toInt();
    if (arg.is<c10::Layout>()) return static_cast<int64_t>(arg.as<c10::Layout>()) == value.toInt();
    return false;
  }
  if (value.isDouble()) {
    if (arg.is<double>()) return arg.as<double>() == value.toDouble();
    if (arg.is<int64_t>()) return static_cast<double>(arg.as<int64_t>()) == value.toDouble();
    return false;
  }
  if (value.isString())
    return arg.is<std::string>() && arg.as<std::string>() == value.toStringRef();
  if (value.isIntList()) {
    if (!arg.is<ArgumentList>()) return false;
    const auto& items = arg.as<ArgumentList>().items;
    const auto expected = value.toIntVector();
    if (items.size() != expected.size()) return false;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is<int64_t>() || items[i].as<int64_t>() != expected[i]) return false;
    }
    return true;
  }
  return false;
}

}  // namespace tdfx
