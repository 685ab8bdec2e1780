// Programs from strangers stay inside their memory and time budgets: each archive below loads,
// and asks for gigabytes, or hours, when it runs; run, it is refused at the node that asks,
// before that node allocates or starts, and the process stays small. The archives are made here, by
// code, through the Graph API and save(): no hand-written bytes.
#include <ATen/core/dispatch/Dispatcher.h>
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "tdfx/core/error.h"
#include "tdfx/core/memory_budget.h"
#include "tdfx/core/time_budget.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tests/support/test_support.h"

using namespace tdfx;

namespace {

constexpr uint64_t kBudget = uint64_t{64} << 20;

/// A program with one user input `x` (f32[2, 2]), the given state, and the node `build`
/// makes from them as its one output; saved and loaded back with a 64 MiB budget.
ExportedProgram attack(
    const std::function<Node*(Graph&, Node* x, std::map<std::string, Node*>&)>& build,
    std::map<std::string, at::Tensor> state = {}) {
  Graph g;
  std::map<std::string, Node*> placeholders;
  GraphSignature signature;
  for (const auto& [name, tensor] : state) {
    placeholders[name] = g.placeholder(name);
    placeholders[name]->meta().tensor = TensorMeta{tensor.scalar_type(), tensor.sizes().vec()};
    signature.inputs.push_back({InputKind::kBuffer, name, "module." + name, {}});
  }
  Node* x = g.placeholder("x");
  x->meta().tensor = TensorMeta{at::kFloat, std::vector<int64_t>{2, 2}};
  signature.inputs.push_back({InputKind::kUserInput, "x", "x", {}});
  Node* out = build(g, x, placeholders);
  g.output(tuple({out}));
  signature.outputs = {{out->name(), NestedKey("y")}};
  const ExportedProgram program(std::move(g), std::move(signature), std::move(state));
  const std::string bytes = archive_bytes(program);
  LoadOptions options;
  options.memory_budget = kBudget;
  return load_bytes(bytes, "attack.pt2", options);
}

/// The message of running `program` on a small `x`, and that the process grew by less than
/// 200 MB doing it.
std::string refusal(const ExportedProgram& program) {
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  std::string message = "(ran)";
  try {
    program.module()({at::ones({2, 2})});
  } catch (const RunError& e) {
    message = e.what();
  }
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  CHECK(after.ru_maxrss - before.ru_maxrss < 200 * 1024);  // kilobytes
  return message;
}

std::string repeated(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += text;
  return out;
}

Node* aten(Graph& g, const char* op, Args args, Kwargs kwargs = {}) {
  return g.call_function(Target::aten(op), std::move(args), std::move(kwargs));
}

}  // namespace

