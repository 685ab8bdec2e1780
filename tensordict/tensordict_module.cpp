#include "tdfx/tensordict/tensordict_module.h"

#include <c10/util/Type.h>
#include <fmt/format.h>

#include <algorithm>
#include <ostream>
#include <sstream>

#include "tdfx/core/error.h"
#include "tdfx/tensordict/access_hook.h"

namespace tdfx {
namespace {

bool contains_key(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::string quoted_names(const std::vector<NestedKey>& keys) {
  std::vector<std::string> names;
  for (const NestedKey& key : keys) names.push_back("'" + key.joined("_") + "'");
  return fmt::format("{}", fmt::join(names, ", "));
}

// The type of a result an AnyModule or a Sequential returned that TensorDictModule cannot
// split into outputs; run_inner adds the module's name.
class UnsupportedResult : public Error {
 public:
  using Error::Error;
};

// The counts set in a mask of accepted tensor counts: "2", "3 or 4", "1 to 16".
std::string count_text(uint32_t counts) {
  std::vector<size_t> set;
  for (size_t n = 0; n < 32; ++n) {
    if (counts & (uint32_t{1} << n)) set.push_back(n);
  }
  if (set.empty()) return "no";
  const bool run = set.back() - set.front() + 1 == set.size();
  if (set.size() > 2 && run) return fmt::format("{} to {}", set.front(), set.back());
  if (set.size() == 1) return std::to_string(set[0]);
  return fmt::format("{} or {}", fmt::join(std::vector<size_t>(set.begin(), set.end() - 1), ", "),
                     set.back());
}

}  // namespace

namespace detail {

void fail_empty_module(const char* what) {
  fail<Error>("make_td_module: the {} is empty; pass a module", what);
}

}  // namespace detail

// ---- TensorDictModuleBase ------------------------------------------------------------------

TensorDictModuleBase::TensorDictModuleBase(std::string name) : torch::nn::Module(std::move(name)) {}

const std::vector<NestedKey>& TensorDictModuleBase::selected_out_keys() const {
  return selected_out_keys_ ? *selected_out_keys_ : out_keys_;
}

TensorDictModuleBase& TensorDictModuleBase::select_out_keys(const std::vector<NestedKey>& keys) {
  for (const NestedKey& key : keys) {
    if (!contains_key(out_keys_, key)) {
      fail<KeyError>("{}: cannot select out key {}; out_keys: {}", describe(), key.repr(),
                     repr(out_keys_));
    }
  }
  // Kept in out_keys order, so that calls return outputs in the module's order.
  std::vector<NestedKey> selected;
  for (const NestedKey& key : out_keys_) {
    if (contains_key(keys, key)) selected.push_back(key);
  }
  selected_out_keys_ = std::move(selected);
  return *this;
}

TensorDictModuleBase& TensorDictModuleBase::select_out_keys(const NestedKey& key) {
  return select_out_keys(std::vector<NestedKey>{key});
}

void TensorDictModuleBase::reset_out_keys() { selected_out_keys_.reset(); }

TensorDict& TensorDictModuleBase::forward(TensorDict& td) {
  if (!selected_out_keys_) {
    run(td);
    return td;
  }
  // As tensordict's out-keys hook: written keys that were not asked for are dropped, unless
  // the caller passed them in.
  std::vector<bool> was_input;
  was_input.reserve(out_keys_.size());
  for (const NestedKey& key : out_keys_) was_input.push_back(td.contains(key));
  run(td);
  for (size_t i = 0; i < out_keys_.size(); ++i) {
    const NestedKey& key = out_keys_[i];
    if (!was_input[i] && !contains_key(*selected_out_keys_, key) && td.contains(key)) {
      td.erase(key);
    }
  }
  return td;
}

TensorDict& TensorDictModuleBase::forward(const TensorDict& td, TensorDict& tensordict_out) {
  TensorDict work(td);
  forward(work);
  for (const NestedKey& key : selected_out_keys()) tensordict_out.set(key, work.get(key));
  return tensordict_out;
}

std::vector<at::Tensor> TensorDictModuleBase::call(
    const std::vector<at::Tensor>& args,
    const std::vector<std::pair<std::string, at::Tensor>>& kwargs) {
  if (args.size() > in_keys_.size()) {
    fail<ShapeError>("{}: takes {} positional input(s) (in_keys {}) but {} were given", describe(),
                     in_keys_.size(), repr(in_keys_), args.size());
  }
  std::vector<std::optional<at::Tensor>> inputs(in_keys_.size());
  for (size_t i = 0; i < args.size(); ++i) inputs[i] = args[i];
  for (const auto& [name, tensor] : kwargs) {
    size_t index = 0;
    while (index < in_keys_.size() && in_keys_[index].joined("_") != name) ++index;
    if (index == in_keys_.size()) {
      fail<KeyError>("{}: unknown keyword argument '{}'; accepted: {}", describe(), name,
                     quoted_names(in_keys_));
    }
    if (inputs[index]) {
      fail<KeyError>("{}: input {} given twice (keyword '{}')", describe(), in_keys_[index].repr(),
                     name);
    }
    inputs[index] = tensor;
  }
  TensorDict td;
  for (size_t i = 0; i < in_keys_.size(); ++i) {
    if (!inputs[i]) {
      fail<KeyError>("{}: missing input {} (positional {} or keyword '{}')", describe(),
                     in_keys_[i].repr(), i, in_keys_[i].joined("_"));
    }
    td.set(in_keys_[i], *inputs[i]);
  }
  forward(td);
  std::vector<at::Tensor> outputs;
  for (const NestedKey& key : selected_out_keys()) outputs.push_back(td.get(key));
  return outputs;
}

std::string TensorDictModuleBase::keys_description() const {
  return fmt::format("in_keys={}, out_keys={}", repr(in_keys_), repr(selected_out_keys()));
}

// ---- CallableModule -------------------------------------------------------------------------

CallableModule::CallableModule(Fn fn) : torch::nn::Module("Callable"), fn_(std::move(fn)) {}

std::vector<c10::IValue> CallableModule::forward(const std::vector<at::Tensor>& args) {
  return fn_(args);
}

void CallableModule::pretty_print(std::ostream& stream) const { stream << "Callable()"; }

std::vector<c10::IValue> detail::SequentialCall::operator()(const at::Tensor& input) {
  // An empty Sequential returns its input, as Python's nn.Sequential() does (LibTorch's
  // forward throws).
  if (impl->is_empty()) return {input};
  KeyAccessHook* hook = current_key_access_hook();
  auto module = impl->begin();
  if (hook) hook->on_sequential_child(0, *module->ptr());
  torch::nn::AnyValue value = module->any_forward(input);
  size_t index = 1;
  for (++module; module != impl->end(); ++module, ++index) {
    if (hook) hook->on_sequential_child(index, *module->ptr());
    value = module->any_forward(std::move(value));
  }
  return any_value_results(std::move(value));
}

std::vector<c10::IValue> detail::any_value_results(torch::nn::AnyValue value) {
  using at::Tensor;
  if (auto* tensor = value.try_get<Tensor>()) return {std::move(*tensor)};
  if (auto* v = value.try_get<std::vector<Tensor>>()) return to_ivalues(std::move(*v));
  if (auto* v = value.try_get<std::tuple<Tensor, Tensor>>()) return to_ivalues(std::move(*v));
  if (auto* v = value.try_get<std::tuple<Tensor, Tensor, Tensor>>()) {
    return to_ivalues(std::move(*v));
  }
  if (auto* v = value.try_get<std::tuple<Tensor, Tensor, Tensor, Tensor>>()) {
    return to_ivalues(std::move(*v));
  }
  if (auto* v = value.try_get<std::pair<Tensor, Tensor>>()) return to_ivalues(std::move(*v));
  // LSTM's (output, (h, c)).
  if (auto* v = value.try_get<std::tuple<Tensor, std::tuple<Tensor, Tensor>>>()) {
    return to_ivalues(std::move(*v));
  }
  if (auto* v = value.try_get<c10::IValue>()) return to_ivalues(std::move(*v));
  throw UnsupportedResult(c10::demangle(value.type_info().name()));
}

void detail::fail_tensor_count(size_t given, uint32_t accepted) {
  fail<ShapeError>("the wrapped callable takes {} tensor(s) but was called with {}",
                   count_text(accepted), given);
}

void detail::append_ivalue(c10::IValue value, std::vector<c10::IValue>& out) {
  if (value.isTuple()) {
    for (const c10::IValue& element : value.toTupleRef().elements()) append_ivalue(element, out);
  } else if (value.isTensorList()) {
    for (const at::Tensor& element : value.toTensorVector()) out.emplace_back(element);
  } else if (value.isList()) {
    for (const c10::IValue& element : value.toListRef()) out.push_back(element);
  } else {
    out.push_back(std::move(value));
  }
}

// ---- TensorDictModule -----------------------------------------------------------------------

TensorDictModule::TensorDictModule(detail::WrappedModule wrapped, std::vector<NestedKey> in_keys,
                                   std::vector<NestedKey> out_keys)
    : TensorDictModuleBase("TensorDictModule"),
      inner_(std::move(wrapped.module)),
      run_(std::move(wrapped.run)),
      arity_(in_keys.size()) {
  in_keys_ = std::move(in_keys);
  out_keys_ = std::move(out_keys);
  if (arity_ >= 32 || (wrapped.arities & (uint32_t{1} << arity_)) == 0) {
    fail<ShapeError>("{}: the wrapped module takes {} tensor(s) but in_keys {} has {}", describe(),
                     count_text(wrapped.arities), repr(in_keys_), in_keys_.size());
  }
  register_module("module", inner_);
}

std::vector<at::Tensor> TensorDictModule::run_inner(const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != arity_) {
    fail<ShapeError>("{}: the wrapped module takes {} tensor(s) but got {}", describe(), arity_,
                     inputs.size());
  }
  std::vector<c10::IValue> results;
  try {
    results = run_(inputs);
  } catch (const UnsupportedResult& e) {
    fail<Error>(
        "{}: the wrapped module returned a {}; expected at::Tensor, a std::tuple or std::vector "
        "of tensors, or c10::IValue",
        describe(), e.what());
  }
  if (results.size() != out_keys_.size()) {
    fail<ShapeError>("{}: the wrapped module returned {} output(s) but out_keys {} has {}",
                     describe(), results.size(), repr(out_keys_), out_keys_.size());
  }
  std::vector<at::Tensor> tensors;
  tensors.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].isTensor()) {
      fail<Error>("{}: the wrapped module returned a {} for out key {}; expected a tensor",
                  describe(), results[i].tagKind(), out_keys_[i].repr());
    }
    tensors.push_back(std::move(results[i]).toTensor());
  }
  return tensors;
}

