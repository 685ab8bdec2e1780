#pragma once

/// \file
/// tensordict.nn's modules in C++: TensorDictModuleBase (keys, output selection, calls with
/// plain tensors) and TensorDictModule, which wraps a torch::nn module or a callable and moves
/// tensors between a TensorDict and its arguments and results.

#include <ATen/core/ivalue.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tdfx/core/nested_key.h"
#include "tdfx/tensordict/tensordict.h"

namespace tdfx {

/// A module that reads `in_keys()` from a TensorDict and writes `out_keys()` into it.
/// Subclasses implement `run`; this base adds output selection and tensor calls.
class TensorDictModuleBase : public torch::nn::Module {
 public:
  /// The keys read from the input TensorDict, in argument order.
  const std::vector<NestedKey>& in_keys() const { return in_keys_; }
  /// Every key the module writes, in output order.
  const std::vector<NestedKey>& out_keys() const { return out_keys_; }
  /// The out keys kept after `select_out_keys`, in out_keys order; all out keys otherwise.
  const std::vector<NestedKey>& selected_out_keys() const;
  /// Keeps only `keys` among the outputs: forward drops the other written keys (unless they
  /// were in the input) and `call` returns only these. KeyError for a key not in out_keys.
  TensorDictModuleBase& select_out_keys(const std::vector<NestedKey>& keys);
  /// `select_out_keys({key})`.
  TensorDictModuleBase& select_out_keys(const NestedKey& key);
  /// Undoes `select_out_keys`: every out key is an output again.
  void reset_out_keys();

  /// Reads the in keys of `td`, runs, writes the (selected) out keys into `td`; returns `td`.
  virtual TensorDict& forward(TensorDict& td);
  /// Runs on a shallow copy of `td` and writes the selected out keys into `tensordict_out`.
  virtual TensorDict& forward(const TensorDict& td, TensorDict& tensordict_out);

  /// Calls the module with plain tensors: positional `args` follow in_keys; each `kwargs` name
  /// is an in key joined by "_" (("some", "key") → "some_key"). Returns one tensor per selected
  /// out key, in out_keys order.
  ///
  ///     model->call({}, {{"x", x}})   // → {hidden, latent, loc, scale}
  std::vector<at::Tensor> call(const std::vector<at::Tensor>& args,
                               const std::vector<std::pair<std::string, at::Tensor>>& kwargs = {});

  /// A one-line description for error messages: type, wrapped module and keys.
  virtual std::string describe() const = 0;

 protected:
  /// A module named `name` (its torch::nn::Module::name()).
  explicit TensorDictModuleBase(std::string name);
  /// Reads the inputs from `td` and writes every out key.
  virtual void run(TensorDict& td) = 0;
  /// "in_keys=[...], out_keys=[...]" as Python prints the lists.
  std::string keys_description() const;

  /// The keys the module reads, in the order its forward takes them.
  std::vector<NestedKey> in_keys_;
  /// The keys the module writes, in the order its forward returns them.
  std::vector<NestedKey> out_keys_;
  /// The out keys select_out_keys() kept; none: every out key.
  std::optional<std::vector<NestedKey>> selected_out_keys_;
};

/// Shared handle to any TensorDict module (a TensorDictModule or a TensorDictSequential).
using TensorDictModuleBasePtr = std::shared_ptr<TensorDictModuleBase>;

/// A plain callable as a torch::nn::Module (named "Callable"), so that every TensorDictModule
/// has a child "module", whatever it wraps.
class CallableModule : public torch::nn::Module {
 public:
  /// The type-erased call: tensors in, results out (tensors, or values checked by the caller).
  using Fn = std::function<std::vector<c10::IValue>(const std::vector<at::Tensor>&)>;
  /// Wraps `fn`; the TensorDictModule that owns it checks how many tensors it takes.
  explicit CallableModule(Fn fn);
  /// Calls the function.
  std::vector<c10::IValue> forward(const std::vector<at::Tensor>& args);
  /// Prints `Callable()`.
  void pretty_print(std::ostream& stream) const override;