TEST_CASE("budget: programs that ask for gigabytes at run time are refused where they ask") {
  const std::map<std::string, std::function<Node*(Graph&, Node*, std::map<std::string, Node*>&)>>
      attacks = {
          {"arange_float_end",
           [](Graph& g, Node*, auto&) {
             return aten(g, "aten::arange", {9e8}, {{"dtype", c10::ScalarType::Double}});
           }},
          {"eye",
           [](Graph& g, Node*, auto&) {
             return aten(g, "aten::eye.m", {40000, 40000});
           }},
          {"zeros_of_a_size",
           [](Graph& g, Node*, auto& state) {
             Node* n = aten(g, "aten::size.int", {state.at("b_empty"), 0});
             return aten(g, "aten::zeros", {list({n, n})}, {{"dtype", c10::ScalarType::Float}});
           }},
          {"expand_contiguous",
           [](Graph& g, Node* x, auto& state) {
             Node* n = aten(g, "aten::size.int", {state.at("b_empty"), 0});
             Node* one = aten(g, "aten::reshape", {aten(g, "aten::sum", {x}), list({1, 1})});
             Node* wide = aten(g, "aten::expand", {one, list({n, n})});
             return aten(g, "aten::contiguous", {wide});
           }},
          {"upsample",
           [](Graph& g, Node* x, auto&) {
             Node* image = aten(g, "aten::reshape", {x, list({1, 1, 2, 2})});
             return aten(g, "aten::upsample_nearest2d.vec",
                         {image, None{}, list({20000.0, 20000.0})});
           }},
          {"linspace_then_one_more",
           [](Graph& g, Node*, auto&) {
             Node* l = aten(g, "aten::linspace", {0.0, 1.0, static_cast<int64_t>(kBudget / 8)},
                            {{"dtype", c10::ScalarType::Double}});
             return aten(g, "aten::mul.Scalar", {l, 2});
           }},
          {"unbind",
           [](Graph& g, Node*, auto& state) {
             Node* parts = aten(g, "aten::unbind.int", {state.at("b_tall"), 0});
             return g.call_function(Target::getitem(), {parts, 0});
           }},
          {"unsafe_chunk",
           [](Graph& g, Node*, auto& state) {
             Node* parts = aten(g, "aten::unsafe_chunk", {state.at("b_tall"), 30000000});
             return g.call_function(Target::getitem(), {parts, 0});
           }},
          {"split_with_sizes",
           [](Graph& g, Node*, auto& state) {
             Node* parts = aten(
                 g, "aten::split_with_sizes",
                 {state.at("b_tall"), list(std::vector<Argument>(140000, Argument(int64_t{1})))});
             return g.call_function(Target::getitem(), {parts, 0});
           }},
          // A weight of no elements, expanded along its size: a long dimension that takes no
          // memory, sorted in work memory the allocator does not see.
          {"topk_of_an_expanded_view",
           [](Graph& g, Node* x, auto& state) {
             Node* n = aten(g, "aten::size.int", {state.at("b_tall"), 0});
             Node* one = aten(g, "aten::reshape", {aten(g, "aten::sum", {x}), list({1})});
             Node* wide = aten(g, "aten::expand", {one, list({n})});
             return g.call_function(Target::getitem(), {aten(g, "aten::topk", {wide, 1}), 0});
           }},
          {"sort_stable_of_an_expanded_view",
           [](Graph& g, Node* x, auto& state) {
             Node* n = aten(g, "aten::size.int", {state.at("b_tall"), 0});
             Node* one = aten(g, "aten::reshape", {aten(g, "aten::sum", {x}), list({1})});
             Node* wide = aten(g, "aten::expand", {one, list({n})});
             Node* sorted = aten(g, "aten::sort.stable", {wide}, {{"stable", true}});
             return g.call_function(Target::getitem(), {sorted, 0});
           }},
          {"hundred_dimensions",
           [](Graph& g, Node* x, auto&) {
             std::vector<Argument> sizes(98, Argument(int64_t{1}));
             sizes.emplace_back(int64_t{2});
             sizes.emplace_back(int64_t{2});
             return aten(g, "aten::relu", {aten(g, "aten::view", {x, list(sizes)})});
           }},
      };
  const std::map<std::string, at::Tensor> state = {{"b_empty", at::zeros({60000, 0})},
                                                   {"b_tall", at::zeros({30000000, 0})}};
  std::map<std::string, std::string> messages;
  for (const auto& [name, build] : attacks) {
    CAPTURE(name);
    messages[name] = refusal(attack(build, state));
  }
  const std::string budget =
      "the program's memory budget (LoadOptions::memory_budget, tdfx run --memory-budget) is "
      "67.1 MB (67,108,864 bytes)";
  const std::string none_live = ", with 0 bytes live already; " + budget;
  CHECK(messages == std::map<std::string, std::string>{
                        {"arange_float_end",
                         "while executing %arange = torch.arange(end=900000000.0, "
                         "dtype=torch.float64): an allocation of 7.2 GB (7,200,000,000 bytes)" +
                             none_live},
                        {"eye",
                         "while executing %eye = torch.eye(n=40000, m=40000): an allocation of "
                         "6.4 GB (6,400,000,000 bytes)" +
                             none_live},
                        {"expand_contiguous",
                         "while executing %contiguous = torch.contiguous(%expand): an "
                         "allocation of 14.4 GB (14,400,000,000 bytes), with 4 bytes live "
                         "already; " +
                             budget},
                        {"linspace_then_one_more",
                         "while executing %mul = operator.mul(%linspace, 2): an allocation of 8 "
                         "bytes, with 67.1 MB (67,108,864 bytes) live already; " +
                             budget},
                        {"unbind",
                         "while executing %unbind = torch.unbind(%b_tall): aten::unbind makes "
                         "30000000 tensors, whose bookkeeping takes 15.4 GB (15,360,000,000 "
                         "bytes)" +
                             none_live},
                        {"hundred_dimensions",
                         "while executing %relu = torch.relu(%view): aten::relu takes a tensor "
                         "of 100 dimensions; a program run under a budget may use at most 64 "
                         "(LibTorch keeps each tensor's sizes and strides outside its "
                         "allocator, where no budget sees them)"},
                        {"sort_stable_of_an_expanded_view",
                         "while executing %sort = torch.sort(%expand, stable=True): aten::sort "
                         "sorts 30000000 elements at a time in work memory of its own, which "
                         "takes 480 MB (480,000,000 bytes), with 4 bytes live already; " +
                             budget},
                        {"split_with_sizes",
                         // The node names itself by its first 260 characters.
                         "while executing %split_with_sizes = torch.split_with_sizes(%b_tall, "
                         "split_sizes=[" +
                             repeated("1, ", 65) +
                             "… (420065 characters): aten::split_with_sizes makes 140000 "
                             "tensors, whose bookkeeping takes 71.7 MB (71,680,000 bytes)" +
                             none_live},
                        {"topk_of_an_expanded_view",
                         "while executing %topk = torch.topk(%expand, k=1): aten::topk sorts "
                         "30000000 elements at a time in work memory of its own, which takes "
                         "480 MB (480,000,000 bytes), with 4 bytes live already; " +
                             budget},
                        {"unsafe_chunk",
                         "while executing %unsafe_chunk = torch.unsafe_chunk(%b_tall, "
                         "chunks=30000000): aten::unsafe_chunk makes 30000000 tensors, whose "
                         "bookkeeping takes 15.4 GB (15,360,000,000 bytes)" +
                             none_live},
                        {"upsample",
                         "while executing %upsample_nearest2d = "
                         "torch._C._nn.upsample_nearest2d(%reshape, output_size=None, "
                         "scale_factors=[20000.0, 20000.0]): an allocation of 6.4 GB "
                         "(6,400,000,000 bytes)" +
                             none_live},
                        {"zeros_of_a_size",
                         "while executing %zeros = torch.zeros(size=[%size, %size], "
                         "dtype=torch.float32): an allocation of 14.4 GB (14,400,000,000 bytes)" +
                             none_live},
                    });
}

