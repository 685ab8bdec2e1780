// TorchScript export: the module's forward against ExportedProgram.module(),
// bit for bit; saving, loading back in C++ and in Python's torch.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/modules/activation.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/export/program.h"
#include "tdfx/export/torchscript.h"
#include "tests/export/enum_program.h"
#include "tests/support/test_support.h"

using namespace tdfx;
namespace fs = std::filesystem;

namespace {

using tdfx::testing::source_dir;

// A fresh folder for one test case, removed with what it holds at scope exit.
struct TempDir {
  tdfx::testing::ScratchDir scratch{"tdfx-torchscript"};
  const fs::path& path = scratch.path();
};

std::vector<at::Tensor> run(torch::jit::Module& module, const std::vector<at::Tensor>& inputs) {
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  const c10::IValue result = module.forward(args);
  REQUIRE(result.isTuple());
  std::vector<at::Tensor> out;
  for (const auto& element : result.toTupleRef().elements()) out.push_back(element.toTensor());
  return out;
}

// The forward's dict of outputs as (key, tensor) pairs, in its order.
std::vector<std::pair<std::string, at::Tensor>> run_dict(torch::jit::Module& module,
                                                         const std::vector<at::Tensor>& inputs) {
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  const c10::IValue result = module.forward(args);
  REQUIRE(result.isGenericDict());
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& entry : result.toGenericDict()) {
    out.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  }
  return out;
}

TorchScriptOptions dict_options() {
  TorchScriptOptions options;
  options.outputs = TorchScriptOutputs::kDict;
  return options;
}

void check_equal(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].dtype() == want[i].dtype());
    CHECK(at::equal(got[i], want[i]));
  }
}

// Dynamic programs: the TorchScript modules run at other batch sizes, which a static
// program's module refuses and TorchScript would not check.
ExportedProgram seed_000_program(const at::Tensor& x) {
  return export_program(samples::seed_000_model(), {{"x", x}}, {true, {}});
}

ExportedProgram loc_only_program(const at::Tensor& x) {
  auto model = samples::seed_000_model();
  model->select_out_keys(NestedKey("loc"));
  return export_program(model, {{"x", x}}, {true, {}});
}

// Every kind of constant the printer writes: a number where the schema takes a
// Tensor (Scalar overload), an empty list, a list with None, inf, a dtype, a device.
ExportedProgram constants_program() {
  Graph g;
  Node* x = g.placeholder("x");
  Node* index = g.placeholder("index");
  Node* add = g.call_function(Target::aten("aten::add.Tensor"), {x, 0.1});
  Node* mul = g.call_function(Target::aten("aten::mul.Tensor"), {add, 3});
  Node* clamp = g.call_function(Target::aten("aten::clamp"),
                                {mul, -std::numeric_limits<double>::infinity(), 1e16});
  Node* total = g.call_function(Target::aten("aten::sum.dim_IntList"), {clamp, list({}), false},
                                {{"dtype", c10::ScalarType::Double}});
  Node* picked =
      g.call_function(Target::aten("aten::index.Tensor"), {clamp, list({None{}, index})});
  Node* ones = g.call_function(Target::aten("aten::ones"), {list({2, 3})},
                               {{"dtype", c10::ScalarType::Float}, {"device", c10::Device("cpu")}});
  Node* chunk = g.call_function(Target::aten("aten::chunk"), {clamp, 2, -1});
  Node* second = g.call_function(Target::getitem(), {chunk, 1});
  Node* mean = g.call_function(Target::aten("aten::mean.dim"), {second, list({1}), true});
  g.output(tuple({total, picked, ones, mean}));
  GraphSignature signature;
  signature.inputs = {{InputKind::kUserInput, "x", "x", {}},
                      {InputKind::kUserInput, "index", "index", {}}};
  signature.outputs = {{"sum_1", NestedKey("sum")},
                       {"index_1", NestedKey("picked")},
                       {"ones", NestedKey("ones")},
                       {"mean", NestedKey("mean")}};
  return ExportedProgram(std::move(g), std::move(signature), {});
}