 private:
  Fn fn_;
};

namespace detail {

/// The most tensors a wrapped module or callable may take.
inline constexpr size_t kMaxTensorArgs = 16;

/// True for a result with a tensor `output` and a number `loss`, as
/// AdaptiveLogSoftmaxWithLoss's ASMoutput.
template <typename R, typename = void>
struct HasOutputAndLoss : std::false_type {};
template <typename R>
struct HasOutputAndLoss<
    R, std::enable_if_t<
           std::is_same_v<std::decay_t<decltype(std::declval<R&>().output)>, at::Tensor> &&
           std::is_arithmetic_v<std::decay_t<decltype(std::declval<R&>().loss)>>>>
    : std::true_type {};

/// True for the result types a TensorDictModule splits into its outputs.
template <typename R>
struct IsModuleResult : HasOutputAndLoss<R> {};
template <>
struct IsModuleResult<at::Tensor> : std::true_type {};
template <>
struct IsModuleResult<std::vector<at::Tensor>> : std::true_type {};
template <>
struct IsModuleResult<std::vector<c10::IValue>> : std::true_type {};
template <>
struct IsModuleResult<c10::IValue> : std::true_type {};
template <typename... T>
struct IsModuleResult<std::tuple<T...>>
    : std::bool_constant<(std::is_constructible_v<c10::IValue, T> && ...)> {};
template <typename A, typename B>
struct IsModuleResult<std::pair<A, B>>
    : std::bool_constant<std::is_constructible_v<c10::IValue, A> &&
                         std::is_constructible_v<c10::IValue, B>> {};

/// The type every probed argument has; one per index, to expand a pack of N of them.
template <size_t I>
struct TensorArg {
  using type = const at::Tensor&;
};

/// Whether `F&` can be called with as many tensors as `Seq` has indices, giving a result
/// IsModuleResult accepts. SFINAE-friendly, so overloads and templates answer too.
template <typename F, typename Seq, typename = void>
struct CallsWithTensors : std::false_type {};
template <typename F, size_t... I>
struct CallsWithTensors<F, std::index_sequence<I...>,
                        std::enable_if_t<std::is_invocable_v<F&, typename TensorArg<I>::type...>>>
    : IsModuleResult<std::decay_t<std::invoke_result_t<F&, typename TensorArg<I>::type...>>> {};

/// True when `F` can be called with exactly `N` tensors.
template <typename F, size_t N>
inline constexpr bool kCallsWith = CallsWithTensors<F, std::make_index_sequence<N>>::value;

template <typename F, size_t... N>
constexpr uint32_t tensor_arities(std::index_sequence<N...>) {
  return ((kCallsWith<F, N + 1> ? uint32_t{1} << (N + 1) : uint32_t{0}) | ... | uint32_t{0});
}

/// The tensor counts `F` can be called with, as a mask: bit n for n tensors (1 ≤ n ≤ 16).
/// An overloaded or templated call answers for every count one of its overloads takes.
template <typename F>
inline constexpr uint32_t kTensorArities =
    tensor_arities<F>(std::make_index_sequence<kMaxTensorArgs>{});

/// Splits an IValue result into its elements (tuples and lists) or keeps it whole.
void append_ivalue(c10::IValue value, std::vector<c10::IValue>& out);

inline void append_result(at::Tensor value, std::vector<c10::IValue>& out) {
  out.emplace_back(std::move(value));
}
inline void append_result(std::vector<at::Tensor> values, std::vector<c10::IValue>& out) {
  for (auto& v : values) out.emplace_back(std::move(v));
}
inline void append_result(std::vector<c10::IValue> values, std::vector<c10::IValue>& out) {
  for (auto& v : values) out.push_back(std::move(v));
}
inline void append_result(c10::IValue value, std::vector<c10::IValue>& out) {
  append_ivalue(std::move(value), out);
}
/// A result with a tensor `output` and a number `loss` (AdaptiveLogSoftmaxWithLoss's ASMoutput):
/// two results, the loss as a 0-dim float64 tensor.
template <typename R, typename = std::enable_if_t<HasOutputAndLoss<R>::value>>
void append_result(R value, std::vector<c10::IValue>& out) {
  out.emplace_back(std::move(value.output));
  out.emplace_back(at::scalar_tensor(static_cast<double>(value.loss), at::kDouble));
}

// Tuples and pairs flatten, nested ones too: LSTM's `(output, (h, c))` is three results.
template <typename... T>
void append_result(std::tuple<T...> values, std::vector<c10::IValue>& out);
template <typename A, typename B>
void append_result(std::pair<A, B> values, std::vector<c10::IValue>& out);
template <typename... T>
void append_result(std::tuple<T...> values, std::vector<c10::IValue>& out) {
  std::apply([&](auto&... v) { (append_result(std::move(v), out), ...); }, values);
}
template <typename A, typename B>
void append_result(std::pair<A, B> values, std::vector<c10::IValue>& out) {
  append_result(std::move(values.first), out);
  append_result(std::move(values.second), out);
}

/// Converts any supported result (Tensor, tuple, vector of Tensor or IValue, IValue) to a list.
template <typename R>
std::vector<c10::IValue> to_ivalues(R&& result) {
  std::vector<c10::IValue> out;
  append_result(std::forward<R>(result), out);
  return out;
}

/// The results of an AnyModule or a Sequential: a Tensor, a std::vector of them, a std::tuple
/// or std::pair of 2 to 4 of them, LSTM's `(output, (h, c))`, or an IValue. Error naming the type
/// for anything else.
std::vector<c10::IValue> any_value_results(torch::nn::AnyValue value);

/// Throws ShapeError: `given` tensors for a callable that takes the counts in `accepted`.
[[noreturn]] void fail_tensor_count(size_t given, uint32_t accepted);

template <typename F, size_t... I>
std::vector<c10::IValue> invoke_with(F& f, const std::vector<at::Tensor>& args,
                                     std::index_sequence<I...>) {
  return to_ivalues(f(args[I]...));
}

template <typename F, size_t N>
bool invoke_exactly(F& f, const std::vector<at::Tensor>& args, std::vector<c10::IValue>& out) {
  if constexpr (kCallsWith<F, N>) {
    out = invoke_with(f, args, std::make_index_sequence<N>{});
    return true;
  } else {
    return false;
  }
}

/// Calls `f` with all of `args`, through the overload that takes that many tensors.
template <typename F, size_t... N>
std::vector<c10::IValue> invoke_any(F& f, const std::vector<at::Tensor>& args,
                                    std::index_sequence<N...>) {
  std::vector<c10::IValue> out;
  const bool called = ((args.size() == N + 1 && invoke_exactly<F, N + 1>(f, args, out)) || ...);
  if (!called) fail_tensor_count(args.size(), kTensorArities<F>);
  return out;
}

/// `f` as a CallableModule::Fn.
template <typename F>
CallableModule::Fn tensor_fn(F f) {
  return [f = std::move(f)](const std::vector<at::Tensor>& args) mutable {
    return invoke_any(f, args, std::make_index_sequence<kMaxTensorArgs>{});
  };
}

/// True when `Impl::forward` takes three tensors.
template <typename Impl, typename = void>
constexpr bool kForwardsThree = false;
template <typename Impl>
constexpr bool
    kForwardsThree<Impl, std::void_t<decltype(std::declval<Impl&>().forward(
                             std::declval<const at::Tensor&>(), std::declval<const at::Tensor&>(),
                             std::declval<const at::Tensor&>()))>> = true;

/// Calls `impl->forward`, whichever of its overloads or instantiations takes the tensors.
template <typename Impl>
struct ForwardCall {
  std::shared_ptr<Impl> impl;
  // `I` defers the lookup of `forward` to overload resolution, where a missing or unfit
  // forward removes this operator instead of failing to compile.
  template <typename... A, typename I = Impl>
  auto operator()(A&&... args) -> decltype(std::declval<I&>().forward(std::forward<A>(args)...)) {
    return impl->forward(std::forward<A>(args)...);
  }
  // A recurrent layer with a two-tensor state, LSTM or LSTMCell: `forward(x, (h, c))` is
  // called with the three tensors x, h and c, when the module has no forward of three.
  template <typename I = Impl, typename = std::enable_if_t<!kForwardsThree<I>>>
  auto operator()(const at::Tensor& x, const at::Tensor& h, const at::Tensor& c)
      -> decltype(std::declval<I&>().forward(x, std::make_tuple(h, c))) {
    return impl->forward(x, std::make_tuple(h, c));
  }
};

/// Calls a torch::nn::Sequential with its one tensor. Its forward is a template over the
/// arguments and the return type, so it is run as Sequential::forward runs it, module by
/// module through their AnyModules, and the last result is taken whatever its type.
struct SequentialCall {
  std::shared_ptr<torch::nn::SequentialImpl> impl;
  std::vector<c10::IValue> operator()(const at::Tensor& input);
};

/// Calls an AnyModule with tensors. How many its module takes is known only when called.
struct AnyModuleCall {
  torch::nn::AnyModule module;
  template <typename... T, typename = std::enable_if_t<(std::is_same_v<T, at::Tensor> && ...)>>
  std::vector<c10::IValue> operator()(const T&... args) {
    return any_value_results(module.any_forward(args...));
  }
};

/// How a module implementation is called.
template <typename Impl>
using ImplCall = std::conditional_t<std::is_base_of_v<torch::nn::SequentialImpl, Impl>,
                                    SequentialCall, ForwardCall<Impl>>;

/// How a wrapped `M` is called: its module's forward for holders, shared_ptrs and
/// AnyModules, `M` itself for anything else (which then has to be callable with tensors).
template <typename M, typename = void>
struct CallOf {
  using type = M;
};
template <typename M>
struct CallOf<M, std::enable_if_t<std::is_base_of_v<torch::detail::ModuleHolderIndicator, M>>> {
  using type = ImplCall<typename M::ContainedType>;
};
template <typename T>
struct CallOf<std::shared_ptr<T>, std::enable_if_t<std::is_base_of_v<torch::nn::Module, T>>> {
  using type = ImplCall<T>;
};
template <>
struct CallOf<torch::nn::AnyModule> {
  using type = AnyModuleCall;
};

/// A wrapped module: the child to register, how to call it and how many tensors it takes.
struct WrappedModule {
  std::shared_ptr<torch::nn::Module> module;
  CallableModule::Fn run;
  /// The tensor counts `run` accepts, as kTensorArities gives them.
  uint32_t arities = 0;
};

/// Throws tdfx::Error: make_td_module was given an empty holder, AnyModule or pointer.
[[noreturn]] void fail_empty_module(const char* what);

/// Wraps a module holder, a shared_ptr to a module, an AnyModule, or a callable taking tensors.
template <typename M>
WrappedModule wrap(M module) {
  using Call = typename CallOf<M>::type;
  constexpr uint32_t arities = kTensorArities<Call>;
  static_assert(arities != 0,
                "make_td_module: cannot call this module with tensors; pass a torch::nn module "
                "holder, a std::shared_ptr<Module>, a torch::nn::AnyModule, or a callable taking "
                "1 to 16 at::Tensor arguments and returning at::Tensor, or a std::tuple or "
                "std::vector of them");
  if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, M>) {
    if (module.is_empty()) fail_empty_module("module holder (constructed with nullptr)");
    auto impl = module.ptr();
    return {impl, tensor_fn(Call{impl}), arities};
  } else if constexpr (std::is_same_v<M, torch::nn::AnyModule>) {
    if (module.is_empty()) fail_empty_module("AnyModule");
    auto impl = module.ptr();
    return {std::move(impl), tensor_fn(Call{std::move(module)}), arities};
  } else if constexpr (!std::is_same_v<Call, M>) {  // a shared_ptr to a module
    if (!module) fail_empty_module("module pointer (null)");
    return {module, tensor_fn(Call{module}), arities};
  } else {
    auto callable = std::make_shared<CallableModule>(tensor_fn(std::move(module)));
    CallableModule::Fn forward = [raw = callable.get()](const std::vector<at::Tensor>& args) {
      return raw->forward(args);
    };
    return {std::move(callable), std::move(forward), arities};
  }
}

}  // namespace detail