TEST_CASE("budget: what a loaded program allocates comes back zeroed; within it, it runs") {
  const ExportedProgram program = attack([](Graph& g, Node* x, auto&) {
    Node* e = aten(g, "aten::empty.memory_format", {list({256, 1024})},
                   {{"dtype", c10::ScalarType::Float}});
    return aten(g, "aten::add.Tensor", {e, aten(g, "aten::sum", {x})});
  });
  // Memory that held something else first: a freed tensor full of sevens.
  { at::Tensor sevens = at::full({256, 1024}, 7.0f); }
  const at::Tensor out = program.module()({at::ones({2, 2})}).at(0);
  CHECK(at::equal(out, at::full({256, 1024}, 4.0f)));
  // Without a budget (a program exported here) nothing is checked or zeroed.
  CHECK_FALSE(memory_budget_active());
}

TEST_CASE("budget: nested budgets count once; bytes read for a person") {
  CHECK(bytes_text(999) == "999 bytes");
  CHECK(bytes_text(1500) == "1.5 kB (1,500 bytes)");
  CHECK(bytes_text(uint64_t{4} << 30) == "4.29 GB (4,294,967,296 bytes)");
  ScopedMemoryBudget outer(uint64_t{1} << 20, "the outer budget");
  CHECK(memory_budget_active());
  {
    ScopedMemoryBudget inner(uint64_t{1} << 40, "the inner budget");
    CHECK_THROWS_WITH_AS(at::empty({1 << 20}), doctest::Contains("the outer budget is"),
                         BudgetExceeded);
  }
  const at::Tensor small = at::empty({1000});
  CHECK(outer.peak() >= 4000);
}

