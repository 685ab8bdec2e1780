#include <ATen/ATen.h>
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <set>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/tensordict/access_hook.h"
#include "tdfx/tensordict/modules.h"

using tdfx::make_td_module;
using tdfx::make_td_sequential;
using tdfx::NestedKey;
using tdfx::TensorDict;

namespace {

std::vector<std::string> reprs(const std::vector<NestedKey>& keys) {
  std::vector<std::string> out;
  for (const auto& key : keys) out.push_back(key.repr());
  return out;
}

/// A user module with two inputs and two outputs, behind a TORCH_MODULE holder.
struct AddSubImpl : torch::nn::Module {
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& a, at::Tensor b) {
    return {a + b, a - b};
  }
};
TORCH_MODULE(AddSub);

/// An encoder as RL code writes it: a user module whose body is a torch::nn::Sequential.
struct EncoderImpl : torch::nn::Module {
  EncoderImpl()
      : net(register_module("net", torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::ReLU(),
                                                         torch::nn::Linear(4, 2)))) {}
  at::Tensor forward(const at::Tensor& x) { return net->forward(x) * 2; }
  torch::nn::Sequential net;
};
TORCH_MODULE(Encoder);

/// Two forward overloads: one tensor scales it, two add them.
struct OverloadedImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) { return x * 10; }
  at::Tensor forward(const at::Tensor& a, const at::Tensor& b) { return a + b; }
};
TORCH_MODULE(Overloaded);

/// A forward template over any number of tensors: their sum.
struct SumAllImpl : torch::nn::Module {
  template <typename... T>
  at::Tensor forward(const T&... xs) {
    return (xs + ...);
  }
};
TORCH_MODULE(SumAll);

/// A module that returns a plain number, which no out key can hold.
struct CountImpl : torch::nn::Module {
  double forward(const at::Tensor& x) { return static_cast<double>(x.numel()); }
};
TORCH_MODULE(Count);

/// A functor with one call per tensor count.
struct Mixer {
  at::Tensor operator()(const at::Tensor& x) const { return -x; }
  std::tuple<at::Tensor, at::Tensor> operator()(at::Tensor a, at::Tensor b) const {
    return {a * b, a - b};
  }
};

at::Tensor residual(const at::Tensor& x, const at::Tensor& skip) { return x + skip; }

/// `n` tensors 1, 2, ..., n of shape [2].
std::vector<at::Tensor> counting(int n) {
  std::vector<at::Tensor> out;
  for (int i = 1; i <= n; ++i) out.push_back(at::full({2}, static_cast<double>(i)));
  return out;
}

std::vector<NestedKey> keys(int n) {
  std::vector<NestedKey> out;
  for (int i = 0; i < n; ++i) out.emplace_back("k" + std::to_string(i));
  return out;
}

std::vector<std::string> parameter_names(const torch::nn::Module& module) {
  std::vector<std::string> out;
  for (const auto& item : module.named_parameters()) out.push_back(item.key());
  return out;
}

}  // namespace

TEST_CASE("modules: seed 000's model returns hidden, latent, loc and scale for x") {
  auto model = tdfx::samples::seed_000_model();
  CHECK(reprs(model->in_keys()) == std::vector<std::string>{"'x'"});
  CHECK(reprs(model->out_keys()) ==
        std::vector<std::string>{"'hidden'", "'latent'", "'loc'", "'scale'"});
  at::manual_seed(0);
  at::Tensor x = at::randn({1, 3});
  std::vector<at::Tensor> out = model->call({}, {{"x", x}});
  REQUIRE(out.size() == 4);
  CHECK(out[0].sizes() == at::IntArrayRef{1, 4});
  CHECK(out[1].sizes() == at::IntArrayRef{1, 4});
  CHECK(out[2].sizes() == at::IntArrayRef{1, 2});
  CHECK(out[3].sizes() == at::IntArrayRef{1, 2});
  CHECK(at::equal(out[2], out[1].chunk(2, -1)[0]));
  CHECK((out[3] > 0).all().item<bool>());

  model->select_out_keys("loc");
  CHECK(reprs(model->selected_out_keys()) == std::vector<std::string>{"'loc'"});
  std::vector<at::Tensor> loc = model->call({x});
  REQUIRE(loc.size() == 1);
  CHECK(at::equal(loc[0], out[2]));

  model->reset_out_keys();
  CHECK(model->call({}, {{"x", x}}).size() == 4);
}

