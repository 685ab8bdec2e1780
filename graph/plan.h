#pragma once

/// \file
/// The compiled form of a graph that GraphModule runs and Interpreter walks:
/// one Step per node, value slots, constants resolved, release points.
/// Internal to the graph library (namespace detail).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tdfx/graph/node.h"

namespace tdfx::detail {

/// Where a call's argument comes from at run time.
struct Source {
  enum class Kind { kConstant, kSlot, kTensorList, kOptionalTensorList, kIntList, kTuple };
  Kind kind = Kind::kConstant;
  c10::IValue constant;
  int slot = -1;
  std::vector<Source> items;  // lists and tuples

  c10::IValue materialize(const std::vector<c10::IValue>& slots) const;
};

struct Plan;

/// A call of a module that has no body graph: a built-in layer of the root,
/// called with the node's arguments (see module_call.h).
using LeafCall = std::function<c10::IValue(std::vector<c10::IValue>&)>;

/// One node's work.
struct Step {
  enum class Kind {
    kPlaceholder,
    kConstant,
    kAten,
    kGetItem,
    kSizeArith,
    kCallModule,
    kCallLeaf,
    kOutput
  };
  Kind kind = Kind::kConstant;
  const Node* node = nullptr;
  int out = -1;
  std::vector<Source> sources;
  std::optional<c10::OperatorHandle> op;  // a copy: the node's target or meta may change
  size_t returns = 1;
  c10::IValue constant;                               // get_attr value
  c10::IValue key;                                    // getitem: int index or string key
  Target::SizeArith arith = Target::SizeArith::kAdd;  // size arithmetic: its operator
  std::shared_ptr<Plan> body;                         // call_module with a body
  LeafCall leaf;                                      // call_module without one
  std::vector<int> release;                           // slots whose last read is this step
};

/// A compiled graph: its steps in program order, one slot per node.
struct Plan {
  std::vector<Step> steps;
  size_t slot_count = 0;
  std::vector<int> placeholders;
  Source output;
  bool has_output = false;

  /// How errors name a node when it is set and gives a name (GraphModule's `shown_as`), else
  /// shown_node.
  std::function<std::string(const Node&)> shown_as;

  c10::IValue run(std::vector<c10::IValue> inputs) const;
  /// `node` as errors while running this plan name it.
  std::string shown(const Node& node) const;
};

/// Appends the values of `step`'s arguments, in the order its call takes them (an aten
/// operator's schema order), to `args`.
void fetch_args(const Step& step, const std::vector<c10::IValue>& slots,
                std::vector<c10::IValue>& args);

/// Runs a call step (aten, getitem, size arithmetic, call_module) on its fetched `args`, which it
/// may consume; returns the node's value. Errors are the library's: the caller names the node.
c10::IValue call_step(const Step& step, std::vector<c10::IValue>& args);

/// A node as the user saw it printed: an op inlined from a call_module body, which no
/// printed graph shows, is named by that call.
std::string shown_node(const Node& node);

}  // namespace tdfx::detail
