#include "graph/fx_face.h"

#include <fmt/format.h>

#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/python_repr.h"

namespace tdfx {
namespace {

struct PythonOperator {
  const char* name;    // operator.<name>
  const char* format;  // the expression
  size_t operands;
};

// aten operators that torch.fx shows as Python operators.
const std::unordered_map<std::string, PythonOperator>& python_operators() {
  static const std::unordered_map<std::string, PythonOperator> table = {
      {"add", {"add", "{} + {}", 2}},
      {"sub", {"sub", "{} - {}", 2}},
      {"mul", {"mul", "{} * {}", 2}},
      {"div", {"truediv", "{} / {}", 2}},
      {"floor_divide", {"floordiv", "{} // {}", 2}},
      {"remainder", {"mod", "{} % {}", 2}},
      {"pow", {"pow", "{} ** {}", 2}},
      {"matmul", {"matmul", "{} @ {}", 2}},
      {"bitwise_and", {"and_", "{} & {}", 2}},
      {"bitwise_or", {"or_", "{} | {}", 2}},
      {"bitwise_xor", {"xor", "{} ^ {}", 2}},
      {"eq", {"eq", "{} == {}", 2}},
      {"ne", {"ne", "{} != {}", 2}},
      {"lt", {"lt", "{} < {}", 2}},
      {"gt", {"gt", "{} > {}", 2}},
      {"le", {"le", "{} <= {}", 2}},
      {"ge", {"ge", "{} >= {}", 2}},
      {"neg", {"neg", "-{}", 1}},
      {"bitwise_not", {"invert", "~{}", 1}},
  };
  return table;
}

bool is_tensor_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  if (auto opt = type->cast<c10::OptionalType>()) return is_tensor_type(opt->getElementType());
  if (auto list = type->cast<c10::ListType>()) return is_tensor_type(list->getElementType());
  return false;
}

std::string join(const std::vector<Argument>& items, std::string (*fn)(const Argument&)) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + fn(items[i]);
  return out;
}

std::string device_str(const c10::Device& device) { return device.str(); }

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
      // Defaults are kept as IValues: mark them None here and let callers
      // that run the node use the schema's IValue directly.
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

bool is_nn_function(const std::string& op) {
  // Python has these in torch._C._nn (where torch.nn.functional finds them) and not in torch
  // (torch 1.13; checked against Python by tests/tracer/test_fx_code.cpp).
  static const std::unordered_set<std::string> names = [] {
    std::unordered_set<std::string> out;
    std::istringstream in(
        "_conv_depthwise2d _pad_circular _pad_enum _scaled_dot_product_attention "
        "_test_ambiguous_defaults _test_optional_filled_intlist _test_optional_floatlist "
        "_test_optional_intlist _test_string_default _test_warn_in_autograd "
        "_upsample_bicubic2d_aa _upsample_bilinear2d_aa _upsample_nearest_exact1d "
        "_upsample_nearest_exact2d _upsample_nearest_exact3d adaptive_avg_pool2d "
        "adaptive_avg_pool3d adaptive_max_pool2d adaptive_max_pool3d avg_pool2d avg_pool3d "
        "binary_cross_entropy col2im conv_depthwise3d cross_entropy_loss elu elu_ "
        "flatten_dense_tensors fractional_max_pool2d fractional_max_pool3d gelu gelu_ glu "
        "hardsigmoid hardsigmoid_ hardswish hardswish_ hardtanh hardtanh_ huber_loss im2col "
        "l1_loss leaky_relu leaky_relu_ linear log_sigmoid max_pool2d_with_indices "
        "max_pool3d_with_indices max_unpool2d max_unpool3d mish mish_ mkldnn_linear "
        "mkldnn_reorder_conv2d_weight mkldnn_reorder_conv3d_weight mse_loss multi_margin_loss "
        "multilabel_margin_loss nll_loss nll_loss2d nll_loss_nd one_hot pad pad_sequence "
        "reflection_pad1d reflection_pad2d reflection_pad3d relu6 relu6_ replication_pad1d "
        "replication_pad2d replication_pad3d rrelu_with_noise rrelu_with_noise_ silu silu_ "
        "slow_conv3d slow_conv_dilated2d slow_conv_dilated3d slow_conv_transpose2d "
        "slow_conv_transpose3d smooth_l1_loss soft_margin_loss softplus softshrink thnn_conv2d "
        "unflatten_dense_tensors upsample_bicubic2d upsample_bilinear2d upsample_linear1d "
        "upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_trilinear3d");
    for (std::string name; in >> name;) out.insert(name);
    return out;
  }();
  return names.count(op) > 0;
}

