#pragma once

/// \file
/// The ONNX rules, one per aten operator (or overload), each returning the node's value: the
/// table the converter looks an operator up in, its families (onnx/rules/*.cpp, each adding
/// its own rules by its add_*_rules function), and the rule makers families share. Internal to
/// the onnx library (namespace onnx_detail).
///
/// rules() builds the table once by calling each family's function: tdfx's libraries are
/// static, and a linker leaves out an object file nothing refers to, so families registering
/// themselves from static initialisers would be dropped without a word.

#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

#include "tdfx/onnx/converter.h"

namespace tdfx::onnx_detail {

/// A rule: writes the node being converted (Converter::node()) as ONNX nodes and returns its
/// value.
using Rule = std::function<Value(Converter&)>;
/// A rule and the ONNX ops it writes, as onnx_operators() lists them.
struct RuleEntry {
  std::string_view onnx;
  Rule rule;
};
/// The rules by aten operator (`linear`), or by overload (`max.dim`), sorted by name.
using RuleTable = std::map<std::string, RuleEntry, std::less<>>;
/// A rule as a family lists it: the operator's name and its entry.
struct NamedRule {
  std::string name;
  RuleEntry entry;
};
/// Rules to add to a table, as a family lists them.
using RuleList = std::initializer_list<NamedRule>;

/// Every rule: the table built on first use by the add_*_rules functions below.
const RuleTable& rules();

/// Adds `entries` to `table`. InternalError for an operator the table has a rule for already,
/// or one whose name (less any `.overload`) has no row in the operator table (graph/op_table.h):
/// the rules are registered against that table.
void add_rules(RuleTable& table, RuleList entries);

// The families, each adding its rules to `table`.
void add_elementwise_rules(RuleTable& table);     // elementwise.cpp
void add_activation_rules(RuleTable& table);      // activations.cpp
void add_linear_algebra_rules(RuleTable& table);  // linear_algebra.cpp
void add_shape_rules(RuleTable& table);           // shapes.cpp
void add_indexing_rules(RuleTable& table);        // indexing.cpp
void add_creation_rules(RuleTable& table);        // creation.cpp
void add_reduction_rules(RuleTable& table);       // reductions.cpp
void add_normalisation_rules(RuleTable& table);   // normalisation.cpp
void add_convolution_rules(RuleTable& table);     // convolution.cpp
void add_recurrent_rules(RuleTable& table);       // recurrent.cpp
void add_loss_rules(RuleTable& table);            // losses.cpp

// Rule makers the families share (elementwise.cpp).

/// The ONNX op `op` of argument 0.
Rule unary(std::string op);
/// The ONNX op `op` of arguments 0 and 1, in the dtype they compute in (operands()).
Rule binary(std::string op);

}  // namespace tdfx::onnx_detail