TEST_CASE("budget: tdfx run refuses inputs it would draw or read past the budget") {
  const testing::ScratchDir dir("tdfx_budget");
  // A program whose input is [50000, 50000]: 10 GB drawn at random.
  Graph g;
  Node* x = g.placeholder("x");
  x->meta().tensor = TensorMeta{at::kFloat, std::vector<int64_t>{50000, 50000}};
  Node* relu = g.call_function(Target::aten("aten::relu"), {x});
  relu->meta().tensor = x->meta().tensor;
  g.output(tuple({relu}));
  GraphSignature signature;
  signature.inputs = {{InputKind::kUserInput, "x", "x", {}}};
  signature.outputs = {{"relu", NestedKey("y")}};
  save(ExportedProgram(std::move(g), std::move(signature), {}), (dir / "wide.pt2").string());
  const std::string tdfx = "cd '" + dir.path().string() + "' && '" + testing::bin_dir() + "/tdfx' ";
  const testing::CommandResult drawn =
      testing::run_command(tdfx + "run wide.pt2 --memory-budget 64 2>&1");
  CHECK(drawn.status == 1);
  CHECK(drawn.out ==
        "tdfx: input 'x' would be drawn as float32 [50000, 50000], which takes 10 GB "
        "(10,000,000,000 bytes), more than the program's memory budget "
        "(LoadOptions::memory_budget, tdfx run --memory-budget) (67.1 MB (67,108,864 bytes)); "
        "give it with --input x=FILE\n");
  // A file whose storage holds 3 floats and whose sizes are (1e8, 3), stride 0: 1.2 GB once
  // laid out. Written by Python's torch.save, which keeps the view.
  const testing::CommandResult saved = testing::run_command(
      "/usr/bin/python3 -c \"import sys, torch; "
      "torch.save(torch.tensor([1.0, 2.0, 3.0]).expand(100000000, 3), sys.argv[1])\" '" +
      (dir / "tall.pt").string() + "' 2>&1");
  REQUIRE_MESSAGE(saved.status == 0, saved.out);
  const testing::CommandResult read =
      testing::run_command(tdfx + "run wide.pt2 --input x=tall.pt --memory-budget 64 2>&1");
  CHECK(read.status == 2);
  CHECK(read.out ==
        "tdfx: tall.pt: tensor (float32 [100000000, 3], a view of a smaller storage) takes "
        "1.2 GB (1,200,000,000 bytes) laid out, more than the memory budget of 67.1 MB "
        "(67,108,864 bytes) (TensorFileOptions::memory_budget)\n");
}

namespace {

/// op_cost of the aten op `qualified` (`aten::mm`, `aten::max_pool1d`) on `args`.
OpCost cost_of(const char* qualified, std::vector<c10::IValue> args) {
  const std::string name = qualified;
  const size_t dot = name.find('.');
  const auto& op = c10::Dispatcher::singleton().findSchemaOrThrow(
      name.substr(0, dot).c_str(), dot == std::string::npos ? "" : name.c_str() + dot + 1);
  return op_cost(op.schema(), args);
}

}  // namespace

TEST_CASE("budget: an op's cost is counted from its arguments, by op family") {
  const at::Tensor one = at::ones({1});
  // A reduction over an expanded view reads every element the view shows; the view is free.
  const at::Tensor wide = one.expand({1 << 20, 1 << 20});
  CHECK(cost_of("aten::expand", {one, std::vector<int64_t>{1 << 20, 1 << 20}, false}).seconds() ==
        0);
  CHECK(cost_of("aten::amax", {wide, std::vector<int64_t>{0, 1}, false}).elements ==
        doctest::Approx(std::ldexp(1.0, 40)));
  CHECK(cost_of("aten::size.int", {wide, int64_t{0}}).seconds() == 0);
  // Matrix products count multiply-adds, broadcast batches included.
  CHECK(cost_of("aten::mm", {at::ones({3, 4}), at::ones({4, 5})}).multiply_adds == 60);
  CHECK(cost_of("aten::matmul", {at::ones({7, 3, 4}), at::ones({4, 5})}).multiply_adds == 420);
  CHECK(cost_of("aten::matmul", {at::ones({3, 4}), at::ones({7, 4, 5})}).multiply_adds == 420);
  CHECK(
      cost_of("aten::linear", {at::ones({2, 3}), at::ones({5, 3}), c10::IValue()}).multiply_adds ==
      30);
  CHECK(cost_of("aten::einsum",
                {"bij,bjk->bik", std::vector<at::Tensor>{at::ones({2, 3, 4}), at::ones({2, 4, 5})},
                 c10::IValue()})
            .multiply_adds == 120);
  // A convolution: each output position meets every weight of its group.
  CHECK(cost_of("aten::conv1d",
                {at::ones({2, 3, 10}), at::ones({4, 3, 3}), c10::IValue(), std::vector<int64_t>{1},
                 std::vector<int64_t>{0}, std::vector<int64_t>{1}, int64_t{1}})
            .multiply_adds == 2 * 8 * 36);
  // Pooling reads each window's elements: a window of 2e6 at stride 1 over 3e6.
  const at::Tensor row = one.expand({1, 1, 3000000});
  CHECK(cost_of("aten::max_pool1d", {row, std::vector<int64_t>{2000000}, std::vector<int64_t>{1},
                                     std::vector<int64_t>{0}, std::vector<int64_t>{1}, false})
            .elements == doctest::Approx(1000001.0 * 2e6 + 3e6));
  // A recurrent layer: every weight meets every step of every sequence.
  CHECK(
      cost_of("aten::rnn_tanh.input", {at::ones({5, 2, 3}), at::zeros({1, 2, 4}),
                                       std::vector<at::Tensor>{at::ones({4, 3}), at::ones({4, 4})},
                                       false, int64_t{1}, 0.0, false, false, false})
          .multiply_adds == 10 * 28);
}

