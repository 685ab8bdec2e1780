// torch.fx's face of aten calls: which Python function or operator a call shows as.
#include "tdfx/graph/fx_call.h"

#include <fmt/format.h>

#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/enum_names.h"
#include "tdfx/core/error.h"
#include "tdfx/core/python_repr.h"
#include "tdfx/graph/schema_arguments.h"

namespace tdfx {
namespace {

struct PythonOperator {
  const char* name;    // operator.<name>
  const char* format;  // the expression
  size_t operands;
};

// aten operators that torch.fx shows as Python operators.
const std::unordered_map<std::string, PythonOperator>& python_operators() {
  static const std::unordered_map<std::string, PythonOperator> table = {
      {"add", {"add", "{} + {}", 2}},
      {"sub", {"sub", "{} - {}", 2}},
      {"mul", {"mul", "{} * {}", 2}},
      {"div", {"truediv", "{} / {}", 2}},
      {"floor_divide", {"floordiv", "{} // {}", 2}},
      {"remainder", {"mod", "{} % {}", 2}},
      {"pow", {"pow", "{} ** {}", 2}},
      {"matmul", {"matmul", "{} @ {}", 2}},
      {"bitwise_and", {"and_", "{} & {}", 2}},
      {"bitwise_or", {"or_", "{} | {}", 2}},
      {"bitwise_xor", {"xor", "{} ^ {}", 2}},
      {"eq", {"eq", "{} == {}", 2}},
      {"ne", {"ne", "{} != {}", 2}},
      {"lt", {"lt", "{} < {}", 2}},
      {"gt", {"gt", "{} > {}", 2}},
      {"le", {"le", "{} <= {}", 2}},
      {"ge", {"ge", "{} >= {}", 2}},
      {"neg", {"neg", "-{}", 1}},
      {"bitwise_not", {"invert", "~{}", 1}},
  };
  return table;
}

bool is_tensor_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  if (auto opt = type->cast<c10::OptionalType>()) return is_tensor_type(opt->getElementType());
  if (auto list = type->cast<c10::ListType>()) return is_tensor_type(list->getElementType());
  return false;
}

// The words of `text`, split at spaces.
std::unordered_set<std::string> word_set(const char* text) {
  std::unordered_set<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.insert(word);
  return out;
}

}  // namespace

bool is_nn_function(const std::string& op) {
  // Python has these in torch._C._nn (where torch.nn.functional finds them) and not in torch
  // (torch 1.13; checked against Python by tests/tracer/test_fx_code.cpp).
  static const std::unordered_set<std::string> names = word_set(
      "_conv_depthwise2d _pad_circular _pad_enum _scaled_dot_product_attention "
      "_test_ambiguous_defaults _test_optional_filled_intlist _test_optional_floatlist "
      "_test_optional_intlist _test_string_default _test_warn_in_autograd "
      "_upsample_bicubic2d_aa _upsample_bilinear2d_aa _upsample_nearest_exact1d "
      "_upsample_nearest_exact2d _upsample_nearest_exact3d adaptive_avg_pool2d "
      "adaptive_avg_pool3d adaptive_max_pool2d adaptive_max_pool3d avg_pool2d avg_pool3d "
      "binary_cross_entropy col2im conv_depthwise3d cross_entropy_loss elu elu_ "
      "flatten_dense_tensors fractional_max_pool2d fractional_max_pool3d gelu gelu_ glu "
      "hardsigmoid hardsigmoid_ hardswish hardswish_ hardtanh hardtanh_ huber_loss im2col "
      "l1_loss leaky_relu leaky_relu_ linear log_sigmoid max_pool2d_with_indices "
      "max_pool3d_with_indices max_unpool2d max_unpool3d mish mish_ mkldnn_linear "
      "mkldnn_reorder_conv2d_weight mkldnn_reorder_conv3d_weight mse_loss multi_margin_loss "
      "multilabel_margin_loss nll_loss nll_loss2d nll_loss_nd one_hot pad pad_sequence "
      "reflection_pad1d reflection_pad2d reflection_pad3d relu6 relu6_ replication_pad1d "
      "replication_pad2d replication_pad3d rrelu_with_noise rrelu_with_noise_ silu silu_ "
      "slow_conv3d slow_conv_dilated2d slow_conv_dilated3d slow_conv_transpose2d "
      "slow_conv_transpose3d smooth_l1_loss soft_margin_loss softplus softshrink thnn_conv2d "
      "unflatten_dense_tensors upsample_bicubic2d upsample_bilinear2d upsample_linear1d "
      "upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_trilinear3d");
  return names.count(op) > 0;
}

