// Memory formats and layouts a traced module passes print as Python names them
// (`torch.channels_last`, `torch.strided`), as torch.fx prints the Python twins in
// fx_pipelines.py, and reach the operators as the ints c10 passes: the runs are bit-identical.
#include <doctest/doctest.h>

#include <string>

#include "tdfx/codegen/python_code.h"
#include "tdfx/graph/graph_module.h"
#include "tests/tracer/fx_views.h"
#include "tests/tracer/tracer_test_support.h"

using namespace tdfx;
using tdfx::testing::batch_of;
using tdfx::testing::bit_equal;
using tdfx::testing::fx_reference;

namespace {

/// The C++ twin of fx_pipelines.py's MemoryFormats.
at::Tensor memory_formats(const at::Tensor& x) {
  const at::Tensor c = x.clone(at::MemoryFormat::ChannelsLast);
  const at::Tensor z =
      at::zeros_like(c, at::TensorOptions().layout(at::kStrided), at::MemoryFormat::Contiguous);
  return c + z;
}

/// The C++ twin of fx_pipelines.py's ContiguousChannelsLast.
at::Tensor contiguous_channels_last(const at::Tensor& x) {
  return x.contiguous(at::MemoryFormat::ChannelsLast) * 2;
}

/// Same values, dtype, sizes and strides: a memory format that got lost shows in the strides.
void check_same_tensor(const at::Tensor& got, const at::Tensor& want) {
  CHECK(bit_equal(got, want));
  CHECK(got.strides() == want.strides());
}

}  // namespace

TEST_CASE("enums: a traced clone and zeros_like print memory formats and layouts as torch.fx") {
  auto module = make_td_module(memory_formats, {"x"}, {"y"});
  const TensorDict input = batch_of(at::randn({2, 3, 4, 5}));
  const TDGraphModule gm = symbolic_trace(module, input);
  CHECK(to_string(gm.graph()) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %clone : [#users=2] = call_function[target=torch.clone](args = (%getitem,), kwargs = "
        "{memory_format: torch.channels_last})\n"
        "    %zeros_like : [#users=1] = call_function[target=torch.zeros_like](args = (%clone,), "
        "kwargs = {layout: torch.strided, memory_format: torch.contiguous_format})\n"
        "    %add : [#users=1] = call_function[target=operator.add](args = (%clone, %zeros_like), "
        "kwargs = {})\n"
        "    return (add,)");
  CHECK(gm.code() ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    clone = torch.clone(getitem, memory_format = torch.channels_last);  getitem = None\n"
        "    zeros_like = torch.zeros_like(clone, layout = torch.strided, memory_format = "
        "torch.contiguous_format)\n"
        "    add = clone + zeros_like;  clone = zeros_like = None\n"
        "    return (add,)\n"
        "    ");
  const auto& reference = fx_reference();
  CHECK(to_string(gm.graph()) == reference.at("memory_formats graph"));
  CHECK(gm.code() == reference.at("memory_formats code"));

  // The operators receive the formats: the output is channels-last, as eager's is.
  const std::vector<at::Tensor> traced = gm.run(input);
  REQUIRE(traced.size() == 1);
  const at::Tensor eager = memory_formats(input.get("x"));
  CHECK(eager.is_contiguous(at::MemoryFormat::ChannelsLast));
  check_same_tensor(traced[0], eager);
}

TEST_CASE("enums: x.contiguous(ChannelsLast) is a call_method as torch.fx records it, and runs") {
  auto module = make_td_module(contiguous_channels_last, {"x"}, {"y"});
  const TensorDict input = batch_of(at::randn({2, 3, 4, 5}));
  TraceOptions printed;
  printed.method_calls = true;
  auto [root, prefix] = tdfx::detail::graph_root(module, printed);
  const tdfx::testing::ViewedRecording recording =
      tdfx::testing::record_for_view(module, input, printed);
  const Graph graph = recording.view(printed).graph;
  CHECK(to_string(graph) ==
        "graph():\n"
        "    %tensordict : [#users=1] = placeholder[target=tensordict]\n"
        "    %getitem : [#users=1] = call_function[target=operator.getitem](args = (%tensordict, "
        "x), kwargs = {})\n"
        "    %contiguous : [#users=1] = call_method[target=contiguous](args = (%getitem,), kwargs "
        "= {memory_format: torch.channels_last})\n"
        "    %mul : [#users=1] = call_function[target=operator.mul](args = (%contiguous, 2), "
        "kwargs = {})\n"
        "    return (mul,)");
  const auto& reference = fx_reference();
  CHECK(to_string(graph) == reference.at("contiguous_channels_last graph"));
  CHECK(python_code(graph) == reference.at("contiguous_channels_last code"));

  // What runs is the same recording as aten calls (call_method nodes do not run).
  TraceOptions flat = printed;
  flat.method_calls = false;
  flat.outline_leaves = false;
  flat.key_style = KeyStyle::kPlaceholder;
  tdfx::detail::FxView runnable = recording.view(flat);
  CHECK(to_string(runnable.graph) ==
        "graph():\n"
        "    %x : [#users=1] = placeholder[target=x]\n"
        "    %contiguous : [#users=1] = call_function[target=torch.contiguous](args = (%x,), "
        "kwargs = {memory_format: torch.channels_last})\n"
        "    %mul : [#users=1] = call_function[target=operator.mul](args = (%contiguous, 2), "
        "kwargs = {})\n"
        "    return (mul,)");
  GraphModule gm(root, std::move(runnable.graph));
  const auto outputs = gm.run({input.get("x")});
  REQUIRE(outputs.size() == 1);
  const at::Tensor eager = contiguous_channels_last(input.get("x"));
  CHECK(eager.is_contiguous(at::MemoryFormat::ChannelsLast));
  check_same_tensor(outputs[0].toTensor(), eager);
}

TEST_CASE("enums: a default memory format is left out, as torch.fx leaves out what Python omits") {
  // contiguous()'s default is contiguous_format: equal to it, the argument is not printed.
  // (The transpose makes the input non-contiguous: otherwise contiguous() calls no op.)
  auto module = make_td_module(
      [](const at::Tensor& x) { return x.transpose(0, 1).contiguous() * 2; }, {"x"}, {"y"});
  const TensorDict input({{"x", at::randn({2, 3})}});  // no batch size: y is transposed
  TraceOptions options;
  options.method_calls = true;
  const Graph graph = tdfx::testing::record_for_view(module, input, options).view(options).graph;
  CHECK(python_code(graph) ==
        "\n\n\n"
        "def forward(self, tensordict):\n"
        "    getitem = tensordict['x'];  tensordict = None\n"
        "    transpose = torch.transpose(getitem, dim0 = 0, dim1 = 1);  getitem = None\n"
        "    contiguous = transpose.contiguous();  transpose = None\n"
        "    mul = contiguous * 2;  contiguous = None\n"
        "    return (mul,)\n"
        "    ");
}