/// Wraps a torch::nn module or a callable: reads `in_keys` as its arguments and writes its
/// outputs to `out_keys`. The wrapped module is the child "module".
///
///     TensorDictModule mod(torch::nn::Linear(3, 4), {"x"}, {"hidden"});
///     mod.forward(td);   // td["hidden"] = linear(td["x"])
class TensorDictModule : public TensorDictModuleBase {
 public:
  /// Wraps a module holder (`torch::nn::Linear(3, 4)`, `torch::nn::Sequential(...)`, a
  /// TORCH_MODULE holder), a `std::shared_ptr` to a module, a `torch::nn::AnyModule`, or a
  /// callable taking 1 to 16 tensors: a lambda (generic ones too), a functor, a function or a
  /// function pointer. A forward with several overloads or a template is called with the one
  /// that takes `in_keys.size()` tensors; a Sequential takes one. The result may be a Tensor, a
  /// tuple or vector of Tensors, or IValues checked at run time. ShapeError when the module
  /// cannot take `in_keys.size()` tensors (for an AnyModule, only when it is called).
  ///
  ///     make_td_module(torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::ReLU()),
  ///                    {"x"}, {"hidden"});
  ///     make_td_module(&residual, {"x", "skip"}, {"y"});   // at::Tensor residual(x, skip)
  template <typename M>
  TensorDictModule(M module, std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys)
      : TensorDictModule(detail::wrap(std::move(module)), std::move(in_keys), std::move(out_keys)) {
  }

