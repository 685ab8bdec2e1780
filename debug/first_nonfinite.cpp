#include "tdfx/debug/first_nonfinite.h"

#include <ATen/core/Tensor.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/module.h>

#include "tdfx/debug/node_stats.h"
#include "tdfx/graph/interpreter.h"

namespace tdfx {
namespace {

// NaN and Inf counts over every tensor of a value (one tensor, or a tuple or list of them).
struct Counts {
  int64_t nan = 0, inf = 0, numel = 0;
  bool finite() const { return nan == 0 && inf == 0; }
};

void count(const c10::IValue& value, Counts& counts) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (!at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type())) return;
    const TensorStats s = tensor_stats(t);
    counts.nan += s.nan_count;
    counts.inf += s.inf_count;
    counts.numel += s.numel;
  } else if (value.isTuple()) {
    for (const auto& item : value.toTupleRef().elements()) count(item, counts);
  } else if (value.isList()) {
    for (const auto& item : value.toListRef()) count(item, counts);
  }
}

// The first parameter or buffer the body of call_module `node` reads that holds NaN or Inf,
// by its path from `root`, or "": a call's node reads its layer's weights inside its body,
// where they are no input of the node.
std::string nonfinite_state_read(const Node& node, const torch::nn::Module* root) {
  if (node.op() != OpCode::kCallModule || !node.body() || !root) return "";
  const auto parameters = root->named_parameters(true);
  const auto buffers = root->named_buffers(true);
  for (const Node* inner : node.body()->nodes()) {
    if (inner->op() != OpCode::kGetAttr) continue;
    const std::string path = node.target().str() + "." + inner->target().str();
    const at::Tensor* tensor = parameters.find(path);
    if (!tensor) tensor = buffers.find(path);
    if (!tensor) continue;
    Counts counts;
    count(*tensor, counts);
    if (!counts.finite()) return path;
  }
  return "";
}

class Finder : public Interpreter {
 public:
  using Interpreter::Interpreter;
  const Node* origin = nullptr;
  Counts origin_counts;
  c10::IValue origin_value;

  c10::IValue run_node(const Node& node) override {
    c10::IValue value = Interpreter::run_node(node);
    if (origin || node.op() == OpCode::kOutput) return value;
    Counts produced;
    count(value, produced);
    if (produced.finite()) return value;
    for (const Node* input : node.input_nodes()) {
      Counts read;
      count(this->value(*input), read);
      if (!read.finite()) return value;
    }
    origin = &node;
    origin_counts = produced;
    origin_value = value;
    return value;
  }
};

}  // namespace

std::string NonFinite::str() const {
  std::string out = fmt::format("first non-finite value: %{} ({} NaN, {} Inf of {} values)\n", node,
                                nan_count, inf_count, numel);
  out += fmt::format("  node:   {}\n", description);
  if (!td_module.empty()) out += fmt::format("  in:     TensorDictModule {}\n", td_module);
  if (!module_path.empty()) out += fmt::format("  module: {}\n", module_path);
  if (!state.empty()) out += fmt::format("  reads:  {}, which holds NaN or Inf\n", state);
  if (key) out += fmt::format("  feeds:  {}\n", key->repr());
  if (!code_line.empty()) out += fmt::format("  code:   {}\n", code_line);
  if (row_count > 0) {
    out += fmt::format("  rows:   {} of dim 0 ({}{})\n", row_count, fmt::join(rows, ", "),
                       row_count > static_cast<int64_t>(rows.size()) ? ", …" : "");
  }
  if (!indices.empty())
    out += fmt::format("  at:     {}\n", indices_text(indices, nan_count + inf_count));
  return out;
}

std::optional<NonFinite> first_nonfinite(const Debuggee& debuggee) {
  // An input's value is still held while its last reader runs: the interpreter releases it
  // after run_node returns.
  const DebugRun run(debuggee);
  Finder finder(*debuggee.module);
  finder.run(debuggee.inputs);
  if (!finder.origin) return std::nullopt;
  const Node& node = *finder.origin;
  NonFinite out;
  out.node = node.name();
  out.description = describe(node);
  out.module_path = node.meta().module_path;
  out.td_module = node.meta().td_module;
  out.state = nonfinite_state_read(node, debuggee.module->root().get());
  out.key = key_fed(debuggee, node);
  out.code_line = code_line(debuggee.code, node);
  out.nan_count = finder.origin_counts.nan;
  out.inf_count = finder.origin_counts.inf;
  out.numel = finder.origin_counts.numel;
  const c10::IValue& value = finder.origin_value;
  if (value.isTensor()) {
    nonfinite_rows(value.toTensor(), out.rows, out.row_count);
    out.indices = nonfinite_indices(value.toTensor());
  }
  return out;
}

}  // namespace tdfx