TEST_CASE("modules: seed 000's parameters are named through the module children") {
  auto model = tdfx::samples::seed_000_model();
  std::set<std::string> names;
  for (const auto& item : model->named_parameters()) names.insert(item.key());
  CHECK(names == std::set<std::string>{"module.0.module.weight", "module.0.module.bias",
                                       "module.2.module.weight", "module.2.module.bias"});
  CHECK(model->children_modules().size() == 4);
  CHECK(model->module_list()->size() == 4);
}

TEST_CASE("modules: forward on a TensorDict writes every out key") {
  auto model = tdfx::samples::seed_000_model();
  TensorDict td({1});
  td.set("x", at::randn({1, 3}));
  model->forward(td);
  CHECK(reprs(td.keys()) ==
        std::vector<std::string>{"'x'", "'hidden'", "'latent'", "'loc'", "'scale'"});
}

TEST_CASE("modules: with selected out keys forward drops unselected writes but keeps inputs") {
  auto model =
      make_td_sequential({make_td_module([](at::Tensor x) { return x + 1; }, {"x"}, {"hidden"}),
                          make_td_module([](at::Tensor x) { return x * 2; }, {"hidden"}, {"y"})},
                         std::vector<NestedKey>{"y"});
  TensorDict td;
  td.set("x", at::ones({2}));
  model->forward(td);
  CHECK(reprs(td.keys()) == std::vector<std::string>{"'x'", "'y'"});
  TensorDict given;
  given.set("x", at::ones({2}));
  given.set("hidden", at::zeros({2}));
  model->forward(given);
  CHECK(reprs(given.keys()) == std::vector<std::string>{"'x'", "'hidden'", "'y'"});
}

TEST_CASE("modules: forward with tensordict_out leaves the input untouched") {
  auto model = tdfx::samples::seed_000_model();
  model->select_out_keys(std::vector<NestedKey>{"scale", "loc"});
  CHECK(reprs(model->selected_out_keys()) == std::vector<std::string>{"'loc'", "'scale'"});
  TensorDict td;
  td.set("x", at::randn({1, 3}));
  TensorDict out;
  model->forward(td, out);
  CHECK(reprs(td.keys()) == std::vector<std::string>{"'x'"});
  CHECK(reprs(out.keys()) == std::vector<std::string>{"'loc'", "'scale'"});
}

TEST_CASE("modules: a sequence of lambdas with nested keys is called with a joined kwarg") {
  auto model = make_td_sequential({
      make_td_module([](at::Tensor x) { return x + 1; }, {NestedKey{"some", "key"}}, {"hidden"}),
      make_td_module([](const at::Tensor& x) { return x - 1; }, {"hidden"},
                     {NestedKey{"some", "output"}}),
  });
  model->select_out_keys(NestedKey{"some", "output"});
  CHECK(reprs(model->in_keys()) == std::vector<std::string>{"('some', 'key')"});
  CHECK(reprs(model->out_keys()) == std::vector<std::string>{"'hidden'", "('some', 'output')"});
  at::Tensor x = at::randn({1, 3});
  std::vector<at::Tensor> out = model->call({}, {{"some_key", x}});
  REQUIRE(out.size() == 1);
  CHECK(at::allclose(out[0], x));
  CHECK(model->children_modules()[0]->named_children()[0].key() == "module");
  CHECK(model->children_modules()[0]->named_children()[0].value()->name() == "Callable");
}

TEST_CASE(
    "modules: nested sequentials compute in keys from first reads and out keys at last writes") {
  auto ident = [](at::Tensor x) { return x; };
  auto inner = make_td_sequential(
      {make_td_module(ident, {"a"}, {"hidden"}), make_td_module(ident, {"hidden"}, {"hidden"})});
  auto outer = make_td_sequential({inner, make_td_module(ident, {"hidden"}, {"latent"}),
                                   make_td_module(ident, {"b"}, {"hidden"})});
  CHECK(reprs(inner->in_keys()) == std::vector<std::string>{"'a'"});
  CHECK(reprs(inner->out_keys()) == std::vector<std::string>{"'hidden'"});
  CHECK(reprs(outer->in_keys()) == std::vector<std::string>{"'a'", "'b'"});
  CHECK(reprs(outer->out_keys()) == std::vector<std::string>{"'latent'", "'hidden'"});
  std::vector<at::Tensor> out = outer->call({at::zeros({1}), at::ones({1})});
  REQUIRE(out.size() == 2);
  CHECK(out[1].item<float>() == 1);  // hidden holds its last value, written from b
}

