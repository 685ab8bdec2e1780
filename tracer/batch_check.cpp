#include "tdfx/tracer/batch_check.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"

namespace tdfx {

void BatchSpecialisation::check(int64_t batch) const {
  if (batch == traced_batch) return;
  if (node.empty()) {
    fail<ShapeError>(
        "traced at batch {} with a static batch; this input has batch {}: trace with "
        "TraceOptions::dynamic_batch (export_program: ExportOptions::dynamic_batch) for a graph "
        "that runs at other batch sizes",
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
    if (!tensor.defined() || tensor.dim() == 0 || (batch && *batch != tensor.size(0))) {
      return std::nullopt;
    }
    batch = tensor.size(0);
  }
  return batch;
}

void check_input_shape(const TensorMeta& traced, const at::Tensor& input, const std::string& name) {
  if (!input.defined()) fail<ShapeError>("input {} is an undefined tensor", name);
  if (traced.dtype && input.scalar_type() != *traced.dtype) {
    fail<ShapeError>(
        "input {} is {}; the graph was traced with {}, and the dtypes it computes in are "
        "constants of the graph: convert the input, or trace with this dtype",
        name, dtype_name(input.scalar_type()), dtype_name(*traced.dtype));
  }
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
  if (traced.batch_dims.empty()) {
    fail<ShapeError>(
        "input {} has shape [{}]; the graph was traced with static shapes [{}]: trace with "
        "TraceOptions::dynamic_batch (export_program: ExportOptions::dynamic_batch) for a batch "
        "size that varies",
        name, fmt::format("{}", fmt::join(input.sizes(), ", ")), expected);
  }
  fail<ShapeError>(
      "input {} has shape [{}]; the graph was traced for [{}], and only its batch dimensions (s0) "
      "may differ: sizes read as integers while tracing are constants of the graph",
      name, fmt::format("{}", fmt::join(input.sizes(), ", ")), expected);
}

void contiguous_as_traced(std::vector<at::Tensor>& inputs,
                          const std::vector<bool>& traced_contiguous,
                          const std::function<bool(size_t)>& written,
                          const std::function<std::string(size_t)>& name) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool was_contiguous =
        traced_contiguous.empty() || (i < traced_contiguous.size() && traced_contiguous[i]);
    if (!was_contiguous || !inputs[i].defined() || inputs[i].is_contiguous()) continue;
    if (written(i) && traced_contiguous.empty()) {
      // An exported program: its archive does not say how the example was laid out.
      fail<ShapeError>(
          "input {} is not contiguous; an exported program takes its inputs contiguous (it does "
          "not record how its example was laid out) and writes into this one, so it cannot be "
          "copied contiguous first: make it contiguous before the call",
          name(i));
    }
    if (written(i)) {
      fail<ShapeError>(
          "input {} is not contiguous, and was when traced; the program writes into it, so it "
          "cannot be copied contiguous first as a contiguous() in the module would have copied "
          "it (which a recording cannot see for a contiguous tensor): make it contiguous before "
          "the call, or trace with a non-contiguous example",
          name(i));
    }
    // A copy would not see what the program writes into another input sharing its memory (a
    // key that is a narrow() of another key the pipeline updates in place).
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (j == i || !inputs[j].defined() || !inputs[j].is_alias_of(inputs[i]) || !written(j)) {
        continue;
      }
      fail<ShapeError>(
          "input {} is not contiguous and shares memory with input {}, which the program writes "
          "into: copied contiguous, as the program takes it, it would not see that write; pass "
          "it contiguous, or as a copy of its own (clone())",
          name(i), name(j));
    }
    // Under a loaded program's memory budget a stride-0 view may not fit laid out.
    rethrow_foreign_as<RunError>(
        fmt::format("input {}, copied contiguous as it was when traced", name(i)),
        [&] { inputs[i] = inputs[i].contiguous(); });
  }
}

void check_inputs(const std::vector<TensorMeta>& traced, const std::vector<at::Tensor>& inputs,
                  const std::function<std::string(size_t)>& name) {
  // The first batch dimension seen: its size, and the input and dimension it is in.
  std::optional<int64_t> batch;
  size_t batch_input = 0;
  for (size_t i = 0; i < inputs.size() && i < traced.size(); ++i) {
    check_input_shape(traced[i], inputs[i], name(i));
    for (const int64_t dim : traced[i].batch_dims) {
      const int64_t size = inputs[i].size(dim);
      if (!batch) {
        batch = size;
        batch_input = i;
      } else if (size != *batch) {
        fail<ShapeError>(
            "input {} has batch size (s0) {} in dimension {}, and input {} has {}: the inputs "
            "share one batch size",
            name(i), size, dim, name(batch_input), *batch);
      }
    }
  }
}

TensorDict resized(const TensorDict& example, int64_t batch, int64_t to) {
  std::vector<int64_t> batch_size = example.batch_size();
  if (!batch_size.empty()) batch_size[0] = to;
  TensorDict out({}, batch_size);
  // Checked before LibTorch tries: an allocation too large for the machine may end the process
  // (under a sanitizer) instead of failing.
  double bytes = 8.0 * static_cast<double>(to);  // the row index
  for (const NestedKey& key : example.keys(true, true)) {
    const at::Tensor tensor = example.get(key);
    if (tensor.dim() > 0 && tensor.size(0) == batch && batch > 0) {
      bytes += static_cast<double>(tensor.numel() / batch) * static_cast<double>(to) *
               static_cast<double>(tensor.element_size());
    }
  }
  const double memory =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes > memory) {
    fail<TraceError>(
        "cannot make the example at batch {} from its batch of {}: it would take {:.3g} GB, more "
        "than this machine's {:.3g} GB of memory",
        to, batch, bytes / 1e9, memory / 1e9);
  }
  try {
    // Row r of the result is row r % batch of the example.
    const at::Tensor rows = at::arange(to, at::kLong).remainder(batch);
    for (const NestedKey& key : example.keys(true, true)) {
      const at::Tensor tensor = example.get(key);
      const bool batched = tensor.dim() > 0 && tensor.size(0) == batch && batch > 0;
      out.set(key, batched ? tensor.index_select(0, rows) : tensor);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& error) {  // LibTorch's: a batch too large to allocate
    fail<TraceError>("cannot make the example at batch {} from its batch of {}: {}", to, batch,
                     library_message(error));
  }
  return out;
}

}  // namespace detail
}  // namespace tdfx