bool is_aten_only(const std::string& op) {
  // Python has these neither in torch nor in torch._C._nn nor as Tensor methods (torch 1.13;
  // checked against Python by tests/tracer/test_fx_code.cpp): only as torch.ops.aten.<op>.
  static const std::unordered_set<std::string> names = word_set(
      "Bool Complex ComplexImplicit Delete Float FloatImplicit Int IntImplicit ScalarImplicit "
      "_adaptive_avg_pool2d_backward _adaptive_avg_pool3d_backward "
      "_amp_foreach_non_finite_check_and_unscale _amp_update_scale _backward "
      "_batch_norm_impl_index_backward _cdist_backward _cdist_forward _cholesky_solve_helper "
      "_coalesced _convolution_double_backward _ctc_loss_backward _cudnn_rnn_backward "
      "_embedding_bag_backward _embedding_bag_dense_backward "
      "_embedding_bag_per_sample_weights_backward _embedding_bag_sparse_backward "
      "_fake_quantize_learnable_per_channel_affine_backward "
      "_fake_quantize_learnable_per_tensor_affine_backward _foreach_zero _fused_adam "
      "_fused_moving_avg_obs_fq_helper_functional _fw_primal _gather_sparse_backward "
      "_get_tracing_state _grad_sum_to_size _grid_sampler_2d_cpu_fallback_backward "
      "_has_same_storage_numel _index_put_impl _infer_size _list_to_tensor _local_scalar_dense "
      "_masked_softmax_backward _ncf_unsqueeze _ncf_view _nested_select_backward "
      "_nested_sum_backward _nested_tensor_offsets _nested_tensor_strides "
      "_nested_view_from_buffer _nested_view_from_buffer_copy _new_zeros_with_same_feature_meta "
      "_no_grad_embedding_renorm_ _no_grad_fill_ _no_grad_normal_ _no_grad_uniform_ "
      "_no_grad_zero_ _pack_padded_sequence_backward _pack_sequence _pdist_backward "
      "_pdist_forward _reshape_alias _resize_output _scaled_dot_product_attention_forward "
      "_segment_reduce_backward _set_item _size_if_not_equal _slow_conv2d_backward "
      "_slow_conv2d_forward _sparse_addmm _sparse_coo_tensor_with_dims "
      "_sparse_coo_tensor_with_dims_and_tensors _sparse_log_softmax _sparse_mm _sparse_softmax "
      "_sparse_sum_backward _spdiags _symeig_helper _tensor_to_list "
      "_thnn_differentiable_gru_cell_backward _thnn_differentiable_lstm_cell_backward "
      "_thnn_fused_gru_cell _thnn_fused_gru_cell_backward _thnn_fused_lstm_cell "
      "_thnn_fused_lstm_cell_backward _thnn_fused_lstm_cell_backward_impl _to_copy _unsafe_view "
      "_unwrap_optional _upsample_bicubic2d_aa_backward _upsample_bilinear2d_aa_backward "
      "_upsample_nearest_exact1d_backward _upsample_nearest_exact2d_backward "
      "_upsample_nearest_exact3d_backward _version _weight_norm_differentiable_backward "
      "_weight_norm_interface_backward adaptive_avg_pool3d_backward "
      "adaptive_max_pool2d_backward adaptive_max_pool3d_backward affine_grid_generator_backward "
      "alias append avg_pool2d_backward avg_pool3d_backward bin binary_cross_entropy_backward "
      "capitalize cauchy center chr clear confirmed_by_owner conv_tbc_backward "
      "convolution_backward convolution_backward_overrideable convolution_overrideable copy "
      "copy_sparse_to_sparse copy_sparse_to_sparse_ count cudnn_affine_grid_generator_backward "
      "cudnn_batch_norm_backward cudnn_grid_sampler_backward cummaxmin_backward "
      "cumprod_backward data degrees diag_backward diagonal_backward dict dist_backward divmod "
      "elu_backward embedding_backward embedding_dense_backward embedding_renorm "
      "embedding_sparse_backward endswith expandtabs exponential extend fabs factorial "
      "fake_quantize_per_channel_affine_cachemask "
      "fake_quantize_per_channel_affine_cachemask_backward "
      "fake_quantize_per_tensor_affine_cachemask "
      "fake_quantize_per_tensor_affine_cachemask_backward fft_fft fft_fft2 fft_fftfreq fft_fftn "
      "fft_fftshift fft_hfft fft_hfft2 fft_hfftn fft_ifft fft_ifft2 fft_ifftn fft_ifftshift "
      "fft_ihfft fft_ihfft2 fft_ihfftn fft_irfft fft_irfft2 fft_irfftn fft_rfft fft_rfft2 "
      "fft_rfftfreq fft_rfftn find floordiv format fractional_max_pool2d_backward "
      "fractional_max_pool3d_backward gamma gather_backward gelu_backward geometric get "
      "get_gradients glu_backward glu_backward_jvp glu_jvp grad grid_sampler_2d_backward "
      "grid_sampler_3d_backward hardshrink_backward hardsigmoid_backward hardswish_backward "
      "hardtanh_backward has_torch_function hash hex huber_loss_backward index "
      "index_select_backward infinitely_differentiable_gelu_backward insert is_leaf "
      "is_non_overlapping_and_dense is_owner is_scripting is_strides_like_format isalnum "
      "isalpha isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle "
      "isupper items join keys leaky_relu_backward len lift lift_fresh lift_fresh_copy "
      "linalg_cholesky linalg_cholesky_ex linalg_cond linalg_cross linalg_det linalg_diagonal "
      "linalg_eig linalg_eigh linalg_eigvals linalg_eigvalsh linalg_householder_product "
      "linalg_inv linalg_inv_ex linalg_ldl_factor linalg_ldl_factor_ex linalg_ldl_solve "
      "linalg_lstsq linalg_lu linalg_lu_factor linalg_lu_factor_ex linalg_lu_solve "
      "linalg_matmul linalg_matrix_exp linalg_matrix_norm linalg_matrix_power "
      "linalg_matrix_rank linalg_multi_dot linalg_norm linalg_pinv linalg_qr linalg_slogdet "
      "linalg_solve linalg_solve_ex linalg_solve_triangular linalg_svd linalg_svdvals "
      "linalg_tensorinv linalg_tensorsolve linalg_vander linalg_vecdot linalg_vector_norm "
      "linear_backward list ljust local_value log_normal log_sigmoid_backward "
      "log_sigmoid_forward logit_backward lower lstm_mps_backward lstrip mH mT "
      "masked_select_backward mathremainder matmul_backward matrix_H matrix_exp_backward "
      "max_pool2d_with_indices_backward max_pool3d_with_indices_backward "
      "miopen_batch_norm_backward miopen_rnn_backward mish_backward "
      "mkldnn_adaptive_avg_pool2d_backward mkldnn_linear_backward mkldnn_linear_backward_input "
      "mkldnn_max_pool2d_backward mkldnn_max_pool3d_backward modf mps_convolution_backward "
      "mps_convolution_transpose_backward mps_max_pool2d_backward mse_loss_backward "
      "multi_margin_loss_backward multilabel_margin_loss_backward "
      "multilabel_margin_loss_forward native_batch_norm_backward native_dropout_backward "
      "native_group_norm_backward native_layer_norm_backward nested_to_padded_tensor "
      "nll_loss2d_backward nll_loss2d_forward nll_loss_backward nll_loss_forward nonzero_numpy "
      "normal_functional numpy_T oct ord output_nr owner owner_name partition percentFormat pop "
      "popitem prelu_backward radians reflection_pad1d_backward reflection_pad2d_backward "
      "reflection_pad3d_backward remove replace replication_pad1d_backward "
      "replication_pad2d_backward replication_pad3d_backward resize_as_sparse retains_grad "
      "reverse rfind rindex rjust rpartition rrelu_with_noise_backward rsplit rstrip "
      "select_backward set set_data setdefault sigmoid_backward silu_backward slice "
      "slice_backward slow_conv3d_forward smooth_l1_loss_backward soft_margin_loss_backward "
      "softplus_backward softshrink_backward sorted sparse_resize sparse_resize_and_clear "
      "sparse_sampled_addmm special_airy_ai special_bessel_j0 special_bessel_j1 "
      "special_bessel_y0 special_bessel_y1 special_chebyshev_polynomial_t "
      "special_chebyshev_polynomial_u special_chebyshev_polynomial_v "
      "special_chebyshev_polynomial_w special_digamma special_entr special_erf special_erfc "
      "special_erfcx special_erfinv special_exp2 special_expit special_expm1 special_gammainc "
      "special_gammaincc special_gammaln special_hermite_polynomial_h "
      "special_hermite_polynomial_he special_i0 special_i0e special_i1 special_i1e "
      "special_laguerre_polynomial_l special_legendre_polynomial_p special_log1p "
      "special_log_ndtr special_log_softmax special_logit special_logsumexp "
      "special_modified_bessel_i0 special_modified_bessel_i1 special_modified_bessel_k0 "
      "special_modified_bessel_k1 special_multigammaln special_ndtr special_ndtri "
      "special_polygamma special_psi special_round special_scaled_modified_bessel_k0 "
      "special_scaled_modified_bessel_k1 special_shifted_chebyshev_polynomial_t "
      "special_shifted_chebyshev_polynomial_u special_shifted_chebyshev_polynomial_v "
      "special_shifted_chebyshev_polynomial_w special_sinc special_softmax "
      "special_spherical_bessel_j0 special_xlog1py special_xlogy special_zeta splitlines "
      "startswith str strip swapcase sym_numel sym_size sym_storage_offset sym_stride "
      "tanh_backward threshold_backward title to_dense_backward to_here to_mkldnn_backward "
      "trace_backward unfold_backward uniform unique_dim unique_dim_consecutive update upper "
      "upsample_bicubic2d_backward upsample_bilinear2d_backward upsample_linear1d_backward "
      "upsample_nearest1d_backward upsample_nearest2d_backward upsample_nearest3d_backward "
      "upsample_trilinear3d_backward value_selecting_reduction_backward warn zero zfill");
  return names.count(op) > 0;
}