TEST_CASE("modules: TensorDictModule wraps holders, shared_ptrs and multi-output modules") {
  auto add_sub = make_td_module(AddSub(), {"a", "b"}, {"sum", "diff"});
  auto out = add_sub->call({at::full({1}, 3.0)}, {{"b", at::full({1}, 1.0)}});
  CHECK(out[0].item<float>() == 4);
  CHECK(out[1].item<float>() == 2);
  auto from_ptr = make_td_module(std::make_shared<AddSubImpl>(), {"a", "b"}, {"s", "d"});
  CHECK(from_ptr->arity() == 2);
  auto vec = make_td_module(
      [](at::Tensor x) {
        return std::vector<at::Tensor>{x, x * 2};
      },
      {"x"}, {"p", "q"});
  CHECK(vec->run_inner({at::ones({1})})[1].item<float>() == 2);
  auto ivalue = make_td_module(
      [](at::Tensor x) {
        return c10::IValue(c10::ivalue::Tuple::create({x, x}));
      },
      {"x"}, {"p", "q"});
  CHECK(ivalue->run_inner({at::ones({1})}).size() == 2);
  auto linear = std::make_shared<tdfx::TensorDictModule>(
      torch::nn::Linear(2, 3), std::vector<NestedKey>{"x"}, std::vector<NestedKey>{"y"});
  CHECK(linear->inner_ptr()->named_parameters().size() == 2);
  CHECK(&linear->inner() == linear->inner_ptr().get());
}

TEST_CASE("modules: a torch::nn::Sequential wraps directly and computes as the Sequential does") {
  torch::nn::Sequential net(torch::nn::Linear(3, 4), torch::nn::ReLU(), torch::nn::Linear(4, 2));
  auto mod = make_td_module(net, {"x"}, {"y"});
  at::Tensor x = at::randn({5, 3});
  auto out = mod->call({x});
  REQUIRE(out.size() == 1);
  CHECK(at::equal(out[0], net->forward(x)));
  CHECK(mod->inner_ptr() == net.ptr());
  auto model = make_td_sequential({mod});
  CHECK(parameter_names(*model) ==
        std::vector<std::string>{"module.0.module.0.weight", "module.0.module.0.bias",
                                 "module.0.module.2.weight", "module.0.module.2.bias"});
  CHECK_THROWS_WITH_AS(make_td_module(net, {"a", "b"}, {"y"}),
                       doctest::Contains("takes 1 tensor(s) but in_keys ['a', 'b'] has 2"),
                       tdfx::ShapeError);
}

TEST_CASE("modules: an empty torch::nn::Sequential returns its input, as Python's does") {
  auto mod = make_td_module(torch::nn::Sequential(), {"x"}, {"y"});
  at::Tensor x = at::randn({2});
  CHECK(at::equal(mod->call({x})[0], x));
}

TEST_CASE("modules: a user module holding a torch::nn::Sequential wraps and computes") {
  Encoder encoder;
  auto mod = make_td_module(encoder, {"obs"}, {"latent"});
  at::Tensor x = at::randn({4, 3});
  CHECK(at::equal(mod->call({x})[0], encoder->net->forward(x) * 2));
  CHECK(parameter_names(*make_td_sequential({mod})) ==
        std::vector<std::string>{"module.0.module.net.0.weight", "module.0.module.net.0.bias",
                                 "module.0.module.net.2.weight", "module.0.module.net.2.bias"});
}