// The forward's dict checked against the program's module: the joined keys in output order,
// each with its tensor bit for bit.
void check_dict(const std::vector<std::pair<std::string, at::Tensor>>& got,
                const std::vector<at::Tensor>& want, const std::vector<std::string>& keys) {
  std::vector<std::string> got_keys;
  std::vector<at::Tensor> got_values;
  for (const auto& [key, value] : got) {
    got_keys.push_back(key);
    got_values.push_back(value);
  }
  CHECK(got_keys == keys);
  check_equal(got_values, want);
}

// Outputs under a nested key, a plain one and one whose parts need escapes in TorchScript's
// string literals (a quote, a control character), with a parameter and a bias.
ExportedProgram keyed_program() {
  Graph g;
  Node* weight = g.placeholder("p_fc_weight");
  Node* bias = g.placeholder("p_fc_bias");
  Node* x = g.placeholder("x");
  Node* linear = g.call_function(Target::aten("aten::linear"), {x, weight, bias});
  Node* chunk = g.call_function(Target::aten("aten::chunk"), {linear, 2, -1});
  Node* loc = g.call_function(Target::getitem(), {chunk, 0});
  Node* scale = g.call_function(Target::getitem(), {chunk, 1});
  Node* softplus = g.call_function(Target::aten("aten::softplus"), {scale, 1, 20});
  g.output(tuple({linear, loc, softplus}));
  GraphSignature signature;
  signature.inputs = {{InputKind::kParameter, "p_fc_weight", "fc.weight", {}},
                      {InputKind::kParameter, "p_fc_bias", "fc.bias", {}},
                      {InputKind::kUserInput, "x", "x", {}}};
  signature.outputs = {{"linear", NestedKey{"action", "logits"}},
                       {"getitem", NestedKey("loc")},
                       {"softplus", NestedKey{"it's", "a\001b"}}};
  std::map<std::string, at::Tensor> state{{"p_fc_weight", at::randn({4, 3})},
                                          {"p_fc_bias", at::randn({4})}};
  return ExportedProgram(std::move(g), std::move(signature), std::move(state));
}

void write_bytes(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void write_pickle(const fs::path& path, const std::vector<at::Tensor>& tensors) {
  c10::List<at::Tensor> list;
  for (const auto& t : tensors) list.push_back(t);
  write_bytes(path, torch::jit::pickle_save(c10::IValue(list)));
}

// `keys[i]: tensors[i]` as a dict, in order.
void write_pickle(const fs::path& path, const std::vector<std::string>& keys,
                  const std::vector<at::Tensor>& tensors) {
  REQUIRE(keys.size() == tensors.size());
  c10::Dict<std::string, at::Tensor> dict;
  for (size_t i = 0; i < keys.size(); ++i) dict.insert(keys[i], tensors[i]);
  write_bytes(path, torch::jit::pickle_save(c10::IValue(dict)));
}

// Runs tests/export/load_torchscript.py on the files in `dir`; "ok\n" when Python agrees.
std::string load_in_python(const fs::path& dir) {
  const std::string command = "/usr/bin/python3 " + source_dir() +
                              "/tests/export/load_torchscript.py " + (dir / "model.pt").string() +
                              " " + (dir / "inputs.pt").string() + " " +
                              (dir / "expected.pt").string() + " 2>&1";
  return tdfx::testing::run_command(command).out;
}

}  // namespace

TEST_CASE("torchscript: forward equals the program's module bit for bit on seed 000's model") {
  const at::Tensor x = at::randn({1, 3});
  const ExportedProgram program = seed_000_program(x);
  torch::jit::Module module = to_torchscript(program);
  const auto expected = program.module()({x});
  CHECK(expected.size() == 4);
  check_equal(run(module, {x}), expected);
  CHECK(module.type()->name()->qualifiedName() == "__torch__.tdfx.ExportedProgram");
}

