// Python-style printing of TensorDict, following tensordict's `__repr__` and `_td_fields`.

#include <fmt/format.h>

#include <algorithm>

#include "tdfx/core/dtype_names.h"
#include "tdfx/tensordict/tensordict.h"

namespace tdfx {
namespace {

/// Python's `textwrap.indent`: prefixes every line that is not whitespace only.
std::string indent(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string_view line(text.data() + start, end - start);
    if (line.find_first_not_of(" \t\r\n") != std::string_view::npos) out += prefix;
    out += line;
    start = end;
  }
  return out;
}

std::string tensor_repr(const at::Tensor& t) {
  return fmt::format("Tensor(shape={}, device={}, dtype={}, is_shared={})",
                     torch_size_repr(t.sizes()), t.device().str(), dtype_repr(t.scalar_type()),
                     t.is_cuda() ? "True" : "False");
}

}  // namespace

std::string torch_size_repr(at::IntArrayRef sizes) {
  return fmt::format("torch.Size([{}])", fmt::join(sizes, ", "));
}

std::string TensorDict::repr() const {
  // Python sorts the "key: value" strings, so fields print in that order, not insertion order.
  std::vector<std::string> fields;
  fields.reserve(entries_.size());
  for (const Entry& entry : entries_) {
    fields.push_back(entry.key + ": " +
                     (entry.sub ? entry.sub->repr() : tensor_repr(entry.tensor)));
  }
  std::sort(fields.begin(), fields.end());
  const std::string body = indent(fmt::format("\n{}", fmt::join(fields, ",\n")), "    ");
  const std::string pad = "    ";
  const bool shared = device_ && device_->is_cuda();
  return fmt::format("TensorDict(\n{},\n{},\n{},\n{})", indent("fields={" + body + "}", pad),
                     indent("batch_size=" + torch_size_repr(batch_size_), pad),
                     indent("device=" + (device_ ? device_->str() : std::string("None")), pad),
                     indent(std::string("is_shared=") + (shared ? "True" : "False"), pad));
}

}  // namespace tdfx
