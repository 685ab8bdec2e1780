#pragma once

/// \file
/// Schema normalisation: an aten call's full argument list in schema order (positional,
/// then keyword arguments by name, then the schema's defaults), which GraphModule runs
/// and the printers compare with the defaults.

#include <ATen/core/ivalue.h>

#include <optional>

#include "tdfx/graph/node.h"

namespace tdfx {

/// The full argument list of an aten node in schema order: positional
/// arguments, then keyword arguments by name, then schema defaults. Throws
/// GraphError naming the node when an argument is missing or unknown.
Args schema_arguments(const Node& node);
/// schema_arguments() of a call not yet in a graph; `name` is used in messages.
Args schema_arguments(const Target& target, const Args& args, const Kwargs& kwargs,
                      const std::string& name);

/// An int whose schema type (`type`, a real_type(): `MemoryFormat?`) is a dtype,
/// memory format or layout, as that enum (`torch.channels_last`, not `2`); any
/// other int, and one outside the enum, stays an int.
Argument enum_or_int(int64_t value, const c10::TypePtr& type);

/// A constant operator argument as an Argument: None, a bool, an int (an enum where `type`
/// says so, as enum_or_int), a float, a string, a device, or a list of ints, floats or bools.
/// nullopt for any other kind (a tensor, a generic list), which the caller handles.
std::optional<Argument> constant_argument(const c10::IValue& value, const c10::TypePtr& type);

/// True when `arg` equals the schema default `value`.
bool equals_default(const Argument& arg, const c10::IValue& value);

}  // namespace tdfx