TEST_CASE("torchscript: a captured tensor is a buffer of the module") {
  const at::Tensor mask = at::tensor({1.0F, 0.0F, 1.0F});
  auto module =
      tdfx::make_td_module([mask](const at::Tensor& x) { return x * mask; }, {"x"}, {"y"});
  const at::Tensor x = at::randn({2, 3});
  const ExportedProgram program = export_program(module, {{"x", x}});
  torch::jit::Module scripted = to_torchscript(program);
  check_equal(run(scripted, {x}), program.module()({x}));
  const InputSpec& constant = program.graph_signature().inputs.at(0);
  CHECK(constant.kind == InputKind::kConstant);
  CHECK(constant.name == "c_module__tensor_constant0");
  CHECK(scripted.attr(constant.name).toTensor().equal(mask));
}

TEST_CASE("torchscript: the loc-only program returns a one-tuple equal to its module") {
  const at::Tensor x = at::randn({1, 3});
  const ExportedProgram program = loc_only_program(x);
  torch::jit::Module module = to_torchscript(program, "LocOnly");
  const auto expected = program.module()({x});
  CHECK(expected.size() == 1);
  check_equal(run(module, {x}), expected);
  CHECK(module.type()->name()->qualifiedName() == "__torch__.tdfx.LocOnly");
}

TEST_CASE("torchscript: the nested-key model takes its input as some_key") {
  const at::Tensor x = at::randn({2, 3});
  const ExportedProgram program =
      export_program(samples::seed_000_nested_model(), {{"some_key", x}});
  torch::jit::Module module = to_torchscript(program);
  check_equal(run(module, {x}), program.module()({x}));
  CHECK(torchscript_code(program) ==
        "def forward(self, some_key: Tensor) -> Tuple[Tensor]:\n"
        "    assert some_key.dim() == 2 and some_key.size(0) == 2 and some_key.size(1) == 3, "
        "'input some_key has another shape than [2, 3], which the program was exported for "
        "(static shapes)'\n"
        "    add = torch.add(some_key, 1, 1)\n"
        "    sub = torch.sub(add, 1, 1)\n"
        "    return (sub,)\n");
}

TEST_CASE("torchscript: parameters are registered under their placeholder names without grad") {
  const ExportedProgram program = seed_000_program(at::randn({1, 3}));
  const torch::jit::Module module = to_torchscript(program);
  std::vector<std::string> names;
  for (const auto& param : module.named_parameters()) {
    names.push_back(param.name);
    CHECK_FALSE(param.value.requires_grad());
    CHECK(at::equal(param.value, program.state().at(param.name)));
  }
  CHECK(names == std::vector<std::string>{"p_module_0_module_weight", "p_module_0_module_bias",
                                          "p_module_2_module_weight", "p_module_2_module_bias"});
}

TEST_CASE("torchscript: constants of every kind keep the graph's overloads and values") {
  const ExportedProgram program = constants_program();
  const at::Tensor x = at::randn({4, 6});
  const at::Tensor index = at::tensor({5, 0, 2}, at::kLong);
  torch::jit::Module module = to_torchscript(program);
  check_equal(run(module, {x, index}), program.module()({x, index}));
  const std::string code = torchscript_code(program);
  CAPTURE(code);
  CHECK(code ==
        "def forward(self, x: Tensor, index: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:\n"
        "    add = torch.add(x, 0.1, 1)\n"
        "    mul = torch.mul(add, 3)\n"
        "    clamp = torch.clamp(mul, -float('inf'), 1e+16)\n"
        "    _sum_1_list: List[int] = []\n"
        "    sum_1 = torch.sum(clamp, _sum_1_list, False, dtype=7)\n"
        "    _index_1_list: List[Optional[Tensor]] = [None, index]\n"
        "    index_1 = torch.index(clamp, _index_1_list)\n"
        "    ones = torch.ones([2, 3], dtype=6, layout=None, device=torch.device('cpu'), "
        "pin_memory=None)\n"
        "    chunk = torch.chunk(clamp, 2, -1)\n"
        "    getitem = chunk[1]\n"
        "    mean = torch.mean(getitem, [1], True, dtype=None)\n"
        "    return (sum_1, index_1, ones, mean)\n");
}

