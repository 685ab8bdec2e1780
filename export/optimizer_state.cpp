#include "tdfx/export/optimizer_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <typeinfo>
#include <unordered_map>

#include "tdfx/core/dtype_names.h"
#include "tdfx/core/error.h"

namespace tdfx {

namespace {

namespace optim = torch::optim;
using Options = std::map<std::string, double>;
using Parameter = OptimizerState::Parameter;

// --- each type's options and per-parameter state, to and from OptimizerState ----------------

// A state tensor kept: a copy, so that the optimizer's next step does not change it.
void keep(Parameter& p, const char* name, const at::Tensor& t) {
  if (t.defined()) p.tensors[name] = t.detach().clone();
}

// A state tensor given back: a copy, or an undefined tensor when the state has none.
at::Tensor give(const Parameter& p, const char* name) {
  const auto found = p.tensors.find(name);
  return found == p.tensors.end() ? at::Tensor() : found->second.clone();
}

template <typename O>
Options adam_options(const O& o) {
  return {
      {"lr", o.lr()},   {"beta1", std::get<0>(o.betas())},  {"beta2", std::get<1>(o.betas())},
      {"eps", o.eps()}, {"weight_decay", o.weight_decay()}, {"amsgrad", o.amsgrad() ? 1.0 : 0.0}};
}
template <typename O>
void set_adam_options(O& o, const Options& m) {
  o.lr(m.at("lr")).betas({m.at("beta1"), m.at("beta2")}).eps(m.at("eps"));
  o.weight_decay(m.at("weight_decay")).amsgrad(m.at("amsgrad") != 0);
}
template <typename S>
void adam_state(const S& s, Parameter& p) {
  p.step = s.step();
  keep(p, "exp_avg", s.exp_avg());
  keep(p, "exp_avg_sq", s.exp_avg_sq());
  keep(p, "max_exp_avg_sq", s.max_exp_avg_sq());
}
template <typename S>
std::unique_ptr<optim::OptimizerParamState> adam_state_from(const Parameter& p) {
  auto s = std::make_unique<S>();
  s->step(p.step).exp_avg(give(p, "exp_avg")).exp_avg_sq(give(p, "exp_avg_sq"));
  s->max_exp_avg_sq(give(p, "max_exp_avg_sq"));
  return s;
}

Options sgd_options(const optim::SGDOptions& o) {
  return {{"lr", o.lr()},
          {"momentum", o.momentum()},
          {"dampening", o.dampening()},
          {"weight_decay", o.weight_decay()},
          {"nesterov", o.nesterov() ? 1.0 : 0.0}};
}
void set_sgd_options(optim::SGDOptions& o, const Options& m) {
  o.lr(m.at("lr")).momentum(m.at("momentum")).dampening(m.at("dampening"));
  o.weight_decay(m.at("weight_decay")).nesterov(m.at("nesterov") != 0);
}
void sgd_state(const optim::SGDParamState& s, Parameter& p) {
  keep(p, "momentum_buffer", s.momentum_buffer());
}
std::unique_ptr<optim::OptimizerParamState> sgd_state_from(const Parameter& p) {
  auto s = std::make_unique<optim::SGDParamState>();
  s->momentum_buffer(give(p, "momentum_buffer"));
  return s;
}

Options rmsprop_options(const optim::RMSpropOptions& o) {
  return {{"lr", o.lr()},
          {"alpha", o.alpha()},
          {"eps", o.eps()},
          {"weight_decay", o.weight_decay()},
          {"momentum", o.momentum()},
          {"centered", o.centered() ? 1.0 : 0.0}};
}
void set_rmsprop_options(optim::RMSpropOptions& o, const Options& m) {
  o.lr(m.at("lr")).alpha(m.at("alpha")).eps(m.at("eps")).weight_decay(m.at("weight_decay"));
  o.momentum(m.at("momentum")).centered(m.at("centered") != 0);
}
void rmsprop_state(const optim::RMSpropParamState& s, Parameter& p) {
  p.step = s.step();
  keep(p, "square_avg", s.square_avg());
  keep(p, "momentum_buffer", s.momentum_buffer());
  keep(p, "grad_avg", s.grad_avg());
}
std::unique_ptr<optim::OptimizerParamState> rmsprop_state_from(const Parameter& p) {
  auto s = std::make_unique<optim::RMSpropParamState>();
  s->step(p.step).square_avg(give(p, "square_avg")).momentum_buffer(give(p, "momentum_buffer"));
  s->grad_avg(give(p, "grad_avg"));
  return s;
}

Options adagrad_options(const optim::AdagradOptions& o) {
  return {{"lr", o.lr()},
          {"lr_decay", o.lr_decay()},
          {"weight_decay", o.weight_decay()},
          {"initial_accumulator_value", o.initial_accumulator_value()},
          {"eps", o.eps()}};
}
void set_adagrad_options(optim::AdagradOptions& o, const Options& m) {
  o.lr(m.at("lr")).lr_decay(m.at("lr_decay")).weight_decay(m.at("weight_decay"));
  o.initial_accumulator_value(m.at("initial_accumulator_value")).eps(m.at("eps"));
}
void adagrad_state(const optim::AdagradParamState& s, Parameter& p) {
  p.step = s.step();
  keep(p, "sum", s.sum());
}
std::unique_ptr<optim::OptimizerParamState> adagrad_state_from(const Parameter& p) {
  auto s = std::make_unique<optim::AdagradParamState>();
  s->step(p.step).sum(give(p, "sum"));
  return s;
}

// One optimizer type: how to recognise it, read and set its options, and read and make a
// parameter's state; and which state tensors its step reads, given a group's options (a
// restored state without them would make LibTorch's step read an undefined tensor).
struct Binding {
  std::string_view type;
  bool (*is)(const optim::Optimizer&);
  Options (*options)(const optim::OptimizerOptions&);
  void (*set_options)(optim::OptimizerOptions&, const Options&);
  void (*state)(const optim::OptimizerParamState&, Parameter&);
  std::unique_ptr<optim::OptimizerParamState> (*state_from)(const Parameter&);
  std::vector<std::string_view> (*needs)(const Options&);
};

template <typename Opt, typename O, typename S, Options (*Read)(const O&),
          void (*Write)(O&, const Options&), void (*State)(const S&, Parameter&),
          std::unique_ptr<optim::OptimizerParamState> (*Make)(const Parameter&)>
Binding bind(std::string_view type, std::vector<std::string_view> (*needs)(const Options&)) {
  return {
      type,
      // Exactly the type: a class derived from it may step otherwise.
      [](const optim::Optimizer& o) { return typeid(o) == typeid(Opt); },
      [](const optim::OptimizerOptions& o) { return Read(static_cast<const O&>(o)); },
      [](optim::OptimizerOptions& o, const Options& m) { Write(static_cast<O&>(o), m); },
      [](const optim::OptimizerParamState& s, Parameter& p) { State(static_cast<const S&>(s), p); },
      Make, needs};
}

std::vector<std::string_view> adam_needs(const Options& o) {
  if (o.at("amsgrad") != 0) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}
std::vector<std::string_view> sgd_needs(const Options& o) {
  if (o.at("momentum") != 0) return {"momentum_buffer"};
  return {};
}
std::vector<std::string_view> rmsprop_needs(const Options& o) {
  std::vector<std::string_view> out{"square_avg"};
  if (o.at("momentum") > 0) out.emplace_back("momentum_buffer");
  if (o.at("centered") != 0) out.emplace_back("grad_avg");
  return out;
}
std::vector<std::string_view> adagrad_needs(const Options&) { return {"sum"}; }

const std::vector<Binding>& bindings() {
  static const std::vector<Binding> table{
      bind<optim::Adam, optim::AdamOptions, optim::AdamParamState, adam_options<optim::AdamOptions>,
           set_adam_options<optim::AdamOptions>, adam_state<optim::AdamParamState>,
           adam_state_from<optim::AdamParamState>>("Adam", adam_needs),
      bind<optim::AdamW, optim::AdamWOptions, optim::AdamWParamState,
           adam_options<optim::AdamWOptions>, set_adam_options<optim::AdamWOptions>,
           adam_state<optim::AdamWParamState>, adam_state_from<optim::AdamWParamState>>("AdamW",
                                                                                        adam_needs),
      bind<optim::SGD, optim::SGDOptions, optim::SGDParamState, sgd_options, set_sgd_options,
           sgd_state, sgd_state_from>("SGD", sgd_needs),
      bind<optim::RMSprop, optim::RMSpropOptions, optim::RMSpropParamState, rmsprop_options,
           set_rmsprop_options, rmsprop_state, rmsprop_state_from>("RMSprop", rmsprop_needs),
      bind<optim::Adagrad, optim::AdagradOptions, optim::AdagradParamState, adagrad_options,
           set_adagrad_options, adagrad_state, adagrad_state_from>("Adagrad", adagrad_needs),
  };
  return table;
}

const Binding* binding_of(const optim::Optimizer& optimizer) {
  for (const Binding& b : bindings()) {
    if (b.is(optimizer)) return &b;
  }
  return nullptr;
}

// LibTorch 1.13 keys an optimizer's state by its parameter's TensorImpl address, as text.
std::string state_key(const at::Tensor& parameter) {
  return c10::guts::to_string(parameter.unsafeGetTensorImpl());
}

// The module's parameters by TensorImpl, with their names.
std::unordered_map<const c10::TensorImpl*, std::string> parameter_names(
    const torch::nn::Module& module) {
  std::unordered_map<const c10::TensorImpl*, std::string> out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    out.emplace(item.value().unsafeGetTensorImpl(), item.key());
  }
  return out;
}

// The names of a group's parameters, appended to `out`.
void group_names(const optim::OptimizerParamGroup& group, size_t index,
                 const std::unordered_map<const c10::TensorImpl*, std::string>& names,
                 std::vector<std::string>& out) {
  for (const at::Tensor& p : group.params()) {
    const auto found = names.find(p.unsafeGetTensorImpl());
    if (found == names.end()) {
      fail<Error>(
          "optimizer state: parameter group {} holds a tensor of shape [{}] that is not a "
          "parameter of the module",
          index, fmt::join(p.sizes(), ", "));
    }
    out.push_back(found->second);
  }
}

}  // namespace

