// TorchScript export: the module's forward against ExportedProgram.module(),
// bit for bit; saving, loading back in C++ and in Python's torch.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
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

std::string source_dir() {
  const char* dir = std::getenv("TDFX_SOURCE_DIR");
  return dir ? dir : TDFX_SOURCE_DIR_DEFAULT;
}

// A fresh directory under the system's temporary folder, removed at scope exit.
struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tdfx-torchscript-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

std::vector<at::Tensor> run(torch::jit::Module& module, const std::vector<at::Tensor>& inputs) {
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  const c10::IValue result = module.forward(args);
  REQUIRE(result.isTuple());
  std::vector<at::Tensor> out;
  for (const auto& element : result.toTupleRef().elements()) out.push_back(element.toTensor());
  return out;
}

void check_equal(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].dtype() == want[i].dtype());
    CHECK(at::equal(got[i], want[i]));
  }
}

ExportedProgram seed_000_program(const at::Tensor& x) {
  return export_program(samples::seed_000_model(), {{"x", x}});
}

ExportedProgram loc_only_program(const at::Tensor& x) {
  auto model = samples::seed_000_model();
  model->select_out_keys(NestedKey("loc"));
  return export_program(model, {{"x", x}});
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
  signature.inputs = {{InputKind::kUserInput, "x", "x"}, {InputKind::kUserInput, "index", "index"}};
  signature.outputs = {{"sum_1", NestedKey("sum")},
                       {"index_1", NestedKey("picked")},
                       {"ones", NestedKey("ones")},
                       {"mean", NestedKey("mean")}};
  return ExportedProgram(std::move(g), std::move(signature), {});
}

void write_pickle(const fs::path& path, const std::vector<at::Tensor>& tensors) {
  c10::List<at::Tensor> list;
  for (const auto& t : tensors) list.push_back(t);
  const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(list));
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
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

TEST_CASE("torchscript: the loc-only program returns a one-tuple equal to its module") {
  const at::Tensor x = at::randn({1, 3});
  const ExportedProgram program = loc_only_program(x);
  torch::jit::Module module = to_torchscript(program, "LocOnly");
  const auto expected = program.module()({x});
  CHECK(expected.size() == 1);
  check_equal(run(module, {x}), expected);
}

TEST_CASE("torchscript: the nested-key model takes its input as some_key") {
  const at::Tensor x = at::randn({2, 3});
  const ExportedProgram program =
      export_program(samples::seed_000_nested_model(), {{"some_key", x}});
  torch::jit::Module module = to_torchscript(program);
  check_equal(run(module, {x}), program.module()({x}));
  CHECK(torchscript_code(program) ==
        "def forward(self, some_key: Tensor) -> Tuple[Tensor]:\n"
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
  CHECK(code.find("add = torch.add(x, 0.1, 1)") != std::string::npos);
  CHECK(code.find("mul = torch.mul(add, 3)") != std::string::npos);
  CHECK(code.find("torch.clamp(mul, -float('inf'), 1e+16)") != std::string::npos);
  CHECK(code.find("_sum_1_list: List[int] = []") != std::string::npos);
  CHECK(code.find("_index_1_list: List[Optional[Tensor]] = [None, index]") != std::string::npos);
  CHECK(code.find("device=torch.device('cpu')") != std::string::npos);
}

TEST_CASE("torchscript: memory formats and layouts pass as the ints TorchScript types them as") {
  const at::Tensor x = at::randn({2, 3, 4, 5});
  const ExportedProgram program = tdfx::testing::memory_formats_program(x);
  CHECK(torchscript_code(program) ==
        "def forward(self, x: Tensor) -> Tuple[Tensor]:\n"
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

TEST_CASE("torchscript: Python's torch.jit.load runs the saved module with equal outputs") {
  TempDir dir;
  const at::Tensor x = at::randn({1, 3});
  const ExportedProgram program = seed_000_program(x);
  save_torchscript(program, (dir.path / "model.pt").string());
  write_pickle(dir.path / "inputs.pt", {x});
  write_pickle(dir.path / "expected.pt", program.module()({x}));
  const std::string command =
      "/usr/bin/python3 " + source_dir() + "/tests/export/load_torchscript.py " +
      (dir.path / "model.pt").string() + " " + (dir.path / "inputs.pt").string() + " " +
      (dir.path / "expected.pt").string() + " 2>&1";
  const std::string out = tdfx::testing::run_command(command).out;
  if (out.rfind("skip:", 0) == 0) {
    MESSAGE("Python's torch is not installed: " << out);
    return;
  }
  CHECK(out == "ok\n");
}

TEST_CASE("torchscript: a save into a missing directory throws ArchiveError and leaves no file") {
  TempDir dir;
  const ExportedProgram program = seed_000_program(at::randn({1, 3}));
  const std::string path = (dir.path / "missing" / "model.pt").string();
  CHECK_THROWS_WITH_AS(save_torchscript(program, path), doctest::Contains(path.c_str()),
                       ArchiveError);
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
  signature.inputs = {{InputKind::kUserInput, "x", "x"}};
  signature.outputs = {{"fc", NestedKey("y")}};
  const ExportedProgram program(std::move(g), std::move(signature), {});
  CHECK_THROWS_WITH_AS(to_torchscript(program), doctest::Contains("%fc is a call_module"),
                       tdfx::Error);
}