TEST_CASE("torchscript: memory formats and layouts pass as the ints TorchScript types them as") {
  const at::Tensor x = at::randn({2, 3, 4, 5});
  const ExportedProgram program = tdfx::testing::memory_formats_program(x);
  CHECK(torchscript_code(program) ==
        "def forward(self, x: Tensor) -> Tuple[Tensor]:\n"
        "    assert x.dim() == 4 and x.size(0) == 2 and x.size(1) == 3 and x.size(2) == 4 and "
        "x.size(3) == 5, 'input x has another shape than [2, 3, 4, 5], which the program was "
        "exported for (static shapes)'\n"
        "    clone = torch.clone(x, memory_format=2)\n"
        "    zeros_like = torch.zeros_like(clone, dtype=None, layout=0, device=None, "
        "pin_memory=None, memory_format=0)\n"
        "    add = torch.add(clone, zeros_like, alpha=1)\n"
        "    to = torch.to(add, dtype=7, layout=0, device=None, pin_memory=None, "
        "non_blocking=False, copy=False, memory_format=None)\n"
        "    return (to,)\n");
  torch::jit::Module module = to_torchscript(program);
  const auto got = run(module, {x});
  const auto want = program.module()({x});
  check_equal(got, want);
  REQUIRE(got.size() == 1);
  CHECK(got[0].strides() == want[0].strides());
  CHECK(got[0].is_contiguous(at::MemoryFormat::ChannelsLast));
}

TEST_CASE("torchscript: a saved module loads with torch::jit::load and runs at batch size 5") {
  TempDir dir;
  const at::Tensor x = at::randn({1, 3});
  const ExportedProgram program = seed_000_program(x);
  const std::string path = (dir.path / "model.pt").string();
  save_torchscript(program, path);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    files.push_back(entry.path().filename());
  }
  CHECK(files == std::vector<std::string>{"model.pt"});

  torch::jit::Module loaded = torch::jit::load(path);
  check_equal(run(loaded, {x}), program.module()({x}));
  const at::Tensor batch = at::randn({5, 3});
  const auto outputs = run(loaded, {batch});
  REQUIRE(outputs.size() == 4);
  for (const auto& out : outputs) CHECK(out.size(0) == 5);
  check_equal(outputs, program.module()({batch}));
}

TEST_CASE("torchscript: a static program's module refuses another batch, as the program does") {
  const at::Tensor x = at::randn({2, 3});
  const ExportedProgram program = export_program(samples::seed_000_model(), {{"x", x}});
  REQUIRE(program.batch_specialisation());
  torch::jit::Module module = to_torchscript(program);
  check_equal(run(module, {x}), program.module()({x}));
  CHECK_THROWS_WITH(run(module, {at::randn({5, 3})}),
                    doctest::Contains("input x has another shape than [2, 3], which the program "
                                      "was exported for (static shapes)"));
  CHECK_THROWS_WITH(run(module, {at::randn({2, 4})}),
                    doctest::Contains("input x has another shape than [2, 3]"));
  CHECK_THROWS_AS(program.module()({{"x", at::randn({5, 3})}}), ShapeError);
  // A dynamic one refuses only the other dimensions.
  torch::jit::Module dynamic = to_torchscript(seed_000_program(x));
  CHECK(run(dynamic, {at::randn({5, 3})}).size() == 4);
  CHECK_THROWS_WITH(run(dynamic, {at::randn({5, 4})}),
                    doctest::Contains("input x has another shape than [s0, 3], which the program "
                                      "was exported for (s0: any batch size)"));
}

TEST_CASE("torchscript: Python's torch.jit.load runs the saved module with equal outputs") {
  TempDir dir;
  const at::Tensor x = at::randn({1, 3});
  const ExportedProgram program = seed_000_program(x);
  save_torchscript(program, (dir.path / "model.pt").string());
  write_pickle(dir.path / "inputs.pt", {x});
  write_pickle(dir.path / "expected.pt", program.module()({x}));
  // Python's torch is a required test dependency: without it the script says so and this fails.
  CHECK(load_in_python(dir.path) == "ok\n");
}