TEST_CASE("budget: an op that could not finish in the time budget is refused before it starts") {
  const std::map<std::string, std::function<Node*(Graph&, Node*, std::map<std::string, Node*>&)>>
      attacks = {
          // 60000³ elements of one number, reduced: 2.2e14 elements read.
          {"amax_of_an_expanded_view",
           [](Graph& g, Node* x, auto& state) {
             Node* n = aten(g, "aten::size.int", {state.at("b_empty"), 0});
             Node* one = aten(g, "aten::reshape", {aten(g, "aten::sum", {x}), list({1, 1, 1})});
             Node* wide = aten(g, "aten::expand", {one, list({n, n, n})});
             return aten(g, "aten::amax", {wide, list({0, 1, 2})});
           }},
          // A window of 2e6 at stride 1 over 3e7 elements.
          {"max_pool1d_of_a_wide_window",
           [](Graph& g, Node* x, auto& state) {
             Node* n = aten(g, "aten::size.int", {state.at("b_tall"), 0});
             Node* one = aten(g, "aten::reshape", {aten(g, "aten::sum", {x}), list({1, 1, 1})});
             Node* row = aten(g, "aten::expand", {one, list({1, 1, n})});
             return aten(g, "aten::max_pool1d", {row, list({2000000}), list({1})});
           }},
          // [60000, 60000] @ [60000, 60000]: 2.2e14 multiply-adds, refused before the 14.4 GB
          // of its result are asked for.
          {"mm_of_expanded_views",
           [](Graph& g, Node* x, auto& state) {
             Node* n = aten(g, "aten::size.int", {state.at("b_empty"), 0});
             Node* one = aten(g, "aten::reshape", {aten(g, "aten::sum", {x}), list({1, 1})});
             Node* square = aten(g, "aten::expand", {one, list({n, n})});
             return aten(g, "aten::mm", {square, square});
           }},
      };
  const std::map<std::string, at::Tensor> state = {{"b_empty", at::zeros({60000, 0})},
                                                   {"b_tall", at::zeros({30000000, 0})}};
  std::map<std::string, std::string> messages;
  for (const auto& [name, build] : attacks) {
    CAPTURE(name);
    ExportedProgram program = attack(build, state);
    CHECK(program.time_budget() == 30);
    messages[name] = refusal(program);
  }
  const std::string rates =
      "even at 1e+10 elements and 2e+11 multiply-adds a second: more than is left of the "
      "program's time budget (LoadOptions::time_budget, tdfx run --time-budget) of 30 s";
  CHECK(messages ==
        std::map<std::string, std::string>{
            {"amax_of_an_expanded_view",
             "while executing %amax = torch.amax(%expand, dim=[0, 1, 2]): aten::amax would take "
             "2.2e+14 elements, at least 2.16e+04 s " +
                 rates},
            {"max_pool1d_of_a_wide_window",
             "while executing %max_pool1d = torch.max_pool1d(%expand, kernel_size=[2000000], "
             "stride=[1]): aten::max_pool1d would take 5.6e+13 elements, at least 5.6e+03 s " +
                 rates},
            {"mm_of_expanded_views",
             "while executing %mm = torch.mm(%expand, %expand): aten::mm would take 2.2e+14 "
             "multiply-adds and 7.2e+09 elements, at least 1.08e+03 s " +
                 rates},
        });
}

TEST_CASE("budget: past the deadline, the next op is refused; nested time budgets count once") {
  const ExportedProgram program =
      attack([](Graph& g, Node* x, auto&) { return aten(g, "aten::relu", {x}); });
  {
    const ScopedTimeBudget spent(1e-9, "a spent budget");
    CHECK(time_budget_active());
    {
      const ScopedTimeBudget inner(1000, "an inner budget");
      CHECK_THROWS_WITH_AS(program.module()({at::ones({2, 2})}),
                           "while executing %relu = torch.relu(%x): aten::relu was not started: "
                           "the run is past a spent budget of 1e-09 s",
                           RunError);
    }
  }
  CHECK_FALSE(time_budget_active());
  // Within its budget, it runs.
  CHECK(at::equal(program.module()({at::ones({2, 2})}).at(0), at::ones({2, 2})));
}
