#pragma once

/// \file
/// What the tracer knows about LibTorch's built-in torch::nn layers: which are leaves, and
/// how a call of one looks in a recording (the op it always records, the ops it runs before
/// reading a parameter, the nested tuple a recurrent layer returns). C++ modules have no call
/// hook, so a built-in layer inside a user's module is recognised from these facts alone.

#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace c10 {
class Error;
}  // namespace c10

namespace tdfx {

/// True for built-in torch::nn modules other than containers
/// (`torch::nn::Linear`, `torch::nn::ReLU`; not `torch::nn::Sequential`,
/// `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict` or
/// `Functional`, which are traced through so that their children show).
bool is_builtin_leaf(const torch::nn::Module& module);

namespace detail {

/// True for a module of LibTorch's own (`torch::nn::...`), container or not. The layer facts
/// below are about these; a leaf that TraceOptions::is_leaf_module declares may record any
/// ops and read its parameters as it likes.
bool is_torch_nn(const torch::nn::Module& module);

/// The ops (unqualified aten names) of which a call of the built-in layer `module` always
/// records one (`addmm`, `matmul`, `mm` or `linear` for a Linear), or nullptr for layers
/// without a known op and for modules that are not torch::nn's. Ops that read a layer's
/// parameters without one of these are user code reading its weight (a language model's head
/// tied to its embedding, `h.matmul(emb->weight.t())`), not a call of the layer.
const std::vector<std::string>* ops_a_call_records(const torch::nn::Module& module);

/// TraceError for a built-in layer in `inner` (at `path` from the graph root) that tdfx cannot
/// trace, naming it after `subject()` (called only then): LibTorch's CrossMapLRN2d, which runs as a
/// custom autograd function whose forward resizes tensors it made and writes them through views
/// (resize_as_, pow_out, select(...).add_) — writes a loaded program may not run.
void refuse_untraceable_layers(const torch::nn::Module& inner,
                               const std::function<std::string()>& subject,
                               const std::string& path);

/// True for the built-in layers whose one call reads a parameter more than once: attention
/// (its packed in_proj_weight, once each for query, key and value) and the transformer layers.
bool reads_parameters_repeatedly(const torch::nn::Module& module);

/// How many tensors the forward of the built-in layer `module` takes before its optional
/// ones, for the layers with parameters that take several: 3 for MultiheadAttention (query,
/// key, value), 2 for Bilinear, Transformer and the transformer decoders; 1 for other layers
/// and for modules that are not torch::nn's.
size_t tensor_arguments(const torch::nn::Module& module);

/// How many ops the leaf `module` runs on its input before it reads a parameter: 1 for a Conv
/// whose padding mode is not zeros (it pads its input first, `_pad_enum`), else 0.
int ops_before_parameters(const torch::nn::Module& module);

/// True when `op` (an unqualified aten name) with `outputs` results is the op of a recurrent
/// layer with all its outputs (lstm with 3, gru, rnn_tanh or rnn_relu with 2): a call that ends
/// in it returns what Python's does.
bool is_recurrent_op(std::string_view op, size_t outputs);

/// Where each output of the recurrent op `op` sits in its layer's result: LSTM returns
/// `(output, (h, c))`, GRU and RNN `(output, h)`, in C++ as in Python.
///
///     recurrent_paths("lstm")  // {{0}, {1, 0}, {1, 1}}
///     recurrent_paths("gru")   // {{0}, {1}}
std::vector<std::vector<int64_t>> recurrent_paths(std::string_view op);

/// The LibTorch layer whose forward is running on this thread (`MultiheadAttention`), found by
/// the names of the frames on the stack, the outermost when one runs in another (the layer the
/// user called); "" when the code running is the user's. Reads the stack: for rare events (a
/// value read), not for every op.
std::string builtin_layer_on_stack();

/// The innermost built-in layer in a LibTorch error's backtrace, the one that failed, or "".
std::string failed_layer(const c10::Error& error);

}  // namespace detail
}  // namespace tdfx