TEST_CASE("torchscript: a save into a missing directory throws FileError and leaves no file") {
  TempDir dir;
  const ExportedProgram program = seed_000_program(at::randn({1, 3}));
  const std::string path = (dir.path / "missing" / "model.pt").string();
  CHECK_THROWS_WITH_AS(save_torchscript(program, path),
                       (path + ": cannot write the file: No such file or directory").c_str(),
                       FileError);
  CHECK_FALSE(fs::exists(dir.path / "missing"));
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("torchscript: a call_module node is rejected by name") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* fc = g.call_module("fc", {x});
  // The runner needs the module's body; TorchScript export takes aten calls only.
  auto body = std::make_shared<Graph>();
  body->output(body->call_function(Target::aten("aten::relu"), {body->placeholder("input")}));
  fc->set_body(body);
  g.output(tuple({fc}));
  GraphSignature signature;
  signature.inputs = {{InputKind::kUserInput, "x", "x", {}}};
  signature.outputs = {{"fc", NestedKey("y")}};
  const ExportedProgram program(std::move(g), std::move(signature), {});
  CHECK_THROWS_WITH_AS(to_torchscript(program), doctest::Contains("%fc is a call_module"),
                       tdfx::Error);
}

TEST_CASE("torchscript: the tuple default prints seed 000's forward as before") {
  const ExportedProgram program = seed_000_program(at::randn({1, 3}));
  const std::string code = torchscript_code(program);
  CHECK(code ==
        "def forward(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:\n"
        "    assert x.dim() == 2 and x.size(1) == 3, 'input x has another shape than [s0, 3], "
        "which the program was exported for (s0: any batch size)'\n"
        "    linear = torch.linear(x, self.p_module_0_module_weight, self.p_module_0_module_bias)\n"
        "    relu = torch.relu(linear)\n"
        "    linear_1 = torch.linear(relu, self.p_module_2_module_weight, "
        "self.p_module_2_module_bias)\n"
        "    chunk = torch.chunk(linear_1, 2, -1)\n"
        "    getitem = chunk[0]\n"
        "    getitem_1 = chunk[1]\n"
        "    add = torch.add(getitem_1, 0.5254586935043335, 1)\n"
        "    softplus = torch.softplus(add, 1, 20)\n"
        "    add_1 = torch.add(softplus, 0.01, 1)\n"
        "    clamp_min = torch.clamp_min(add_1, 0.0001)\n"
        "    return (relu, linear_1, getitem, clamp_min)\n");
  CHECK(torchscript_code(program, TorchScriptOptions{}) == code);
}

TEST_CASE("torchscript: a dict of outputs is keyed by the joined keys in output order") {
  const ExportedProgram program = keyed_program();
  CHECK(torchscript_code(program, dict_options()) ==
        "def forward(self, x: Tensor) -> Dict[str, Tensor]:\n"
        "    linear = torch.linear(x, self.p_fc_weight, self.p_fc_bias)\n"
        "    chunk = torch.chunk(linear, 2, -1)\n"
        "    getitem = chunk[0]\n"
        "    getitem_1 = chunk[1]\n"
        "    softplus = torch.softplus(getitem_1, 1, 20)\n"
        "    return {'action.logits': linear, 'loc': getitem, \"it's.a\\001b\": softplus}\n");
  torch::jit::Module module = to_torchscript(program, dict_options());
  const at::Tensor x = at::randn({2, 3});
  check_dict(run_dict(module, {x}), program.module()({x}), {"action.logits", "loc", "it's.a\001b"});
}

TEST_CASE("torchscript: the nested-key model's dict holds some.output") {
  const at::Tensor x = at::randn({2, 3});
  const ExportedProgram program =
      export_program(samples::seed_000_nested_model(), {{"some_key", x}});
  CHECK(torchscript_code(program, dict_options()) ==
        "def forward(self, some_key: Tensor) -> Dict[str, Tensor]:\n"
        "    assert some_key.dim() == 2 and some_key.size(0) == 2 and some_key.size(1) == 3, "
        "'input some_key has another shape than [2, 3], which the program was exported for "
        "(static shapes)'\n"
        "    add = torch.add(some_key, 1, 1)\n"
        "    sub = torch.sub(add, 1, 1)\n"
        "    return {'some.output': sub}\n");
  torch::jit::Module module = to_torchscript(program, dict_options());
  check_dict(run_dict(module, {x}), program.module()({x}), {"some.output"});
}

