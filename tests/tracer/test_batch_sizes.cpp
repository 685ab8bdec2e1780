// Sizes that are functions of the batch (issue 37 §2): a dynamic trace finds `2*s0`, `T*s0`,
// `s0//2` by comparing its recordings, makes them size nodes, and runs attention, transformer
// layers and `reshape({B*T, -1})` at any batch bit-equal to eager.
#include <doctest/doctest.h>

#include "samples/attention.h"
#include "tdfx/codegen/python_code.h"
#include "tdfx/core/error.h"
#include "tdfx/tracer/symbolic_trace.h"

using namespace tdfx;

namespace {

TraceOptions dynamic() {
  TraceOptions options;
  options.dynamic_batch = true;
  return options;
}

}  // namespace

TEST_CASE("batch sizes: attention, transformer layers and reshape(B*T) run at any batch") {
  for (auto& [name, module] : samples::batch_sized_pipelines()) {
    CAPTURE(name);
    at::manual_seed(0);
    const TDGraphModule gm = symbolic_trace(module, samples::batch_sized_input(4), dynamic());
    CHECK_FALSE(gm.batch_specialisation());
    for (const int64_t batch : {1, 7, 33}) {
      CAPTURE(batch);
      const TensorDict input = samples::batch_sized_input(batch);
      const at::Tensor eager = module->call({input.get("obs")}, {})[0];
      const at::Tensor traced = gm.run(input)[0];
      CHECK(traced.sizes() == eager.sizes());
      CHECK(traced.equal(eager));
    }
  }
}

TEST_CASE("batch sizes: reshape({B*T, -1}) prints its size as torch.fx prints arithmetic") {
  auto module = make_td_module(samples::TimeDistributed(samples::kEmbed), {"obs"}, {"y"});
  const TDGraphModule gm = symbolic_trace(module, samples::batch_sized_input(4), dynamic());
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['obs'];  tensordict = None\n"
        "    size = getitem.size(0)\n"
        "    mul = size * 5;  size = None\n"
        "    reshape = torch.reshape(getitem, shape = [mul, -1]);  mul = None\n"
        "    linear = self.linear(reshape);  reshape = None\n"
        "    relu = torch.relu(linear);  linear = None\n"
        "    size_1 = getitem.size(0);  getitem = None\n"
        "    reshape_1 = torch.reshape(relu, shape = [size_1, 5, -1]);  relu = size_1 = None\n"
        "    return (reshape_1,)\n"
        "    ");
  // The dimensions that are functions of the batch print as torch.export prints them.
  CHECK(
      print_readable(gm.graph()) ==
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, tensordict):\n"
      "        getitem: \"f32[s0, 5, 8]\" = tensordict['obs'];  tensordict = None\n"
      "        size: \"Sym(s0)\" = getitem.size(0)\n"
      "        mul: \"Sym(5*s0)\" = size * 5;  size = None\n"
      "        reshape: \"f32[5*s0, 8]\" = torch.reshape(getitem, shape = [mul, -1]);  mul = None\n"
      "\n"
      "        # Module: linear (Linear(in_features=8, out_features=8, bias=true))\n"
      "        linear: \"f32[5*s0, 8]\" = self.linear(reshape);  reshape = None\n"
      "        relu: \"f32[5*s0, 8]\" = torch.relu(linear);  linear = None\n"
      "        size_1: \"Sym(s0)\" = getitem.size(0);  getitem = None\n"
      "        reshape_1: \"f32[s0, 5, 8]\" = torch.reshape(relu, shape = [size_1, 5, -1]);  "
      "relu = size_1 = None\n"
      "        return (reshape_1,)\n"
      "        ");
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=3] = call_function[target=operator.getitem](args = (%tensordict, "
        "obs), kwargs = {})\n"
        "    %size : [#users=1] = call_method[target=size](args = (%getitem, 0), kwargs = {})\n"
        "    %mul : [#users=1] = call_function[target=operator.mul](args = (%size, 5), kwargs = "
        "{})\n"
        "    %reshape : [#users=1] = call_function[target=torch.reshape](args = (%getitem,), "
        "kwargs = {shape: [%mul, -1]})\n"
        "    %linear : [#users=1] = call_module[target=linear](args = (%reshape,), kwargs = {})\n"
        "    %relu : [#users=1] = call_function[target=torch.relu](args = (%linear,), kwargs = "
        "{})\n"
        "    %size_1 : [#users=1] = call_method[target=size](args = (%getitem, 0), kwargs = {})\n"
        "    %reshape_1 : [#users=1] = call_function[target=torch.reshape](args = (%relu,), "
        "kwargs = {shape: [%size_1, 5, -1]})\n"
        "    return (reshape_1,)");
}

