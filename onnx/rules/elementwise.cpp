// ONNX rules of elementwise operators: math functions, arithmetic (with ATen's type promotion,
// alpha and rounding modes), comparisons and logic, where, clamping and casts; and the rule
// makers unary and binary (rules.h).

#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {

Rule unary(std::string op) {
  return [op](Converter& c) { return tensor_value(c.op(op, {c.tensor(0)})); };
}

Rule binary(std::string op) {
  return [op](Converter& c) {
    auto [x, y] = operands(c, 0, 1);
    return tensor_value(c.op(op, {x, y}));
  };
}

namespace {

/// add/sub with `alpha` (argument 2): x op alpha * y.
Rule add_sub(std::string op, bool reversed) {
  return [op, reversed](Converter& c) {
    auto [x, y] = operands(c, 0, 1);
    const c10::ScalarType t = operand_dtype(c, 0, 1);
    // rsub(x, y, alpha) is y - alpha x: alpha scales the operand subtracted.
    if (c.arg_count() > 2 && !c.is_none(2) && c.double_arg(2) != 1.0) {
      std::string& scaled = reversed ? x : y;
      scaled = c.op("Mul", {scaled, c.const_scalar(c.double_arg(2), t)});
    }
    if (reversed) return tensor_value(c.op(op, {y, x}));
    return tensor_value(c.op(op, {x, y}));
  };
}

Rule comparison(std::string op, bool negate) {
  return [op, negate](Converter& c) {
    auto [x, y] = operands(c, 0, 1);
    std::string out = c.op(op, {x, y});
    return tensor_value(negate ? c.op("Not", {out}) : out);
  };
}

/// ATen's floor division of floats (c10's div_floor_floating), not Floor(x / y): the quotient
/// of x less its remainder, less one where the remainder's sign is not the divisor's, floored
/// and rounded up when that left more than a half (1 // 0.1 is 9, where Floor(1 / 0.1) is
/// 10); the quotient `q` itself where y is 0; 0 with the quotient's sign where it is 0.
std::string floor_divide_as_aten(Converter& c, const std::string& x, const std::string& y,
                                 const std::string& q, c10::ScalarType t) {
  const std::string zero = c.const_scalar(0.0, t);
  NodeProto* remainder = c.emit("Mod", {x, y});
  set_attr(remainder, "fmod", int64_t{1});
  const std::string mod = remainder->output(0);
  std::string div = c.op("Div", {c.op("Sub", {x, mod}), y});
  const std::string other_sign =
      c.op("And", {c.op("Not", {c.op("Equal", {mod, zero})}),
                   c.op("Xor", {c.op("Less", {y, zero}), c.op("Less", {mod, zero})})});
  div = c.op("Sub", {div, c.cast(other_sign, t)});
  std::string floored = c.op("Floor", {div});
  const std::string past_half =
      c.op("Greater", {c.op("Sub", {div, floored}), c.const_scalar(0.5, t)});
  floored = c.op("Add", {floored, c.cast(past_half, t)});
  floored = c.op("Where", {c.op("Equal", {div, zero}), c.op("Mul", {zero, q}), floored});
  return c.op("Where", {c.op("Equal", {y, zero}), q, floored});
}

Value div_rule(Converter& c) {
  const c10::ScalarType t = c.out_dtype();
  std::string x = c.cast_if(c.tensor(0, t), c.dtype_of(0), t);
  std::string y = c.cast_if(c.tensor(1, t), c.dtype_of(1), t);
  std::string q = c.op("Div", {x, y});
  const std::string mode = c.arg_count() > 2 && !c.is_none(2) ? c.string_arg(2) : "";
  if (mode == "floor") {
    if (!c10::isFloatingType(t)) c.refuse("floor division of integers");
    q = floor_divide_as_aten(c, x, y, q, t);
  } else if (mode == "trunc") {
    if (!c10::isFloatingType(t)) c.refuse("truncating division of integers");
    q = c.op("Mul", {c.op("Sign", {q}), c.op("Floor", {c.op("Abs", {q})})});
  } else if (!mode.empty()) {
    c.refuse("unknown rounding mode '" + mode + "'");
  }
  return tensor_value(q);
}

Value to_copy_rule(Converter& c) {
  return tensor_value(c.cast_if(c.tensor(0), c.dtype_of(0), c.out_dtype()));
}

Value where_rule(Converter& c) {
  const c10::ScalarType t = c.out_dtype();
  std::string cond = c.tensor(0);
  std::string x = c.arg(1).node() ? c.cast_if(c.tensor(1), c.dtype_of(1), t) : c.tensor(1, t);
  std::string y = c.arg(2).node() ? c.cast_if(c.tensor(2), c.dtype_of(2), t) : c.tensor(2, t);
  return tensor_value(c.op("Where", {cond, x, y}));
}

Value masked_fill_rule(Converter& c) {
  const c10::ScalarType t = c.out_dtype();
  std::string value = c.arg(2).node() ? c.cast_if(c.tensor(2), c.dtype_of(2), t) : c.tensor(2, t);
  return tensor_value(c.op("Where", {c.tensor(1), value, c.tensor(0)}));
}

Value pow_rule(Converter& c) {
  const c10::ScalarType t = c.out_dtype();
  std::string x = c.arg(0).node() ? c.cast_if(c.tensor(0), c.dtype_of(0), t) : c.tensor(0, t);
  if (at::isIntegralType(t, /*includeBool=*/false)) {
    // ONNX Runtime raises integers to a power in floating point: past 2^53 it is not ATen's
    // wrapped product. A constant exponent is written as products (by squaring), which wrap
    // as ATen's do; any other is refused.
    if (c.arg(1).node() || !c.arg(1).is<int64_t>() || c.arg(1).as<int64_t>() < 0) {
      c.refuse(
          "an integer power whose exponent is not a constant of at least 0 (ONNX Runtime "
          "computes integer powers in floating point, which differs from ATen's wrapping "
          "int64 arithmetic past 2^53)");
    }
    // x^0 is 1 in x's shape: x * 0 + 1.
    std::string result =
        c.op("Add", {c.op("Mul", {x, c.const_scalar(0.0, t)}), c.const_scalar(1.0, t)});
    std::string square = x;
    for (int64_t e = c.arg(1).as<int64_t>(); e > 0; e >>= 1) {
      if (e & 1) result = c.op("Mul", {result, square});
      if (e > 1) square = c.op("Mul", {square, square});
    }
    return tensor_value(result);
  }
  std::string y = c.arg(1).node() ? c.tensor(1) : c.tensor(1, t);
  return tensor_value(c.op("Pow", {x, y}));
}

/// erf, NaN kept NaN (ATen's; ONNX Runtime's Erf gives a number).
Value erf_rule(Converter& c) {
  std::string x = c.tensor(0);
  const std::string erf = c.op("Erf", {x});
  if (!at::isFloatingType(c.dtype_of(0))) return tensor_value(erf);
  return tensor_value(c.op("Where", {c.op("IsNaN", {x}), x, erf}));
}

/// sign, 0 for NaN as ATen has it (ONNX Runtime's Sign keeps NaN).
Value sign_rule(Converter& c) {
  std::string x = c.tensor(0);
  const std::string sign = c.op("Sign", {x});
  const c10::ScalarType t = c.dtype_of(0);
  if (!at::isFloatingType(t)) return tensor_value(sign);
  return tensor_value(c.op("Where", {c.op("IsNaN", {x}), c.const_scalar(0.0, t), sign}));
}

Value rsqrt_rule(Converter& c) {
  return tensor_value(c.op("Reciprocal", {c.op("Sqrt", {c.tensor(0)})}));
}

/// round.decimals(x, decimals): round(x 10^d) / 10^d, or round(x / 10^-d) 10^-d for d < 0, as
/// ATen computes it; Round is half to even, as ATen's.
Value round_decimals_rule(Converter& c) {
  const int64_t decimals = c.int_arg(1);
  const std::string x = c.tensor(0);
  if (decimals == 0) return tensor_value(c.op("Round", {x}));
  const std::string ten_pow =
      c.const_scalar(std::pow(10.0, static_cast<double>(std::abs(decimals))), c.out_dtype());
  if (decimals > 0) {
    return tensor_value(c.op("Div", {c.op("Round", {c.op("Mul", {x, ten_pow})}), ten_pow}));
  }
  return tensor_value(c.op("Mul", {c.op("Round", {c.op("Div", {x, ten_pow})}), ten_pow}));
}

}  // namespace