TEST_CASE("torchscript: a saved dict module loads with torch::jit::load, equal bit for bit") {
  TempDir dir;
  const at::Tensor x = at::randn({1, 3});
  const ExportedProgram program = seed_000_program(x);
  const std::string path = (dir.path / "model.pt").string();
  TorchScriptOptions options = dict_options();
  options.name = "Seed000";
  save_torchscript(program, path, options);

  torch::jit::Module loaded = torch::jit::load(path);
  CHECK(loaded.type()->name()->qualifiedName() == "__torch__.tdfx.Seed000");
  const std::vector<std::string> keys{"hidden", "latent", "loc", "scale"};
  check_dict(run_dict(loaded, {x}), program.module()({x}), keys);
  const at::Tensor batch = at::randn({5, 3});
  check_dict(run_dict(loaded, {batch}), program.module()({batch}), keys);
}

TEST_CASE("torchscript: Python's torch.jit.load returns the dict with the same keys and values") {
  TempDir dir;
  const at::Tensor x = at::randn({1, 3});
  const ExportedProgram program = keyed_program();
  save_torchscript(program, (dir.path / "model.pt").string(), dict_options());
  write_pickle(dir.path / "inputs.pt", {x});
  write_pickle(dir.path / "expected.pt", {"action.logits", "loc", "it's.a\001b"},
               program.module()({x}));
  CHECK(load_in_python(dir.path) == "ok\n");
}

TEST_CASE("torchscript: a dict is refused when two outputs' keys join to the same string") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* relu = g.call_function(Target::aten("aten::relu"), {x});
  Node* neg = g.call_function(Target::aten("aten::neg"), {x});
  g.output(tuple({relu, neg}));
  GraphSignature signature;
  signature.inputs = {{InputKind::kUserInput, "x", "x", {}}};
  signature.outputs = {{"relu", NestedKey{"a", "b"}}, {"neg", NestedKey("a.b")}};
  const ExportedProgram program(std::move(g), std::move(signature), {});
  const std::string message =
      "to_torchscript: outputs ('a', 'b') and 'a.b' both join to the dict key 'a.b'; a dict of "
      "outputs needs keys that stay distinct when joined with '.'";
  CHECK_THROWS_WITH_AS(to_torchscript(program, dict_options()), message.c_str(), tdfx::Error);
  CHECK_THROWS_WITH_AS(torchscript_code(program, dict_options()), message.c_str(), tdfx::Error);
  // The tuple needs no keys.
  CHECK(torchscript_code(program) ==
        "def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:\n"
        "    relu = torch.relu(x)\n"
        "    neg = torch.neg(x)\n"
        "    return (relu, neg)\n");
}

namespace {

// MultiheadAttention reads `at::equal(query, key)` to pick its path: the trace records that
// read as a guard (`_assert_async`).
struct AttendImpl : torch::nn::Module {
  AttendImpl() : mha(register_module("mha", torch::nn::MultiheadAttention(4, 2))) {}
  at::Tensor forward(const at::Tensor& query, const at::Tensor& memory) {
    return std::get<0>(mha->forward(query, memory, memory));
  }
  torch::nn::MultiheadAttention mha;
};
TORCH_MODULE(Attend);

}  // namespace

TEST_CASE("torchscript: a guard the trace recorded (MultiheadAttention's at::equal) is kept") {
  // TorchScript's dead code elimination drops `_assert_async`; the module asserts instead.
  auto module = tdfx::make_td_module(Attend(), {"query", "memory"}, {"y"});
  module->eval();
  const at::Tensor query = at::randn({3, 2, 4});
  const ExportedProgram program =
      export_program(module, {{"query", query}, {"memory", query.clone()}});
  torch::jit::Module scripted = to_torchscript(program);
  CHECK(torchscript_code(program).find("assert bool(") != std::string::npos);
  check_equal(run(scripted, {query, query.clone()}), program.module()({query, query.clone()}));
  const at::Tensor other = at::randn({3, 2, 4});
  CHECK_THROWS_AS(program.module()({query, other}), RunError);
  CHECK_THROWS_WITH(run(scripted, {query, other}),
                    doctest::Contains("a condition the program held when it was traced does "
                                      "not hold"));
}
