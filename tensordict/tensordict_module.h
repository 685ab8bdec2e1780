#pragma once

/// \file
/// tensordict.nn's modules in C++: TensorDictModuleBase (keys, output selection, calls with
/// plain tensors) and TensorDictModule, which wraps a torch::nn module or a callable and moves
/// tensors between a TensorDict and its arguments and results.

#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/nested_key.h"
#include "tensordict/tensordict.h"

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

  std::vector<NestedKey> in_keys_;
  std::vector<NestedKey> out_keys_;
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
  /// Wraps `fn`, which takes exactly `arity` tensors.
  CallableModule(Fn fn, size_t arity);
  /// Calls the function.
  std::vector<c10::IValue> forward(const std::vector<at::Tensor>& args);
  /// Number of tensor arguments.
  size_t arity() const { return arity_; }
  /// Prints `Callable()`.
  void pretty_print(std::ostream& stream) const override;

 private:
  Fn fn_;
  size_t arity_;
};

namespace detail {

/// The result and arity of a function, member function or call operator type.
template <typename T>
struct FunctionTraits;
template <typename R, typename... A>
struct FunctionTraits<R (*)(A...)> {
  using result = R;
  static constexpr size_t arity = sizeof...(A);
};
template <typename R, typename C, typename... A>
struct FunctionTraits<R (C::*)(A...)> : FunctionTraits<R (*)(A...)> {};
template <typename R, typename C, typename... A>
struct FunctionTraits<R (C::*)(A...) const> : FunctionTraits<R (*)(A...)> {};
template <typename R, typename C, typename... A>
struct FunctionTraits<R (C::*)(A...) noexcept> : FunctionTraits<R (*)(A...)> {};
template <typename R, typename C, typename... A>
struct FunctionTraits<R (C::*)(A...) const noexcept> : FunctionTraits<R (*)(A...)> {};

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
template <typename... T>
void append_result(std::tuple<T...> values, std::vector<c10::IValue>& out) {
  std::apply([&](auto&... v) { (out.emplace_back(std::move(v)), ...); }, values);
}
template <typename A, typename B>
void append_result(std::pair<A, B> values, std::vector<c10::IValue>& out) {
  out.emplace_back(std::move(values.first));
  out.emplace_back(std::move(values.second));
}

/// Converts any supported result (Tensor, tuple, vector of Tensor or IValue, IValue) to a list.
template <typename R>
std::vector<c10::IValue> to_ivalues(R&& result) {
  std::vector<c10::IValue> out;
  append_result(std::forward<R>(result), out);
  return out;
}

template <typename F, size_t... I>
std::vector<c10::IValue> invoke_with(F& f, const std::vector<at::Tensor>& args,
                                     std::index_sequence<I...>) {
  return to_ivalues(f(args[I]...));
}

/// A wrapped module: the child to register, how to call it and how many tensors it takes.
struct WrappedModule {
  std::shared_ptr<torch::nn::Module> module;
  CallableModule::Fn run;
  size_t arity;
};

template <typename T>
struct IsSharedPtr : std::false_type {};
template <typename T>
struct IsSharedPtr<std::shared_ptr<T>> : std::true_type {};

/// Wraps a module implementation: calls `impl->forward` with as many tensors as it takes.
template <typename Impl>
WrappedModule wrap_impl(std::shared_ptr<Impl> impl) {
  using Traits = FunctionTraits<decltype(&Impl::forward)>;
  static_assert(Traits::arity >= 1 && Traits::arity <= 6,
                "a wrapped module's forward must take 1 to 6 tensors");
  auto call = [impl](auto&&... args) { return impl->forward(args...); };
  CallableModule::Fn run = [call](const std::vector<at::Tensor>& args) mutable {
    return invoke_with(call, args, std::make_index_sequence<Traits::arity>{});
  };
  return {std::move(impl), std::move(run), Traits::arity};
}

/// Wraps a module holder, a shared_ptr to a module, or a callable taking tensors.
template <typename M>
WrappedModule wrap(M module) {
  if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, M>) {
    return wrap_impl(module.ptr());
  } else if constexpr (IsSharedPtr<M>::value) {
    static_assert(std::is_base_of_v<torch::nn::Module, typename M::element_type>,
                  "a shared_ptr passed to TensorDictModule must point to a torch::nn::Module");
    return wrap_impl(std::move(module));
  } else {
    using Op = std::conditional_t<std::is_pointer_v<M>, M, decltype(&M::operator())>;
    using Traits = FunctionTraits<Op>;
    static_assert(Traits::arity >= 1 && Traits::arity <= 6,
                  "a wrapped callable must take 1 to 6 tensors");
    CallableModule::Fn run = [f = std::move(module)](const std::vector<at::Tensor>& args) mutable {
      return invoke_with(f, args, std::make_index_sequence<Traits::arity>{});
    };
    auto callable = std::make_shared<CallableModule>(std::move(run), Traits::arity);
    CallableModule::Fn forward = [raw = callable.get()](const std::vector<at::Tensor>& args) {
      return raw->forward(args);
    };
    return {std::move(callable), std::move(forward), Traits::arity};
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
  /// Wraps a module holder (`torch::nn::Linear(3, 4)`, a TORCH_MODULE holder), a
  /// `std::shared_ptr` to a module, or a callable taking 1..6 tensors (e.g. a lambda). The
  /// result may be a Tensor, a tuple or vector of Tensors, or IValues checked at run time.
  /// ShapeError when its arity differs from `in_keys.size()`.
  template <typename M>
  TensorDictModule(M module, std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys)
      : TensorDictModule(detail::wrap(std::move(module)), std::move(in_keys), std::move(out_keys)) {
  }

  /// The wrapped module.
  torch::nn::Module& inner() { return *inner_; }
  /// The wrapped module, shared.
  std::shared_ptr<torch::nn::Module> inner_ptr() const { return inner_; }
  /// Number of tensors the wrapped module takes.
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