TEST_CASE("batch sizes: s0//2 and s0 - 1 are found and checked on every probe") {
  auto module = make_td_module(
      [](const at::Tensor& x) {
        const int64_t half = x.size(0) / 2;
        return x - x.narrow(0, 0, half).sum(0) * x.select(0, x.size(0) - 1);
      },
      {"obs"}, {"y"});
  const TDGraphModule gm = symbolic_trace(module, samples::batch_sized_input(8), dynamic());
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['obs'];  tensordict = None\n"
        "    size = getitem.size(0)\n"
        "    sub = size - 1;  size = None\n"
        "    select = torch.select(getitem, dim = 0, index = sub);  sub = None\n"
        "    size_1 = getitem.size(0)\n"
        "    floordiv = size_1 // 2;  size_1 = None\n"
        "    narrow = torch.narrow(getitem, dim = 0, start = 0, length = floordiv);  floordiv = "
        "None\n"
        "    sum_1 = torch.sum(narrow, dim = [0]);  narrow = None\n"
        "    mul = sum_1 * select;  sum_1 = select = None\n"
        "    sub_1 = getitem - mul;  getitem = mul = None\n"
        "    return (sub_1,)\n"
        "    ");
  for (const int64_t batch : {1, 2, 9, 40}) {
    CAPTURE(batch);
    const TensorDict input = samples::batch_sized_input(batch);
    CHECK(gm.run(input)[0].equal(module->call({input.get("obs")}, {})[0]));
  }
}

TEST_CASE("batch sizes: an integer that is no function of the batch is refused by name") {
  // min(B, 6): 6 at batches 8 and 9, 1 at batch 1; no function of the batch fits.
  auto module = make_td_module(
      [](const at::Tensor& x) {
        return x * x.narrow(0, 0, std::min<int64_t>(x.size(0), 6)).sum(0);
      },
      {"obs"}, {"y"});
  CHECK_THROWS_WITH_AS(
      symbolic_trace(module, samples::batch_sized_input(8), dynamic()),
      "TensorDictModule(module=Callable(), in_keys=['obs'], out_keys=['y']): no dynamic batch: "
      "the recordings at batch 8 and at batch 1 differ at %narrow: an integer argument is 6, 6, "
      "1, 6 at batches 8, 9, 1, 35, which is no function of the batch (s0*a + c, s0//d); trace "
      "with a static batch (the default), or compute it with tensor ops",
      TraceError);
  // Two probes only: 2*s0 cannot be checked on a further one, so it is refused.
  auto doubled = make_td_module(
      [](const at::Tensor& x) {
        return x.reshape({x.size(0) * 2, -1}).relu().reshape({x.size(0), -1});
      },
      {"obs"}, {"y"});
  TraceOptions one_probe = dynamic();
  one_probe.batch_probes = {5};
  CHECK_THROWS_WITH_AS(
      symbolic_trace(doubled, samples::batch_sized_input(8), one_probe),
      "TensorDictModule(module=Callable(), in_keys=['obs'], out_keys=['y']): no dynamic batch: "
      "the recordings at batch 8 and at batch 5 differ at %reshape: an integer argument is 16, "
      "10 at batches 8, 5, which two recordings cannot tell a function of the batch (s0*a + c "
      "and s0//d are checked on a third: add a batch to TraceOptions::batch_probes); trace with "
      "a static batch (the default), or compute it with tensor ops",
      TraceError);
  CHECK_NOTHROW(symbolic_trace(doubled, samples::batch_sized_input(8), dynamic()));
}

TEST_CASE("batch sizes: a batch probe too large for the machine is refused before allocating") {
  auto module = make_td_module([](const at::Tensor& x) { return x.relu(); }, {"obs"}, {"y"});
  TraceOptions huge = dynamic();
  huge.batch_probes = {int64_t{1} << 40};
  try {
    symbolic_trace(module, samples::batch_sized_input(8), huge);
    FAIL("the probe was not refused");
  } catch (const TraceError& error) {
    const std::string message = error.what();
    CHECK(message.rfind("TensorDictModule(module=Callable(), in_keys=['obs'], out_keys=['y']): a "
                        "dynamic batch is checked by recording the pipeline at batches "
                        "1099511627776 besides the example's 8, and it fails at batch "
                        "1099511627776: cannot make the example at batch 1099511627776 from its "
                        "batch of 8: it would take ",
                        0) == 0);
    CHECK(message.find("GB of memory") != std::string::npos);
  }
}