TEST_CASE("modules: a torch::nn::AnyModule wraps and keeps its module as the child") {
  torch::nn::Linear linear(3, 2);
  auto mod = make_td_module(torch::nn::AnyModule(linear), {"x"}, {"y"});
  at::Tensor x = at::randn({4, 3});
  CHECK(at::equal(mod->call({x})[0], linear->forward(x)));
  CHECK(mod->inner_ptr() == linear.ptr());
  CHECK(parameter_names(*mod) == std::vector<std::string>{"module.weight", "module.bias"});

  auto pair = make_td_module(torch::nn::AnyModule(AddSub()), {"a", "b"}, {"sum", "diff"});
  auto out = pair->call({at::full({1}, 3.0), at::full({1}, 1.0)});
  REQUIRE(out.size() == 2);
  CHECK(out[0].item<float>() == 4);
  CHECK(out[1].item<float>() == 2);
}

TEST_CASE("modules: a result an AnyModule returns that is not a tensor is an error naming it") {
  auto mod = make_td_module(torch::nn::AnyModule(Count()), {"x"}, {"n"});
  CHECK_THROWS_WITH_AS(mod->call({at::ones({3})}),
                       "TensorDictModule(module=(anonymous namespace)::CountImpl, in_keys=['x'], "
                       "out_keys=['n']): the "
                       "wrapped module returned a double; expected at::Tensor, a std::tuple or "
                       "std::vector of tensors, or c10::IValue",
                       tdfx::Error);
}

TEST_CASE("modules: an overloaded forward is called with the overload in_keys selects") {
  auto one = make_td_module(Overloaded(), {"x"}, {"y"});
  auto two = make_td_module(Overloaded(), {"a", "b"}, {"y"});
  CHECK(one->call({at::full({1}, 2.0)})[0].item<float>() == 20);
  CHECK(two->call({at::full({1}, 2.0), at::full({1}, 3.0)})[0].item<float>() == 5);
  CHECK(two->arity() == 2);
  CHECK_THROWS_WITH_AS(make_td_module(Overloaded(), {"a", "b", "c"}, {"y"}),
                       doctest::Contains("takes 1 or 2 tensor(s) but in_keys ['a', 'b', 'c'] "
                                         "has 3"),
                       tdfx::ShapeError);
}

TEST_CASE("modules: a templated forward takes as many tensors as there are in keys") {
  auto three = make_td_module(SumAll(), keys(3), {"y"});
  CHECK(at::equal(three->run_inner(counting(3))[0], at::full({2}, 6.0)));
  auto from_ptr = make_td_module(std::make_shared<SumAllImpl>(), keys(16), {"y"});
  CHECK(at::equal(from_ptr->run_inner(counting(16))[0], at::full({2}, 136.0)));
  CHECK_THROWS_WITH_AS(make_td_module(SumAll(), keys(17), {"y"}),
                       doctest::Contains("takes 1 to 16 tensor(s) but in_keys"), tdfx::ShapeError);
}

TEST_CASE("modules: a free function and a function pointer wrap as Callable modules") {
  at::Tensor x = at::full({2}, 3.0);
  at::Tensor skip = at::full({2}, 4.0);
  auto by_name = make_td_module(residual, {"x", "skip"}, {"y"});
  auto by_pointer = make_td_module(&residual, {"x", "skip"}, {"y"});
  CHECK(at::equal(by_name->call({x, skip})[0], at::full({2}, 7.0)));
  CHECK(at::equal(by_pointer->call({}, {{"skip", skip}, {"x", x}})[0], at::full({2}, 7.0)));
  CHECK(by_pointer->inner().name() == "Callable");
  CHECK(by_pointer->describe() ==
        "TensorDictModule(module=Callable(), in_keys=['x', 'skip'], out_keys=['y'])");
}

TEST_CASE("modules: lambdas take 7 and 10 tensors") {
  auto seven = make_td_module(
      [](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, const at::Tensor& d,
         at::Tensor e, at::Tensor f, at::Tensor g) { return a + b + c + d + e + f + g; },
      keys(7), {"y"});
  CHECK(seven->arity() == 7);
  CHECK(at::equal(seven->run_inner(counting(7))[0], at::full({2}, 28.0)));
  auto ten = make_td_module(
      [](at::Tensor a, at::Tensor b, at::Tensor c, at::Tensor d, at::Tensor e, at::Tensor f,
         at::Tensor g, at::Tensor h, at::Tensor i,
         at::Tensor j) { return std::make_tuple(a + b + c + d + e, f * g * h * i * j); },
      keys(10), {"low", "high"});
  auto out = ten->run_inner(counting(10));
  REQUIRE(out.size() == 2);
  CHECK(at::equal(out[0], at::full({2}, 15.0)));
  CHECK(at::equal(out[1], at::full({2}, 30240.0)));
}

