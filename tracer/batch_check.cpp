#include "tracer/batch_check.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace tdfx {

void BatchSpecialisation::check(int64_t batch) const {
  if (batch == traced_batch) return;
  if (node.empty()) {
    fail<ShapeError>(
        "traced at batch {}; this input has batch {}, and the pipeline could not be traced at "
        "another batch size",
        traced_batch, batch);
  }
  fail<ShapeError>("traced at batch {}; this input has batch {}, and %{}{} was specialised to it",
                   traced_batch, batch, node, module.empty() ? "" : " (module " + module + ")");
}

namespace detail {
namespace {

// The program as text, bodies included, one entry per line; the node name
// that starts each line (or the call_module holding a body) for reporting.
void program_lines(const Graph& graph, const std::string& owner,
                   std::vector<std::pair<std::string, const Node*>>& out, const Node* holder) {
  for (const Node* node : graph.nodes()) {
    out.emplace_back(owner + to_string(*node), holder ? holder : node);
    if (node->body())
      program_lines(*node->body(), owner + node->name() + ".", out, holder ? holder : node);
  }
}

}  // namespace

std::optional<int64_t> example_batch(const TensorDict& example) {
  if (!example.batch_size().empty()) return example.batch_size()[0];
  std::optional<int64_t> batch;
  for (const NestedKey& key : example.keys(true, true)) {
    const at::Tensor tensor = example.get(key);
    if (tensor.dim() == 0 || (batch && *batch != tensor.size(0))) return std::nullopt;
    batch = tensor.size(0);
  }
  return batch;
}

std::optional<int64_t> input_batch(const std::vector<at::Tensor>& inputs) {
  std::optional<int64_t> batch;
  for (const at::Tensor& tensor : inputs) {
    if (tensor.dim() == 0 || (batch && *batch != tensor.size(0))) return std::nullopt;
    batch = tensor.size(0);
  }
  return batch;
}

TensorDict widened(const TensorDict& example, int64_t batch) {
  std::vector<int64_t> batch_size = example.batch_size();
  if (!batch_size.empty()) batch_size[0] = batch + 1;
  TensorDict out({}, batch_size);
  for (const NestedKey& key : example.keys(true, true)) {
    const at::Tensor tensor = example.get(key);
    const bool batched = tensor.dim() > 0 && tensor.size(0) == batch && batch > 0;
    out.set(key, batched ? at::cat({tensor, tensor.narrow(0, 0, 1)}) : tensor);
  }
  return out;
}

std::optional<BatchSpecialisation> compare_batches(const Graph& traced, int64_t batch,
                                                   const std::function<Graph()>& retrace) {
  std::optional<Graph> other;
  try {
    other.emplace(retrace());
  } catch (const Error&) {
    // The module cannot run at another batch size: the graph holds to this one.
    return BatchSpecialisation{batch, "", ""};
  }
  std::vector<std::pair<std::string, const Node*>> a, b;
  program_lines(traced, "", a, nullptr);
  program_lines(*other, "", b, nullptr);
  for (size_t i = 0; i < a.size(); ++i) {
    if (i >= b.size() || a[i].first != b[i].first) {
      const Node* node = a[i].second;
      return BatchSpecialisation{batch, node->name(), node->meta().td_module};
    }
  }
  if (b.size() != a.size()) {
    const Node* last = a.empty() ? nullptr : a.back().second;
    return BatchSpecialisation{batch, last ? last->name() : "", last ? last->meta().td_module : ""};
  }
  return std::nullopt;
}

}  // namespace detail
}  // namespace tdfx
