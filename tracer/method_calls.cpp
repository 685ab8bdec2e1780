#include "tdfx/tracer/method_calls.h"

#include <sstream>
#include <unordered_set>

namespace tdfx::detail {
namespace {

// Written as one string of words so that the lists read (and diff) as the vocabulary they are.
std::unordered_set<std::string> word_set(const std::string& words) {
  std::unordered_set<std::string> out;
  std::istringstream in(words);
  for (std::string word; in >> word;) out.insert(word);
  return out;
}

}  // namespace

bool prints_as_method(const std::string& op) {
  // What Python has as a Tensor method but not as a torch function (torch 1.13; checked
  // against Python by tests/tracer/test_fx_code.cpp).
  static const auto method_only = word_set(
      "_autocast_to_full_precision _autocast_to_reduced_precision _dimI _dimV _indices "
      "_nested_tensor_layer_norm _nested_tensor_size _nnz _to_dense _values align_as align_to "
      "backward ccol_indices coalesce col_indices contiguous crow_indices dense_dim dim "
      "element_size expand expand_as indices is_coalesced is_contiguous is_pinned is_set_to item "
      "new_empty new_empty_strided new_full new_ones new_zeros pin_memory record_stream "
      "refine_names rename repeat reshape_as resize resize_as retain_grad row_indices size "
      "sparse_dim sparse_mask storage_offset stride sum_to_size to to_dense to_mkldnn "
      "to_padded_tensor to_sparse to_sparse_bsc to_sparse_bsr to_sparse_csc to_sparse_csr "
      "type_as unfold values view view_as");
  // In-place ops that are functions only (torch.dropout_, torch._C._nn.elu_).
  static const auto inplace_functions = word_set(
      "alpha_dropout_ celu_ copy_sparse_to_sparse_ dropout_ elu_ embedding_renorm_ "
      "feature_alpha_dropout_ feature_dropout_ gelu_ hardsigmoid_ hardswish_ hardtanh_ "
      "leaky_relu_ mish_ relu6_ rrelu_ rrelu_with_noise_ selu_ silu_ threshold_");
  if (method_only.count(op)) return true;
  // Every other in-place op is a Tensor method; C++ calls it as one (`x.sub_(1)`), and some
  // (`sub_`) exist only so.
  const bool inplace = op.size() > 1 && op.back() == '_' && (op[0] != '_' || op == "_coalesced_");
  return inplace && !inplace_functions.count(op);
}

}  // namespace tdfx::detail