TEST_CASE("modules: generic lambdas, functors and std::function wrap") {
  auto twice = make_td_module([](auto x) { return x * 2; }, {"x"}, {"y"});
  CHECK(twice->call({at::full({1}, 4.0)})[0].item<float>() == 8);
  auto sum = make_td_module([](const auto&... xs) { return (xs + ...); }, keys(5), {"y"});
  CHECK(at::equal(sum->run_inner(counting(5))[0], at::full({2}, 15.0)));
  auto negate = make_td_module(Mixer(), {"x"}, {"y"});
  CHECK(negate->call({at::full({1}, 4.0)})[0].item<float>() == -4);
  auto mix = make_td_module(Mixer(), {"a", "b"}, {"prod", "diff"});
  auto out = mix->call({at::full({1}, 4.0), at::full({1}, 3.0)});
  CHECK(out[0].item<float>() == 12);
  CHECK(out[1].item<float>() == 1);
  std::function<at::Tensor(at::Tensor)> fn = [](at::Tensor x) { return x + 1; };
  CHECK(make_td_module(fn, {"x"}, {"y"})->call({at::zeros({1})})[0].item<float>() == 1);
}

TEST_CASE("modules: an output count that differs from out_keys is a ShapeError") {
  auto mod = make_td_module(AddSub(), {"a", "b"}, {"sum"});
  CHECK_THROWS_WITH_AS(mod->call({at::ones({1}), at::ones({1})}),
                       doctest::Contains("returned 2 output(s) but out_keys ['sum'] has 1"),
                       tdfx::ShapeError);
}

TEST_CASE("modules: a non-tensor output is an error naming the module and out key") {
  auto mod = make_td_module([](at::Tensor) { return c10::IValue(3); }, {"x"}, {"y"});
  CHECK_THROWS_WITH_AS(mod->call({at::ones({1})}),
                       doctest::Contains("returned a Int for out key 'y'; expected a tensor"),
                       tdfx::Error);
  CHECK_THROWS_WITH_AS(mod->call({at::ones({1})}), doctest::Contains("TensorDictModule(module="),
                       tdfx::Error);
}

TEST_CASE("modules: a module arity that differs from in_keys is rejected at construction") {
  CHECK_THROWS_WITH_AS(make_td_module(AddSub(), {"a"}, {"s", "d"}),
                       doctest::Contains("takes 2 tensor(s) but in_keys ['a'] has 1"),
                       tdfx::ShapeError);
}

TEST_CASE("modules: call rejects too many positional inputs") {
  auto model = tdfx::samples::seed_000_model();
  CHECK_THROWS_WITH_AS(model->call({at::ones({1, 3}), at::ones({1, 3})}),
                       doctest::Contains("takes 1 positional input(s) (in_keys ['x']) but 2"),
                       tdfx::ShapeError);
}

TEST_CASE("modules: call rejects an unknown keyword and lists the accepted names") {
  auto mod = make_td_module(AddSub(), {NestedKey{"in", "a"}, "b"}, {"s", "d"});
  CHECK_THROWS_WITH_AS(mod->call({}, {{"c", at::ones({1})}}),
                       doctest::Contains("unknown keyword argument 'c'; accepted: 'in_a', 'b'"),
                       tdfx::KeyError);
}

TEST_CASE("modules: call rejects an input given twice") {
  auto model = tdfx::samples::seed_000_model();
  CHECK_THROWS_WITH_AS(model->call({at::ones({1, 3})}, {{"x", at::ones({1, 3})}}),
                       doctest::Contains("input 'x' given twice (keyword 'x')"), tdfx::KeyError);
}

TEST_CASE("modules: call names a missing input") {
  auto mod = make_td_module(AddSub(), {"a", NestedKey{"some", "b"}}, {"s", "d"});
  CHECK_THROWS_WITH_AS(mod->call({at::ones({1})}),
                       doctest::Contains("missing input ('some', 'b') (positional 1 or keyword "
                                         "'some_b')"),
                       tdfx::KeyError);
}

