// export_program on seed 000's models: signature, printed program, outputs.
#include <doctest/doctest.h>
#include <torch/nn/modules/rnn.h>
#include <torch/utils.h>

#include <filesystem>
#include <thread>

#include "samples/pipelines.h"
#include "tdfx/core/error.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tests/support/test_support.h"

using namespace tdfx;

namespace {

std::vector<std::string> op_sequence(const Graph& graph) {
  std::vector<std::string> ops;
  for (const Node* node : graph.nodes()) {
    if (node->op() == OpCode::kCallFunction) ops.push_back(node->target().str());
  }
  return ops;
}

}  // namespace

TEST_CASE("export: seed 000's model lifts parameters, fuses Linear and returns four outputs") {
  auto model = samples::seed_000_model();
  const at::Tensor x = at::randn({1, 3});
  ExportedProgram program = export_program(model, {{"x", x}});
  program.graph().lint();
  CHECK(program.graph_signature().str() ==
        "input parameter p_module_0_module_weight -> module.0.module.weight\n"
        "input parameter p_module_0_module_bias -> module.0.module.bias\n"
        "input parameter p_module_2_module_weight -> module.2.module.weight\n"
        "input parameter p_module_2_module_bias -> module.2.module.bias\n"
        "input user_input x -> x\n"
        "output relu -> 'hidden'\n"
        "output linear_1 -> 'latent'\n"
        "output getitem -> 'loc'\n"
        "output clamp_min -> 'scale'\n");
  CHECK(op_sequence(program.graph()) ==
        std::vector<std::string>{"aten::linear", "aten::relu", "aten::linear", "aten::chunk",
                                 "operator.getitem", "operator.getitem", "aten::add.Tensor",
                                 "aten::softplus", "aten::add.Tensor", "aten::clamp_min"});
  const auto expected = model->call({}, {{"x", x}});
  const auto got = program.module()({{"x", x}});
  REQUIRE(got.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(at::equal(got[i], expected[i]));
  CHECK(at::equal(program.module()({x})[3], expected[3]));
}

TEST_CASE("export: the readable program carries annotations and module comments") {
  ExportedProgram program = export_program(samples::seed_000_model(), {{"x", at::randn({1, 3})}});
  const std::string text = program.print_readable();
  CHECK(text.find("def forward(self, p_module_0_module_weight: \"f32[4, 3]\", "
                  "p_module_0_module_bias: \"f32[4]\", p_module_2_module_weight: \"f32[4, 4]\", "
                  "p_module_2_module_bias: \"f32[4]\", x: \"f32[1, 3]\"):") != std::string::npos);
  CHECK(text.find("# Module: module.0.module (Linear(in_features=3, out_features=4, bias=true))") !=
        std::string::npos);
  CHECK(text.find("add: \"f32[1, 2]\" = torch.ops.aten.add.Tensor(getitem_1, 0.5254586935043335);  "
                  "getitem_1 = None") != std::string::npos);
  CHECK(text.find("return (relu, linear_1, getitem, clamp_min)") != std::string::npos);
}

TEST_CASE("export: selecting loc removes the computation no output needs") {
  auto model = samples::seed_000_model();
  model->select_out_keys("loc");
  const at::Tensor x = at::randn({1, 3});
  ExportedProgram program = export_program(model, {{"x", x}});
  CHECK(op_sequence(program.graph()) == std::vector<std::string>{"aten::linear", "aten::relu",
                                                                 "aten::linear", "aten::chunk",
                                                                 "operator.getitem"});
  CHECK(program.graph_signature().outputs.size() == 1);
  CHECK(program.graph_signature().outputs[0].key == NestedKey("loc"));
  CHECK(at::equal(program.module()({{"x", x}})[0], model->call({}, {{"x", x}})[0]));
}

TEST_CASE("export: a nested input key becomes the keyword some_key") {
  auto model = samples::seed_000_nested_model();
  const at::Tensor x = at::randn({1, 3});
  ExportedProgram program = export_program(model, {{"some_key", x}});
  CHECK(program.code() ==
        "\n\n\ndef forward(self, some_key):\n"
        "    add = torch.ops.aten.add.Tensor(some_key, 1);  some_key = None\n"
        "    sub = torch.ops.aten.sub.Tensor(add, 1);  add = None\n"
        "    return (sub,)\n"
        "    ");
  const auto out = program.module()({{"some_key", x}});
  CHECK(at::allclose(out.at(0), x));
  CHECK(program.graph_signature().outputs[0].key == NestedKey({"some", "output"}));
}

TEST_CASE("export: unknown and missing inputs name the input and the accepted names") {
  auto model = samples::seed_000_model();
  CHECK_THROWS_WITH_AS(export_program(model, {{"y", at::randn({1, 3})}}),
                       doctest::Contains("unknown input 'y'; inputs: x"), KeyError);
  CHECK_THROWS_WITH_AS(export_program(model, {}), doctest::Contains("key 'x' not found"), KeyError);
  ExportedProgram program = export_program(model, {{"x", at::randn({1, 3})}});
  CHECK_THROWS_WITH_AS(program.module()({{"z", at::randn({1, 3})}}),
                       doctest::Contains("no input 'z'"), KeyError);
  CHECK_THROWS_WITH_AS(program.module()(std::vector<at::Tensor>{}),
                       doctest::Contains("takes 1 user input"), ShapeError);
}

TEST_CASE("export: the export_module sample prints seed 000's op sequence and signature") {
  const std::string dir = std::filesystem::temp_directory_path().string() + "/tdfx_export_sample";
  std::filesystem::create_directories(dir);
  const auto result = tdfx::testing::run_command("cd '" + dir + "' && '" +
                                                 tdfx::testing::bin_dir() + "/export_module' 2>&1");
  CHECK(result.status == 0);
  const std::string& out = result.out;
  for (const char* line :
       {"input parameter p_module_0_module_weight -> module.0.module.weight",
        "input user_input x -> x", "output clamp_min -> 'scale'",
        "linear: \"f32[1, 4]\" = torch.ops.aten.linear.default(x, p_module_0_module_weight, "
        "p_module_0_module_bias);  x = p_module_0_module_weight = p_module_0_module_bias = None",
        "chunk = torch.ops.aten.chunk.default(linear_1, 2, -1)",
        "add: \"f32[1, 2]\" = torch.ops.aten.add.Tensor(getitem_1, 0.5254586935043335)",
        "clamp_min: \"f32[1, 2]\" = torch.ops.aten.clamp_min.default(add_1, 0.0001);  add_1 = None",
        "return (relu, linear_1, getitem, clamp_min)", "exported outputs equal the model's: yes",
        "    add = torch.ops.aten.add.Tensor(some_key, 1);  some_key = None",
        "saved model.pt2; loaded outputs equal: yes", "return (getitem,)",
        "loc output equal: yes"}) {
    CAPTURE(line);
    CHECK(out.find(line) != std::string::npos);
  }
  CHECK(std::filesystem::exists(dir + "/model.pt2"));
  CHECK(std::filesystem::exists(dir + "/model.pt"));
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "export: keys that are not Python parameter names print valid code and keep their names") {
  auto model = make_td_sequential(
      {make_td_module([](const at::Tensor& a, const at::Tensor& b,
                         const at::Tensor& c) { return at::div(a + b, c, "floor"); },
                      {"obs-1", "input", "in"}, {"out"})});
  const at::Tensor a = at::randn({1, 3}), b = at::randn({1, 3}), c = at::rand({1, 3}) + 1;
  ExportedProgram program = export_program(model, {{"obs-1", a}, {"input", b}, {"in", c}});
  CHECK(
      program.print_readable() ==
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, obs_1: \"f32[1, 3]\", input: \"f32[1, 3]\", in_: \"f32[1, 3]\"):\n"
      "        input_1 = input\n"
      "        # Module: module.0.module (Callable())\n"
      "        add: \"f32[1, 3]\" = torch.ops.aten.add.Tensor(obs_1, input_1);  obs_1 = input_1 = "
      "None\n"
      "        div: \"f32[1, 3]\" = torch.ops.aten.div.Tensor_mode(add, in_, rounding_mode = "
      "'floor');  add = in_ = None\n"
      "        return (div,)\n"
      "        ");
  CHECK(program.graph_signature().str() ==
        "input user_input obs_1 -> 'obs-1'\n"
        "input user_input input_1 -> input\n"
        "input user_input in_ -> in\n"
        "output div -> 'out'\n");
  const auto out = program.module()({{"obs-1", a}, {"input", b}, {"in", c}});
  CHECK(at::equal(out.at(0), at::div(a + b, c, "floor")));
}

TEST_CASE("export: in keys that join to one input name are refused, naming both") {
  auto module = make_td_module([](const at::Tensor& a, const at::Tensor& b) { return a + b; },
                               {NestedKey{"a", "b"}, "a_b"}, {"y"});
  CHECK_THROWS_WITH_AS(export_program(module, {{"a_b", at::ones({2})}}),
                       (module->describe() +
                        ": in keys ('a', 'b') and 'a_b' are both called 'a_b' as program inputs; "
                        "rename one of them")
                           .c_str(),
                       KeyError);
}

TEST_CASE("export: an input key called self is renamed in the signature, as a Python parameter") {
  auto module = make_td_module([](const at::Tensor& x) { return x * 2; }, {"self"}, {"y"});
  const ExportedProgram program = export_program(module, {{"self", at::ones({2, 3})}}, {true, {}});
  CHECK(program.graph_signature().str() ==
        "input user_input self_ -> self (dim 0 is s0)\n"
        "output mul -> 'y'\n");
  CHECK(program.module()({{"self", at::ones({4, 3})}})[0].equal(at::full({4, 3}, 2.0)));
}

TEST_CASE("export: ops are named in one namespace whether or not a dead op was pruned") {
  // The recorder's names stand when nothing was pruned; a pruned op makes the program name
  // its ops afresh. Either way a key read as `relu_1` takes that name and the ops count on.
  for (const bool with_dead_op : {false, true}) {
    CAPTURE(with_dead_op);
    auto first = make_td_module(
        [with_dead_op](const at::Tensor& x) {
          if (with_dead_op) (void)x.sin();
          return x.relu();
        },
        {"x"}, {"a"});
    auto second = make_td_module([](const at::Tensor& x) { return x.relu(); }, {"relu_1"}, {"b"});
    auto third = make_td_module([](const at::Tensor& x) { return x.relu(); }, {"a"}, {"c"});
    auto pipeline = std::make_shared<TensorDictSequential>(
        std::vector<std::shared_ptr<TensorDictModuleBase>>{first, second, third});
    const ExportedProgram program =
        export_program(pipeline, {{"x", at::randn({2})}, {"relu_1", at::randn({2})}});
    CHECK(program.graph_signature().str() ==
          "input user_input x -> x\n"
          "input user_input relu_1 -> relu_1\n"
          "output relu -> 'a'\n"
          "output relu_2 -> 'b'\n"
          "output relu_3 -> 'c'\n");
  }
}

TEST_CASE("export: a captured tensor is a constant input, saved, loaded and run") {
  const at::Tensor mask = at::tensor({1.0F, 0.0F, 1.0F});
  auto masked =
      make_td_module([mask](const at::Tensor& x) { return (x * mask).relu(); }, {"x"}, {"y"});
  auto pipeline = std::make_shared<TensorDictSequential>(
      std::vector<std::shared_ptr<TensorDictModuleBase>>{masked});
  const at::Tensor x = at::randn({4, 3});
  const at::Tensor expected = (x * mask).relu();
  const testing::ScratchDir dir("tdfx_export_constant");
  // From the pipeline, and from its trace (paths from the pipeline either way).
  for (const bool from_trace : {false, true}) {
    CAPTURE(from_trace);
    const ExportedProgram program =
        from_trace ? export_program(symbolic_trace(pipeline, TensorDict({{"x", x}}, {4})))
                   : export_program(pipeline, {{"x", x}});
    CHECK(program.graph_signature().str() ==
          "input constant c_module_0_module__tensor_constant0 -> "
          "module.0.module._tensor_constant0\n"
          "input user_input x -> x\n"
          "output relu -> 'y'\n");
    CHECK(program.module()({x})[0].equal(expected));
    const std::string path = (dir / "constant.pt2").string();
    save(program, path);
    const ExportedProgram loaded = load(path);
    CHECK(loaded.graph_signature().str() == program.graph_signature().str());
    CHECK(loaded.module()({x})[0].equal(expected));
  }
}

TEST_CASE("export: a non-contiguous input is copied contiguous first, or refused if written") {
  // contiguous() of a contiguous example records nothing, and the archive does not say what
  // the trace saw: every input is taken as contiguous when traced (README, the recorder).
  const at::Tensor x = at::randn({4, 3, 2});
  const at::Tensor strided = at::randn({4, 2, 3}).transpose(1, 2);
  auto flatten = make_td_module(
      [](const at::Tensor& t) {
        return t.contiguous().view({t.size(0), -1}) + 1;
      },
      {"x"}, {"y"});
  const ExportedProgram flat = export_program(flatten, {{"x", x}});
  const at::Tensor expected = strided.contiguous().view({4, -1}) + 1;
  CHECK(flat.module()({strided})[0].equal(expected));
  const testing::ScratchDir dir("tdfx_export_contiguous");
  save(flat, (dir / "flat.pt2").string());
  CHECK(load((dir / "flat.pt2").string()).module()({strided})[0].equal(expected));
  // A stride-0 view laid out past a loaded program's budget: a RunError naming the input.
  auto twice = make_td_module([](const at::Tensor& t) { return t.contiguous() * 2; }, {"x"}, {"y"});
  save(export_program(twice, {{"x", x}}, {true, {}}), (dir / "twice.pt2").string());
  LoadOptions small;
  small.memory_budget = uint64_t{1} << 20;
  const ExportedProgram budgeted = load((dir / "twice.pt2").string(), small);
  CHECK_THROWS_WITH_AS(budgeted.module()({at::randn({1, 3, 2}).expand({100000, 3, 2})}),
                       doctest::Contains("input x, copied contiguous as it was when traced: an "
                                         "allocation of"),
                       RunError);
  auto bump = make_td_module(
      [](const at::Tensor& t) {
        at::Tensor y = t.contiguous();
        y.add_(1);
        return y * 2;
      },
      {"x"}, {"y"});
  const ExportedProgram written = export_program(bump, {{"x", x.clone()}});
  CHECK_THROWS_WITH_AS(written.module()({strided}),
                       "input x is not contiguous; an exported program takes its inputs "
                       "contiguous (it does not record how its example was laid out) and writes "
                       "into this one, so it cannot be copied contiguous first: make it "
                       "contiguous before the call",
                       ShapeError);
}

TEST_CASE("export: threads export, save, load and run programs at once") {
  // Each thread exports its own model, writes and reads its archive, and runs the loaded
  // program under its memory budget (a per-thread allocator check): results as eager's.
  const testing::ScratchDir dir("tdfx_export_threads");
  constexpr int kThreads = 4;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto model = samples::seed_000_model();
        const at::Tensor x = at::randn({2, 3});
        const std::string path = (dir / ("m" + std::to_string(t) + ".pt2")).string();
        save(export_program(model, {{"x", x}}), path);
        const ExportedProgram loaded = load(path);
        const auto got = loaded.module()({{"x", x}});
        const auto expected = model->call({}, {{"x", x}});
        for (size_t i = 0; i < expected.size(); ++i) {
          if (!at::equal(got[i], expected[i])) failures[t] = "output " + std::to_string(i);
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures == std::vector<std::string>(kThreads));
}

TEST_CASE("export: updates of the program's own values become functional ops, as in torch.export") {
  using Fn = std::function<at::Tensor(at::Tensor)>;
  auto exported = [](Fn fn, const at::Tensor& x) {
    auto module = make_td_module(std::move(fn), {"x"}, {"y"});
    return export_program(module, {{"x", x}});
  };
  const at::Tensor x = at::randn({4, 3});

  SUBCASE("1 - x: empty_like + fill_ + sub_ in C++, full_like + sub here") {
    const Fn one_minus = [](at::Tensor v) { return 1 - v; };
    const auto program = exported(one_minus, x);
    CHECK(op_sequence(program.graph()) ==
          std::vector<std::string>{"aten::full_like", "aten::sub.Tensor"});
    CHECK(at::equal(program.module()({x})[0], one_minus(x)));
  }
  SUBCASE("an in-place activation on a fresh value, read after it") {
    const Fn fn = [](at::Tensor v) {
      at::Tensor h = v * 2;
      h.relu_();
      return h + 1;
    };
    const auto program = exported(fn, x);
    CHECK(op_sequence(program.graph()) ==
          std::vector<std::string>{"aten::mul.Tensor", "aten::relu", "aten::add.Tensor"});
    CHECK(at::equal(program.module()({x})[0], fn(x)));
  }
  SUBCASE("a masked fill on a fresh value: the bool mask does not widen it") {
    const Fn fn = [](at::Tensor v) {
      at::Tensor h = v * 2;
      h.masked_fill_(v > 0, 0.5);
      return h;
    };
    const auto program = exported(fn, x);
    CHECK(op_sequence(program.graph()) == std::vector<std::string>{"aten::mul.Tensor",
                                                                   "aten::gt.Scalar",
                                                                   "aten::masked_fill.Scalar"});
    CHECK(at::equal(program.module()({x})[0], fn(x)));
  }
  SUBCASE("a value read before the update keeps its old value") {
    const Fn fn = [](at::Tensor v) {
      at::Tensor h = v * 2;
      at::Tensor before = h.exp();
      h.add_(1);
      return before + h;
    };
    const auto program = exported(fn, x);
    CHECK(op_sequence(program.graph()) == std::vector<std::string>{"aten::mul.Tensor", "aten::exp",
                                                                   "aten::add.Tensor",
                                                                   "aten::add.Tensor"});
    CHECK(at::equal(program.module()({x})[0], fn(x)));
  }
  SUBCASE("an update seen through a view taken before it stays in place") {
    const Fn fn = [](at::Tensor v) {
      at::Tensor h = v * 2;
      at::Tensor flat = h.view({-1});
      h.add_(1);
      return flat.reshape({4, 3});
    };
    const auto program = exported(fn, x);
    const auto ops = op_sequence(program.graph());
    const bool in_place = std::find(ops.begin(), ops.end(), "aten::add_.Scalar") != ops.end();
    CHECK(in_place);
    CHECK(at::equal(program.module()({x})[0], fn(x)));
  }
  SUBCASE("an update that casts back to its tensor's dtype stays in place") {
    const at::Tensor other = at::randn({4, 3}, at::kDouble);
    auto module = make_td_module(
        [](at::Tensor v, at::Tensor w) {
          at::Tensor h = v * 2;
          h.add_(w);
          return h;
        },
        {"x", "w"}, {"y"});
    const auto program = export_program(module, {{"x", x}, {"w", other}});
    const auto ops = op_sequence(program.graph());
    const bool in_place = std::find(ops.begin(), ops.end(), "aten::add_.Tensor") != ops.end();
    CHECK(in_place);
    CHECK((program.module()({x, other})[0].scalar_type() == at::kFloat));
  }
  SUBCASE("set_ makes a fresh tensor share another's memory: it stays, and so do later updates") {
    const Fn fn = [](at::Tensor v) {
      at::Tensor h = v * 2;
      at::Tensor g = v * 3;
      h.set_(g);
      h.add_(1);  // an update of g too
      return g;
    };
    const auto program = exported(fn, x);
    CHECK(at::equal(program.module()({x})[0], fn(x)));
  }
  SUBCASE("an update of an input stays in place") {
    auto module = make_td_module([](at::Tensor v) { return v.mul_(2); }, {"x"}, {"x"});
    const auto program = export_program(module, {{"x", x.clone()}});
    CHECK(op_sequence(program.graph()) == std::vector<std::string>{"aten::mul_.Scalar"});
  }
}

TEST_CASE("export: a traced pipeline's inputs that would share a name are refused, naming both") {
  // As exporting the pipeline refuses them: two keys joined to one name, and a key named as a
  // lifted weight is. Each would print as code Python cannot run, and save would refuse it
  // later.
  {
    auto module = make_td_sequential(
        {make_td_module([](const at::Tensor& a, const at::Tensor& b) { return a + 2 * b; },
                        {"a_b", NestedKey{"a", "b"}}, {"out"})});
    TensorDict td({{"a_b", at::ones({2, 2})}, {NestedKey{"a", "b"}, at::zeros({2, 2})}}, {2});
    CHECK_THROWS_WITH_AS(export_program(symbolic_trace(module, td)),
                         "export_program: in key 'a_b' and in key ('a', 'b') are both called "
                         "'a_b' as program inputs; rename one of them",
                         KeyError);
  }
  {
    auto module = make_td_sequential(
        {make_td_module(torch::nn::Linear(2, 2), {"p_module_0_module_weight"}, {"y"})});
    CHECK_THROWS_WITH_AS(
        export_program(module, {{"p_module_0_module_weight", at::ones({1, 2})}}),
        "export_program: the lifted input for module.0.module.weight and in key "
        "'p_module_0_module_weight' are both called 'p_module_0_module_weight' as program "
        "inputs; rename one of them",
        KeyError);
  }
}

TEST_CASE("export: the ops of a GRUCell inside a user module all belong to the cell") {
  // gru_cell is recorded as the ops it calls; the program names each by the cell, the gates
  // too, and what the user module computes around it by the user module.
  struct CoreImpl : torch::nn::Module {
    CoreImpl() : cell(register_module("cell", torch::nn::GRUCell(3, 2))) {}
    at::Tensor forward(const at::Tensor& x, const at::Tensor& h) { return cell(x, h).relu(); }
    torch::nn::GRUCell cell{nullptr};
  };
  auto module = make_td_module(std::make_shared<CoreImpl>(), {"x", "h"}, {"next_h"});
  torch::manual_seed(0);
  const ExportedProgram program =
      export_program(module, {{"x", at::randn({2, 3})}, {"h", at::randn({2, 2})}});
  std::string modules;
  for (const Node* node : program.graph().nodes()) {
    if (node->op() != OpCode::kCallFunction) continue;
    modules += node->name() + ": " + node->meta().module_path + "\n";
  }
  CHECK(modules ==
        "linear: module.cell\n"
        "unsafe_chunk: module.cell\n"
        "getitem: module.cell\n"
        "getitem_1: module.cell\n"
        "getitem_2: module.cell\n"
        "linear_1: module.cell\n"
        "unsafe_chunk_1: module.cell\n"
        "getitem_3: module.cell\n"
        "getitem_4: module.cell\n"
        "getitem_5: module.cell\n"
        "add_: module.cell\n"
        "sigmoid_: module.cell\n"
        "add__1: module.cell\n"
        "sigmoid__1: module.cell\n"
        "mul_: module.cell\n"
        "add: module.cell\n"
        "tanh: module.cell\n"
        "sub: module.cell\n"
        "mul: module.cell\n"
        "add_1: module.cell\n"
        "relu: module\n");
}

namespace {
struct TwiceImpl : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) { return x * 2; }
};
}  // namespace