FxCall fx_call(const Target& target, const Args& args, const Kwargs& kwargs,
               const std::string& name) {
  if (target.is_getitem()) {
    return {"operator.getitem", "{}[{}]", args, kwargs};
  }
  if (target.is_size_arith()) {
    static constexpr const char* kFormats[] = {"{} + {}", "{} - {}", "{} * {}", "{} // {}"};
    return {target.str(), kFormats[static_cast<int>(target.arith())], args, kwargs};
  }
  if (!target.is_aten()) {
    fail<GraphError>("%{}: call_function target '{}' has no torch.fx face", name, target.str());
  }
  const auto& schema = target.schema();
  const auto& formals = schema.arguments();
  const Args full = schema_arguments(target, args, kwargs, name);

  // Which trailing arguments differ from their defaults.
  auto is_default = [&](size_t i) {
    return formals[i].default_value() && equals_default(full[i], *formals[i].default_value());
  };
  const auto& ops = python_operators();
  auto op = ops.find(target.op_name());
  if (op != ops.end() && full.size() >= op->second.operands) {
    bool rest_default = true;
    for (size_t i = op->second.operands; i < full.size(); ++i) rest_default &= is_default(i);
    if (rest_default) {
      Args operands(full.begin(), full.begin() + static_cast<long>(op->second.operands));
      return {std::string("operator.") + op->second.name, op->second.format, operands, {}};
    }
  }
  const std::string& op_name = target.op_name();
  const char* where = is_nn_function(op_name) ? "torch._C._nn."
                      : is_aten_only(op_name) ? "torch.ops.aten."
                                              : "torch.";
  FxCall call{where + op_name, "", {}, {}};
  size_t i = 0;
  for (; i < full.size() && is_tensor_type(formals[i].type()) && !formals[i].kwarg_only(); ++i) {
    call.args.push_back(full[i]);
  }
  for (; i < full.size(); ++i) {
    if (!is_default(i)) call.kwargs.emplace_back(formals[i].name(), full[i]);
  }
  return call;
}

FxCall fx_call(const Node& node) {
  return fx_call(node.target(), node.args(), node.kwargs(), node.name());
}

std::string fx_name(const Target& target, const Args& args, const Kwargs& kwargs) {
  // Only a Python operator's face depends on the arguments (`a + b`, unless alpha is set):
  // every other aten call is named by its operator, without binding the arguments.
  if (target.is_getitem()) return "getitem";
  if (target.is_size_arith()) return target.op_name();
  if (target.is_aten() && python_operators().count(target.op_name()) == 0) {
    return target.op_name();
  }
  const std::string face = fx_call(target, args, kwargs, "?").target;
  return face.substr(face.rfind('.') + 1);
}

}  // namespace tdfx