const std::vector<OptimizerKind>& optimizer_kinds() {
  static const std::vector<OptimizerKind> kinds{
      {"Adam",
       {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"},
       {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
       true,
       {"amsgrad"},
       {"beta1", "beta2"}},
      {"AdamW",
       {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"},
       {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"},
       true,
       {"amsgrad"},
       {"beta1", "beta2"}},
      {"SGD",
       {"lr", "momentum", "dampening", "weight_decay", "nesterov"},
       {"momentum_buffer"},
       false,
       {"nesterov"},
       {}},
      {"RMSprop",
       {"lr", "alpha", "eps", "weight_decay", "momentum", "centered"},
       {"square_avg", "momentum_buffer", "grad_avg"},
       true,
       {"centered"},
       {}},
      {"Adagrad",
       {"lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"},
       {"sum"},
       true,
       {},
       {}},
  };
  return kinds;
}

std::string option_problem(const OptimizerKind& kind, std::string_view option, double value) {
  const auto in = [&](const std::vector<std::string_view>& names) {
    return std::find(names.begin(), names.end(), option) != names.end();
  };
  if (!std::isfinite(value) || value < 0) return "a finite number of at least 0";
  if (in(kind.flags) && value != 0 && value != 1) return "0 or 1";
  if (in(kind.below_one) && !(value < 1)) return "below 1";
  return "";
}

const OptimizerKind* optimizer_kind(std::string_view type) {
  for (const OptimizerKind& kind : optimizer_kinds()) {
    if (kind.type == type) return &kind;
  }
  return nullptr;
}

OptimizerState optimizer_state_of(const optim::Optimizer& optimizer,
                                  const torch::nn::Module& module) {
  const Binding* binding = binding_of(optimizer);
  if (!binding) {
    fail<Error>(
        "optimizer state: this optimizer is not one tdfx keeps (Adam, AdamW, SGD, RMSprop, "
        "Adagrad: LibTorch's, as they are)");
  }
  const auto names = parameter_names(module);
  OptimizerState out;
  out.type = binding->type;
  for (size_t i = 0; i < optimizer.param_groups().size(); ++i) {
    const optim::OptimizerParamGroup& group = optimizer.param_groups()[i];
    OptimizerState::Group kept;
    kept.options = binding->options(group.options());
    group_names(group, i, names, kept.parameters);
    for (size_t k = 0; k < group.params().size(); ++k) {
      const auto state = optimizer.state().find(state_key(group.params()[k]));
      if (state == optimizer.state().end()) continue;
      binding->state(*state->second, out.parameters[kept.parameters[k]]);
    }
    out.groups.push_back(std::move(kept));
  }
  return out;
}

void restore_optimizer_state(const OptimizerState& state, optim::Optimizer& optimizer,
                             const torch::nn::Module& module) {
  const Binding* binding = binding_of(optimizer);
  if (!binding || binding->type != state.type) {
    fail<Error>("restore_optimizer_state: the state is of an {} optimizer; this optimizer is {}",
                state.type, binding ? std::string(binding->type) : "not one tdfx keeps");
  }
  const OptimizerKind& kind = *optimizer_kind(state.type);
  if (optimizer.param_groups().size() != state.groups.size()) {
    fail<Error>("restore_optimizer_state: the state has {} parameter groups, the optimizer {}",
                state.groups.size(), optimizer.param_groups().size());
  }
  const auto names = parameter_names(module);
  std::map<std::string, at::Tensor> parameters;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    parameters.emplace(item.key(), item.value());
  }
  // Everything is checked before the optimizer changes.
  std::vector<std::string> held;
  for (size_t i = 0; i < state.groups.size(); ++i) {
    const OptimizerState::Group& group = state.groups[i];
    std::vector<std::string> ours;
    group_names(optimizer.param_groups()[i], i, names, ours);
    if (ours != group.parameters) {
      fail<Error>(
          "restore_optimizer_state: parameter group {} holds [{}] in the state, [{}] in the "
          "optimizer",
          i, fmt::join(group.parameters, ", "), fmt::join(ours, ", "));
    }
    for (const std::string_view option : kind.options) {
      const auto found = group.options.find(std::string(option));
      if (found == group.options.end()) {
        fail<Error>("restore_optimizer_state: parameter group {} has no option {}", i, option);
      }
      if (const std::string problem = option_problem(kind, option, found->second);
          !problem.empty()) {
        fail<Error>("restore_optimizer_state: parameter group {}: option {} is {}, not {}", i,
                    option, found->second, problem);
      }
    }
    for (const std::string& name : group.parameters) {
      held.push_back(name);
      const auto found = state.parameters.find(name);
      if (found == state.parameters.end()) continue;
      const at::Tensor& parameter = parameters.at(name);
      for (const std::string_view needed : binding->needs(group.options)) {
        if (!found->second.tensors.count(std::string(needed))) {
          fail<Error>(
              "restore_optimizer_state: parameter {} has state without {}, which {} with these "
              "options reads",
              name, needed, state.type);
        }
      }
      for (const auto& [tensor_name, tensor] : found->second.tensors) {
        if (std::find(kind.tensors.begin(), kind.tensors.end(), tensor_name) ==
            kind.tensors.end()) {
          fail<Error>("restore_optimizer_state: parameter {}: {} keeps no state tensor '{}'", name,
                      state.type, tensor_name);
        }
        if (!tensor.defined() || tensor.scalar_type() != parameter.scalar_type() ||
            tensor.sizes() != parameter.sizes()) {
          fail<Error>(
              "restore_optimizer_state: parameter {}: its state tensor {} is not of its dtype "
              "and shape ({} [{}])",
              name, tensor_name, dtype_name(parameter.scalar_type()),
              fmt::join(parameter.sizes(), ", "));
        }
      }
      if (found->second.step < 0) {
        fail<Error>("restore_optimizer_state: parameter {}: step {} is negative", name,
                    found->second.step);
      }
    }
  }
  for (const auto& [name, kept] : state.parameters) {
    if (std::find(held.begin(), held.end(), name) == held.end()) {
      fail<Error>("restore_optimizer_state: the state of {} is for no parameter of a group", name);
    }
  }
  for (size_t i = 0; i < state.groups.size(); ++i) {
    optim::OptimizerParamGroup& group = optimizer.param_groups()[i];
    binding->set_options(group.options(), state.groups[i].options);
    for (size_t k = 0; k < group.params().size(); ++k) {
      const std::string key = state_key(group.params()[k]);
      const auto found = state.parameters.find(state.groups[i].parameters[k]);
      if (found == state.parameters.end()) {
        optimizer.state().erase(key);
      } else {
        optimizer.state()[key] = binding->state_from(found->second);
      }
    }
  }
}

}  // namespace tdfx