TEST_CASE("modules: select_out_keys rejects a key that is not an out key") {
  auto model = tdfx::samples::seed_000_model();
  CHECK_THROWS_WITH_AS(model->select_out_keys("nope"),
                       doctest::Contains("cannot select out key 'nope'; out_keys: ['hidden', "
                                         "'latent', 'loc', 'scale']"),
                       tdfx::KeyError);
}

TEST_CASE("modules: a missing input key during forward is a KeyError listing the keys") {
  auto model = tdfx::samples::seed_000_model();
  TensorDict td;
  td.set("y", at::ones({1, 3}));
  CHECK_THROWS_WITH_AS(model->forward(td),
                       "TensorDictModule(module=torch::nn::Linear(in_features=3, out_features=4, "
                       "bias=true), in_keys=['x'], out_keys=['hidden']) reads 'x': key 'x' not "
                       "found; keys: 'y'",
                       tdfx::KeyError);
}

TEST_CASE("modules: describe names the wrapped module and the keys") {
  auto mod = make_td_module(tdfx::NormalParamExtractor(), {"latent"}, {"loc", "scale"});
  CHECK(mod->describe() ==
        "TensorDictModule(module=NormalParamExtractor(scale_mapping='biased_softplus_1.0', "
        "scale_lb=0.0001), in_keys=['latent'], out_keys=['loc', 'scale'])");
  CHECK(tdfx::samples::seed_000_model()->describe() ==
        "TensorDictSequential(in_keys=['x'], out_keys=['hidden', 'latent', 'loc', 'scale'])");
}

TEST_CASE("modules: the access hook sees a module's reads and writes") {
  struct Hook : tdfx::KeyAccessHook {
    std::vector<std::string> log;
    at::Tensor on_read(const TensorDict&, const NestedKey& k, const at::Tensor& t) override {
      log.push_back("read " + k.repr());
      return t;
    }
    void on_write(const TensorDict&, const NestedKey& k, const at::Tensor&) override {
      log.push_back("write " + k.repr());
    }
  } hook;
  auto mod = make_td_module([](at::Tensor x) { return x + 1; }, {"x"}, {"y"});
  TensorDict td;
  td.set("x", at::ones({1}));
  {
    tdfx::ScopedKeyAccessHook scope(&hook);
    mod->forward(td);
  }
  CHECK(hook.log == std::vector<std::string>{"read 'x'", "write 'y'"});
}

TEST_CASE("normal_param_extractor: biased softplus gives tensordict's numbers") {
  // tensordict's NormalParamExtractor(scale_mapping="biased_softplus_1.0", scale_lb=1e-4) is
  // loc, scale = x.chunk(2, -1); scale = (softplus(scale + b) + 0.01).clamp_min(1e-4), where
  // biased_softplus(1.0) keeps min_val = 0.01 aside and b = inv_softplus(1.0 - 0.01) is computed
  // on a float32 tensor (tensordict/nn/utils.py): seed 000's exported graph adds
  // 0.5254586935043335, then 0.01. Not log(expm1(1.0)) = 0.541324854612918 in double.
  tdfx::NormalParamExtractor npe;
  // Python: torch.tensor(1.0 - 0.01).expm1().clamp_min(1e-6).log().item()
  CHECK(npe->bias() == 0.5254586935043335);
  CHECK(npe->min_val() == 0.01);
  const at::Tensor x =
      at::tensor({-1.5, 0.25, 2.0, -30.0, -2.0, 0.0, 0.75, -0.5, 4.0, 0.5, 3.0, 25.0}, at::kFloat)
          .reshape({2, 6});
  auto [loc, scale] = npe->forward(x);
  CHECK(at::equal(loc, at::tensor({-1.5, 0.25, 2.0, 0.75, -0.5, 4.0}, at::kFloat).reshape({2, 3})));
  // Python, x as above: loc, s = x.chunk(2, -1);
  // (torch.nn.functional.softplus(s + 0.5254586935043335) + 0.01).clamp_min(1e-4).tolist()
  const at::Tensor expected =
      at::tensor({0.009999999776482582, 0.21610619127750397, 1.0, 1.3419369459152222,
                  3.564472198486328, 25.535459518432617},
                 at::kFloat)
          .reshape({2, 3});
  CHECK(at::equal(scale, expected));
}

