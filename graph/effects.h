#pragma once

/// \file
/// The one rule of what a node does besides giving its result, which every pass that removes
/// or reorders nodes asks: Graph::eliminate_dead_code, and the tracer's liveness
/// (tracer/leaf_calls.h); and which inputs a graph writes into (inputs_written). What an
/// operator's schema does not say (whether it is random, dropout-like, an uninitialised
/// allocation, or updates running statistics) comes from the operator table (graph/op_table.h).

#include <string_view>
#include <vector>

#include "tdfx/graph/node.h"

namespace tdfx {

class Graph;

/// True for a node that must stay even when nothing uses its results: an aten call, as a
/// function or as a method (`%add_ = call_method[target=add_]`), that mutates a tensor or
/// returns nothing (a guard's `_assert_async`), draws random numbers (dropping it would shift
/// the random stream of the ops after it: the random ops, a Generator argument, a dropout or
/// rrelu in training), or is a training-mode batch or instance norm with running statistics,
/// which it updates although its schema does not say so; and a call_module whose body holds
/// such a call (a BatchNorm in training mode).
///
///     has_effect(add_(x, 1))                       // true: mutates x
///     has_effect(dropout(x, 0.5, /*train=*/true))  // true: draws a mask
///     has_effect(relu(x))                          // false
bool has_effect(const Node& node);

/// has_effect's reason, in a word (print_tabular's effects column): "mutates" (writes an
/// argument, as its schema says), "running stats" (a training-mode batch or instance norm),
/// "random", "asserts" (returns nothing: a guard), or "uninitialised" for an allocation it
/// does not write (`empty`, `empty_like`: no effect to keep, but its value means nothing
/// until a later op writes it); "" for none. A call_module says its body's first effect.
std::string_view effect_of(const Node& node);

/// True for the normalisations whose kernels may update their running statistics (arguments 3
/// and 4) although their schemas do not say so: `batch_norm`, `instance_norm`,
/// `native_batch_norm` and `_batch_norm_impl_index` (names without `aten::`): the operator
/// table's rows with that fact (graph/op_table.cpp). The recorder and the rules above both ask
/// this one function.
bool updates_running_stats(std::string_view op_name);

/// For each placeholder of `graph`, in order: whether the graph writes into the tensor it is
/// given, directly or through a view of it (`x.add_(1)`, `x.view({-1}).zero_()`, an `out=`
/// argument, a training-mode batch norm's running statistics), as the aten schemas' alias
/// annotations say. A result that may alias an argument (`view`, `split`, an in-place op's
/// `self`) is taken as a view of it; a getitem of a list of views, as a view too.
std::vector<bool> inputs_written(const Graph& graph);

}  // namespace tdfx