void add_elementwise_rules(RuleTable& table) {
  const RuleList entries = {
      {"abs", {"Abs", unary("Abs")}},
      {"acos", {"Acos", unary("Acos")}},
      {"acosh", {"Acosh", unary("Acosh")}},
      {"asin", {"Asin", unary("Asin")}},
      {"asinh", {"Asinh", unary("Asinh")}},
      {"atan", {"Atan", unary("Atan")}},
      {"atanh", {"Atanh", unary("Atanh")}},
      {"ceil", {"Ceil", unary("Ceil")}},
      {"cos", {"Cos", unary("Cos")}},
      {"cosh", {"Cosh", unary("Cosh")}},
      {"erf", {"Erf, IsNaN, Where", erf_rule}},
      {"exp", {"Exp", unary("Exp")}},
      {"floor", {"Floor", unary("Floor")}},
      {"isinf", {"IsInf", unary("IsInf")}},
      {"isnan", {"IsNaN", unary("IsNaN")}},
      {"log", {"Log", unary("Log")}},
      {"logical_not", {"Not", unary("Not")}},
      {"neg", {"Neg", unary("Neg")}},
      {"reciprocal", {"Reciprocal", unary("Reciprocal")}},
      {"relu", {"Relu", unary("Relu")}},
      {"round", {"Round", unary("Round")}},
      {"round.decimals", {"Mul or Div, Round, Div or Mul", round_decimals_rule}},
      {"rsqrt", {"Sqrt + Reciprocal", rsqrt_rule}},
      {"sigmoid", {"Sigmoid", unary("Sigmoid")}},
      {"sign", {"Sign, IsNaN, Where", sign_rule}},
      {"sin", {"Sin", unary("Sin")}},
      {"sinh", {"Sinh", unary("Sinh")}},
      {"sqrt", {"Sqrt", unary("Sqrt")}},
      {"tan", {"Tan", unary("Tan")}},
      {"tanh", {"Tanh", unary("Tanh")}},
      {"add", {"Add (Mul for alpha)", add_sub("Add", false)}},
      {"sub", {"Sub (Mul for alpha)", add_sub("Sub", false)}},
      {"rsub", {"Sub (Mul for alpha)", add_sub("Sub", true)}},
      {"mul", {"Mul", binary("Mul")}},
      {"div",
       {"Div (Mod, Floor and Where for floor rounding, as ATen floors; Sign, Abs and Floor for "
        "trunc)",
        div_rule}},
      {"pow", {"Pow (Mul for an integer power)", pow_rule}},
      {"maximum", {"Max", binary("Max")}},
      {"minimum", {"Min", binary("Min")}},
      {"fmod",
       {"Mod (fmod=1)",
        [](Converter& c) {
          auto [x, y] = operands(c, 0, 1);
          NodeProto* m = c.emit("Mod", {x, y});
          set_attr(m, "fmod", int64_t{1});
          return tensor_value(m->output(0));
        }}},
      {"eq", {"Equal", comparison("Equal", false)}},
      {"ne", {"Equal + Not", comparison("Equal", true)}},
      {"lt", {"Less", comparison("Less", false)}},
      {"le", {"LessOrEqual", comparison("LessOrEqual", false)}},
      {"gt", {"Greater", comparison("Greater", false)}},
      {"ge", {"GreaterOrEqual", comparison("GreaterOrEqual", false)}},
      {"logical_and", {"And", comparison("And", false)}},
      {"logical_or", {"Or", comparison("Or", false)}},
      {"logical_xor", {"Xor", comparison("Xor", false)}},
      {"where", {"Where", where_rule}},
      {"masked_fill", {"Where", masked_fill_rule}},
      {"clamp", {"Clip", [](Converter& c) { return clip(c, 1, 2); }}},
      {"clip", {"Clip", [](Converter& c) { return clip(c, 1, 2); }}},
      {"clamp_min", {"Clip", [](Converter& c) { return clip(c, 1, std::nullopt); }}},
      {"clamp_max",
       {"Clip",
        [](Converter& c) {
          // Clip's min input left out: no lower bound, for any dtype.
          return tensor_value(
              c.op("Clip", {c.tensor(0), "", c.const_scalar(c.double_arg(1), c.out_dtype())}));
        }}},
      // Casts.
      {"_to_copy", {"Cast (Identity for the same dtype)", to_copy_rule}},
      {"to", {"Cast (Identity for the same dtype)", to_copy_rule}},
      {"type_as", {"Cast", to_copy_rule}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