TEST_CASE("normal_param_extractor: every scale mapping matches its formula") {
  at::Tensor x = at::randn({3, 8}) * 5;
  at::Tensor s = x.chunk(2, -1)[1];
  auto scale_of = [&](const std::string& mapping, double lb = 1e-4) {
    tdfx::NormalParamExtractor npe(
        tdfx::NormalParamExtractorOptions().scale_mapping(mapping).scale_lb(lb));
    return std::get<1>(npe->forward(x));
  };
  // tensordict's float32 inverse softplus of bias - min_val; Python:
  // torch.tensor(2.0 - 0.01).expm1().clamp_min(1e-6).log().item() and the same of 2.0 - 0.5.
  const double b2 = 1.8430122137069702;
  const double b3 = 1.247517466545105;
  CHECK(at::equal(scale_of("biased_softplus_2"),
                  (at::softplus(s + b2, 1, 20) + 0.01).clamp_min(1e-4)));
  CHECK(at::equal(scale_of("biased_softplus_2.0_0.5"),
                  (at::softplus(s + b3, 1, 20) + 0.5).clamp_min(1e-4)));
  CHECK(at::equal(scale_of("softplus"), at::softplus(s, 1, 20).clamp_min(1e-4)));
  CHECK(at::equal(scale_of("exp"), s.exp().clamp_min(1e-4)));
  CHECK(at::equal(scale_of("relu"), s.relu().clamp_min(1e-4)));
  CHECK(at::equal(scale_of("none", 0.5), s.clamp_min(0.5)));
}

TEST_CASE("normal_param_extractor: an unknown scale mapping lists the accepted ones") {
  using tdfx::NormalParamExtractorOptions;
  for (const std::string bad :
       {"tanh", "biased_softplus", "biased_softplus_x", "biased_softplus_1_2_3"}) {
    CHECK_THROWS_WITH_AS(
        tdfx::NormalParamExtractor(NormalParamExtractorOptions().scale_mapping(bad)),
        doctest::Contains(
            ("unknown scale_mapping '" + bad + "'; accepted: 'biased_softplus_<bias>'").c_str()),
        tdfx::Error);
  }
}

TEST_CASE("modules: a failure inside the wrapped module names the module, without a backtrace") {
  auto model = make_td_module(torch::nn::Linear(3, 4), {"x"}, {"hidden"});
  TensorDict td({{"x", at::randn({2, 5})}}, {2});
  CHECK_THROWS_WITH_AS(model->forward(td),
                       "TensorDictModule(module=torch::nn::Linear(in_features=3, out_features=4, "
                       "bias=true), in_keys=['x'], out_keys=['hidden']): the wrapped module "
                       "failed: mat1 and mat2 shapes cannot be multiplied (2x5 and 3x4)",
                       tdfx::RunError);
}

TEST_CASE("modules: a missing key close to an existing one is suggested") {
  auto model = make_td_module(torch::nn::Linear(3, 4), {{"obs", "pixels"}}, {"hidden"});
  TensorDict td({{{"obs", "pixel"}, at::randn({2, 3})}}, {2});
  CHECK_THROWS_WITH_AS(model->forward(td),
                       "TensorDictModule(module=torch::nn::Linear(in_features=3, out_features=4, "
                       "bias=true), in_keys=[('obs', 'pixels')], out_keys=['hidden']) reads "
                       "('obs', 'pixels'): key ('obs', 'pixels') not found (did you mean ('obs', "
                       "'pixel')?); keys: ('obs', 'pixel')",
                       tdfx::KeyError);
}

TEST_CASE("modules: an empty holder, AnyModule or null pointer is a tdfx::Error") {
  CHECK_THROWS_WITH_AS(
      make_td_module(torch::nn::Linear{nullptr}, {"x"}, {"y"}),
      "make_td_module: the module holder (constructed with nullptr) is empty; pass a module",
      tdfx::Error);
  CHECK_THROWS_WITH_AS(make_td_module(torch::nn::AnyModule{}, {"x"}, {"y"}),
                       "make_td_module: the AnyModule is empty; pass a module", tdfx::Error);
  CHECK_THROWS_WITH_AS(make_td_module(std::shared_ptr<torch::nn::LinearImpl>{}, {"x"}, {"y"}),
                       "make_td_module: the module pointer (null) is empty; pass a module",
                       tdfx::Error);
}