void TensorDictModule::run(TensorDict& td) {
  std::vector<at::Tensor> inputs;
  inputs.reserve(in_keys_.size());
  for (const NestedKey& key : in_keys_) {
    try {
      inputs.push_back(td.get(key));
    } catch (const KeyError& e) {
      fail<KeyError>("{} reads {}: {}", describe(), key.repr(), e.what());
    }
  }
  // LibTorch's own message (a shape mismatch in a Linear, say), without its backtrace, under
  // the name of the module the user wrote.
  std::vector<at::Tensor> outputs = rethrow_foreign_as<RunError>(
      [&] { return describe() + ": the wrapped module failed"; },
      [&] {
        KeyAccessHook* hook = current_key_access_hook();
        return hook ? hook->on_call(*this, inputs, [&] { return run_inner(inputs); })
                    : run_inner(inputs);
      });
  for (size_t i = 0; i < outputs.size(); ++i) set_output(td, i, std::move(outputs[i]));
}

void TensorDictModule::set_output(TensorDict& td, size_t index, at::Tensor value) const {
  const NestedKey& key = out_keys_[index];
  const auto batch = td.batch_size();
  const auto sizes = value.sizes();
  const bool fits =
      sizes.size() >= batch.size() && std::equal(batch.begin(), batch.end(), sizes.begin());
  if (!fits) {
    // A recurrent layer's state is [layers, batch, hidden]: the batch is not first.
    fail<ShapeError>(
        "{}: out key {} has shape {}, which does not start with the TensorDict's batch size {}; "
        "use a TensorDict with no batch dimensions, or put the batch first in a module of your "
        "own (a recurrent state [layers, batch, hidden]: h.transpose(0, 1))",
        describe(), key.repr(), fmt::format("[{}]", fmt::join(sizes, ", ")),
        fmt::format("[{}]", fmt::join(batch, ", ")));
  }
  td.set(key, std::move(value));
}

std::string TensorDictModule::describe() const {
  std::ostringstream inner;
  inner_->pretty_print(inner);
  return fmt::format("TensorDictModule(module={}, {})", inner.str(), keys_description());
}

void TensorDictModule::pretty_print(std::ostream& stream) const {
  stream << "TensorDictModule(" << keys_description() << ")";
}

}  // namespace tdfx
