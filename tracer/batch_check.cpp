#include "tdfx/tracer/batch_check.h"

#include <ATen/ATen.h>

#include "tdfx/core/error.h"

namespace tdfx {

void BatchSpecialisation::check(int64_t batch) const {
  if (batch == traced_batch) return;
  if (traced_batch == 0) {
    fail<ShapeError>(
        "traced at batch 0; this input has batch {}, and an example without rows cannot show "
        "what depends on the batch: trace with at least one row",
        batch);
  }
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

void check_input_shape(const TensorMeta& traced, const at::Tensor& input, const std::string& name) {
  if (!traced.shape) return;
  const std::vector<int64_t>& shape = *traced.shape;
  bool fits = static_cast<size_t>(input.dim()) == shape.size();
  for (size_t i = 0; fits && i < shape.size(); ++i) {
    fits = traced.follows_batch(i) || input.size(static_cast<int64_t>(i)) == shape[i];
  }
  if (fits) return;
  std::string expected;
  for (size_t i = 0; i < shape.size(); ++i) {
    expected += (i ? ", " : "") + (traced.follows_batch(i) ? "s0" : std::to_string(shape[i]));
  }
  fail<ShapeError>(
      "input {} has shape [{}]; the graph was traced for [{}], and only its batch dimensions (s0) "
      "may differ: sizes read as integers while tracing are constants of the graph",
      name, fmt::format("{}", fmt::join(input.sizes(), ", ")), expected);
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

}  // namespace detail
}  // namespace tdfx