  /// The wrapped module.
  torch::nn::Module& inner() { return *inner_; }
  /// The wrapped module, shared.
  const std::shared_ptr<torch::nn::Module>& inner_ptr() const { return inner_; }
  /// Number of tensors the wrapped module is called with (one per in key).
  size_t arity() const { return arity_; }
  /// Calls the wrapped module on `inputs` (one per in key); returns one tensor per out key.
  /// ShapeError for a wrong count; Error for a non-tensor output.
  std::vector<at::Tensor> run_inner(const std::vector<at::Tensor>& inputs);

  /// `TensorDictModule(module=..., in_keys=[...], out_keys=[...])`.
  std::string describe() const override;
  /// Prints `TensorDictModule(in_keys=[...], out_keys=[...])`.
  void pretty_print(std::ostream& stream) const override;

 protected:
  void run(TensorDict& td) override;

 private:
  TensorDictModule(detail::WrappedModule wrapped, std::vector<NestedKey> in_keys,
                   std::vector<NestedKey> out_keys);
  /// Writes output `index` to its out key; ShapeError naming this module when its shape
  /// does not start with the TensorDict's batch size.
  void set_output(TensorDict& td, size_t index, at::Tensor value) const;

  std::shared_ptr<torch::nn::Module> inner_;
  CallableModule::Fn run_;
  size_t arity_;
};

/// Shared handle to a TensorDictModule.
using TensorDictModulePtr = std::shared_ptr<TensorDictModule>;

/// `std::make_shared<TensorDictModule>(module, in_keys, out_keys)`, Python's
/// `Mod(module, in_keys=[...], out_keys=[...])`.
template <typename M>
TensorDictModulePtr make_td_module(M module, std::vector<NestedKey> in_keys,
                                   std::vector<NestedKey> out_keys) {
  return std::make_shared<TensorDictModule>(std::move(module), std::move(in_keys),
                                            std::move(out_keys));
}

}  // namespace tdfx