FxCall fx_call(const Target& target, const Args& args, const Kwargs& kwargs,
               const std::string& name) {
  if (target.is_getitem()) {
    return {"operator.getitem", "{}[{}]", args, kwargs};
  }
  if (!target.is_aten()) {
    fail<GraphError>("%{}: call_function target '{}' has no torch.fx face", name, target.str());
  }
  const auto& schema = target.schema();
  const auto& formals = schema.arguments();
  const Args full = schema_arguments(target, args, kwargs, name);

  // Which trailing arguments differ from their defaults.
  auto is_default = [&](size_t i) {
    return formals[i].default_value() && equals_default(full[i], *formals[i].default_value());
  };
  const auto& ops = python_operators();
  auto op = ops.find(target.op_name());
  if (op != ops.end() && full.size() >= op->second.operands) {
    bool rest_default = true;
    for (size_t i = op->second.operands; i < full.size(); ++i) rest_default &= is_default(i);
    if (rest_default) {
      Args operands(full.begin(), full.begin() + static_cast<long>(op->second.operands));
      return {std::string("operator.") + op->second.name, op->second.format, operands, {}};
    }
  }
  FxCall call{(is_nn_function(target.op_name()) ? "torch._C._nn." : "torch.") + target.op_name(),
              "", {}, {}};
  size_t i = 0;
  for (; i < full.size() && is_tensor_type(formals[i].type()) && !formals[i].kwarg_only(); ++i) {
    call.args.push_back(full[i]);
  }
  for (; i < full.size(); ++i) {
    if (!is_default(i)) call.kwargs.emplace_back(formals[i].name(), full[i]);
  }
  return call;
}

FxCall fx_call(const Node& node) {
  return fx_call(node.target(), node.args(), node.kwargs(), node.name());
}

std::string fx_name(const Target& target, const Args& args, const Kwargs& kwargs) {
  const std::string face = fx_call(target, args, kwargs, "?").target;
  return face.substr(face.rfind('.') + 1);
}

std::string fx_str(const Argument& arg) {
  struct Visitor {
    std::string operator()(None) const { return "None"; }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return python_float_repr(v); }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const NestedKey& v) const { return v.str(); }
    std::string operator()(c10::ScalarType v) const { return dtype_repr(v); }
    std::string operator()(c10::MemoryFormat v) const { return memory_format_repr(v); }
    std::string operator()(c10::Layout v) const { return layout_repr(v); }
    std::string operator()(const c10::Device& v) const { return device_str(v); }
    std::string operator()(Node* v) const { return "%" + v->name(); }
    std::string operator()(const ArgumentList& v) const {
      const std::string items = join(v.items, fx_str);
      if (!v.is_tuple) return "[" + items + "]";
      return "(" + items + (v.items.size() == 1 ? ",)" : ")");
    }
  };
  return std::visit(Visitor{}, arg.value);
}

std::string fx_repr(const Argument& arg) {
  struct Visitor {
    std::string operator()(None) const { return "None"; }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return python_float_repr(v); }
    std::string operator()(const std::string& v) const { return python_repr(v); }
    std::string operator()(const NestedKey& v) const { return v.repr(); }
    std::string operator()(c10::ScalarType v) const { return dtype_repr(v); }
    std::string operator()(c10::MemoryFormat v) const { return memory_format_repr(v); }
    std::string operator()(c10::Layout v) const { return layout_repr(v); }
    std::string operator()(const c10::Device& v) const {
      const std::string type = python_repr(c10::DeviceTypeName(v.type(), true));
      if (!v.has_index()) return fmt::format("device(type={})", type);
      return fmt::format("device(type={}, index={})", type, v.index());
    }
    std::string operator()(Node* v) const { return v->name(); }
    std::string operator()(const ArgumentList& v) const {
      const std::string items = join(v.items, fx_repr);
      if (!v.is_tuple) return "[" + items + "]";
      return "(" + items + (v.items.size() == 1 ? ",)" : ")");
    }
  };
  return std::visit(Visitor{}, arg.value);
}

}  // namespace tdfx