TEST_CASE("export: a key named self is forward's parameter self_, and the archive loads") {
  // `self` is forward's own first parameter: the key's placeholder takes `self_`, as a
  // keyword's takes a trailing `_`, and the program saves, loads and runs.
  auto module = make_td_module(std::make_shared<TwiceImpl>(), {"self"}, {"y"});
  const ExportedProgram program = export_program(module, {{"self", at::ones({2})}});
  CHECK(program.print_readable() ==
        "class GraphModule(torch.nn.Module):\n"
        "    def forward(self, self_: \"f32[2]\"):\n"
        "        # Module: module ((anonymous namespace)::TwiceImpl)\n"
        "        mul: \"f32[2]\" = torch.ops.aten.mul.Tensor(self_, 2);  self_ = None\n"
        "        return (mul,)\n"
        "        ");
  const testing::ScratchDir dir("tdfx_self_key");
  save(program, (dir / "self.pt2").string());
  const ExportedProgram loaded = load((dir / "self.pt2").string());
  CHECK(loaded.graph_signature().inputs.at(0).target == "self");
  const auto out = loaded.module()({at::full({2}, 3.0)});
  CHECK(at::equal(out.at(0), at::full({2}, 6.0)));
}

TEST_CASE("export: an input that is a strided view of an input written in place is refused") {
  // "b" is a narrow() of "a", which the program doubles in place; it takes b contiguous, and a
  // copy would not see the write: refused by name (tracer/batch_check.h).
  const auto seq = samples::doubles_a_then_sums_b();
  const at::Tensor x = at::arange(20, at::kFloat).view({5, 4});
  const ExportedProgram program = export_program(seq, {{"a", x.clone()}, {"b", x.narrow(1, 0, 2)}});
  CHECK_THROWS_WITH_AS(program.module()({{"a", x}, {"b", x.narrow(1, 0, 2)}}),
                       "input b is not contiguous and shares memory with input a, which the "
                       "program writes into: copied contiguous, as the program takes it, it "
                       "would not see that write; pass it contiguous, or as a copy of its own "
                       "(clone())",
                       ShapeError);
}
