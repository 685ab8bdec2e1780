// diff_programs and `tdfx diff`: a small policy and five changes a user makes to it, each
// report compared whole with a golden file from a real run, from C++ and from the command;
// two checkpoints of the actor-critic a few Adam steps apart, checked against torch's sums;
// the drawing's title and the page's rows.
#include <doctest/doctest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "samples/pipelines.h"
#include "tdfx/diagram/program_diagram.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program_diff.h"
#include "tdfx/viz/dot_writer.h"
#include "tdfx/viz/page.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"

using namespace tdfx;
using tdfx::testing::ScratchDir;
namespace nn = torch::nn;

namespace {

/// What differs from the policy as first written.
struct Variant {
  bool extra_layer = false;  // a value head after the action
  int64_t width = 8;         // the hidden layer's width
  bool tanh = false;         // Tanh for ReLU
  std::string in_key = "observation";
  bool fine_tuned = false;  // the action layer's weights scaled by 1.01
};

/// observation -> Linear(4, width) -> ReLU -> Linear(width, 2) -> action, the same weights
/// for the same variant.
std::shared_ptr<TensorDictSequential> policy(const Variant& v) {
  at::manual_seed(0);
  auto encoder = nn::Linear(4, v.width);
  auto head = nn::Linear(v.width, 2);
  if (v.fine_tuned) {
    torch::NoGradGuard no_grad;
    head->weight.mul_(1.01);
  }
  std::vector<TensorDictModuleBasePtr> modules{make_td_module(encoder, {v.in_key}, {"hidden"})};
  if (v.tanh) {
    modules.push_back(make_td_module(nn::Tanh(), {"hidden"}, {"hidden"}));
  } else {
    modules.push_back(make_td_module(nn::ReLU(), {"hidden"}, {"hidden"}));
  }
  modules.push_back(make_td_module(head, {"hidden"}, {"action"}));
  if (v.extra_layer) modules.push_back(make_td_module(nn::Linear(2, 1), {"action"}, {"value"}));
  return make_td_sequential(std::move(modules));
}

ExportedProgram program(const Variant& v) {
  at::manual_seed(1);
  return export_program(policy(v), {{v.in_key, at::randn({2, 4})}});
}

struct Change {
  const char* name;
  Variant variant;
};

std::vector<Change> changes() {
  std::vector<Change> out;
  Variant v;
  v.extra_layer = true;
  out.push_back({"layer_added", v});
  v = {};
  v.width = 16;
  out.push_back({"width_changed", v});
  v = {};
  v.tanh = true;
  out.push_back({"activation_swapped", v});
  v = {};
  v.in_key = "obs";
  out.push_back({"key_renamed", v});
  v = {};
  v.fine_tuned = true;
  out.push_back({"fine_tuned", v});
  return out;
}

/// x + mask, the mask a causal one (-inf above the diagonal) held as a buffer.
struct CausalMaskImpl : nn::Module {
  at::Tensor mask;
  explicit CausalMaskImpl(at::Tensor m) : mask(register_buffer("mask", std::move(m))) {}
  at::Tensor forward(const at::Tensor& x) { return x + mask; }
};
TORCH_MODULE(CausalMask);

ExportedProgram masked_program(const at::Tensor& mask) {
  return export_program(make_td_module(CausalMask(mask), {"scores"}, {"masked"}),
                        {{"scores", at::zeros({2, 4, 4})}});
}

at::Tensor causal_mask() {
  return at::full({4, 4}, -std::numeric_limits<float>::infinity()).triu(1);
}

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

}  // namespace

TEST_CASE("diff: the same pipeline exported twice is equal, and reports nothing") {
  const ProgramDiff diff = diff_programs(program({}), program({}));
  CHECK(diff.equal());
  CHECK(diff.report().empty());
  CHECK(diff.added.empty());
  REQUIRE(diff.matches.size() == program({}).graph().size());
  for (const auto& [b, a] : diff.matches) CHECK(a == b);
}

TEST_CASE("diff: each change of the policy, reported whole") {
  const ExportedProgram base = program({});
  for (const Change& change : changes()) {
    CAPTURE(change.name);
    const ProgramDiff diff = diff_programs(base, program(change.variant));
    CHECK_FALSE(diff.equal());
    tdfx::testing::check_golden("tests/export/golden/diff", std::string(change.name) + ".txt",
                                diff.report());
  }
}

TEST_CASE(
    "diff: a buffer holding infinities or NaNs equals itself; its other changes are counted") {
  CHECK(diff_programs(masked_program(causal_mask()), masked_program(causal_mask())).equal());
  at::Tensor with_nan = causal_mask();
  with_nan[3][0] = std::numeric_limits<float>::quiet_NaN();
  CHECK(diff_programs(masked_program(with_nan), masked_program(with_nan.clone())).equal());

  at::Tensor changed = causal_mask();
  changed[0][1] = 0.0f;                                    // -inf to 0
  changed[0][2] = std::numeric_limits<float>::infinity();  // -inf to +inf
  changed[2][1] = 0.5f;                                    // a finite change
  const ProgramDiff diff = diff_programs(masked_program(causal_mask()), masked_program(changed));
  REQUIRE(diff.weights.size() == 1);
  CHECK(diff.weights[0].non_finite == 2);
  CHECK(diff.weights[0].max_abs == 0.5);
  tdfx::testing::check_golden("tests/export/golden/diff", "mask_changed.txt", diff.report());
}

TEST_CASE("diff: two traced modules compare as their programs do") {
  at::manual_seed(1);
  const TensorDict td({{"observation", at::randn({2, 4})}}, {2});
  Variant tanh;
  tanh.tanh = true;
  const auto a = symbolic_trace(policy({}), td);
  const auto b = symbolic_trace(policy(tanh), td);
  CHECK(diff_programs(a, b).report() == diff_programs(program({}), program(tanh)).report());
  CHECK(diff_programs(a, a).equal());
}

TEST_CASE("diff: the drawing marks what was added and changed and names what was removed") {
  Variant v;
  v.tanh = true;
  v.extra_layer = true;
  const ExportedProgram b = program(v);
  const ProgramDiff diff = diff_programs(program({}), b);
  tdfx::testing::check_golden("tests/export/golden/diff", "drawing.dot",
                              to_dot(b.graph(), diff_render_options(b, diff)));
}

TEST_CASE("diff: the page's title counts the weights, and its panel labels the rows diff") {
  // A layer added, an activation swapped and the action layer fine-tuned: the title, then the
  // panel's rows of every node marked, whole.
  Variant v;
  v.tanh = true;
  v.extra_layer = true;
  v.fine_tuned = true;
  const ExportedProgram b = program(v);
  const ProgramDiff diff = diff_programs(program({}), b);
  REQUIRE(diff.weights.size() == 1);
  const RenderOptions options = diff_render_options(b, diff);
  std::string page = "title: " + options.title + "\n";
  for (const PageItem& item : op_view(b.graph(), options).items) {
    if (item.id.rfind("node:", 0) != 0 || !options.overlay.count(item.id.substr(5))) continue;
    page += item.id + "\n";
    for (const PageField& field : item.fields) {
      std::string refs;
      for (const std::string& ref : field.refs) refs += (refs.empty() ? "" : ", ") + ref;
      page += "  " + field.label + ": " + (field.refs.empty() ? field.text : refs) + "\n";
    }
  }
  tdfx::testing::check_golden("tests/export/golden/diff", "page_rows.txt", page);
}

TEST_CASE("diff: tdfx diff prints the report and exits 0 when equal, 1 when not, 2 on failure") {
  ScratchDir dir("tdfx_diff");
  const auto a = dir / "a.pt2";
  save(program({}), a.string());
  const std::string tdfx = tdfx::testing::bin_dir() + "/tdfx diff ";

  const auto same = tdfx::testing::run_command(tdfx + quoted(a) + " " + quoted(a) + " 2>&1");
  CHECK(same.status == 0);
  CHECK(same.out.empty());

  for (const Change& change : changes()) {
    CAPTURE(change.name);
    const auto b = dir / (std::string(change.name) + ".pt2");
    save(program(change.variant), b.string());
    const auto run = tdfx::testing::run_command(tdfx + quoted(a) + " " + quoted(b) + " 2>&1");
    CHECK(run.status == 1);
    CHECK(run.out == diff_programs(load(a.string()), load(b.string())).report());
    CHECK(run.out == tdfx::testing::read_text(tdfx::testing::source_dir() +
                                              "/tests/export/golden/diff/" + change.name + ".txt"));
  }

  const auto drawn = dir / "diff.dot";
  const auto b = dir / "layer_added.pt2";
  const auto with_drawing = tdfx::testing::run_command(tdfx + quoted(a) + " " + quoted(b) + " -o " +
                                                       quoted(drawn) + " 2>&1");
  CHECK(with_drawing.status == 1);
  CHECK(std::filesystem::exists(drawn));
  // The page of the fine-tuned policy: its panel's row for the weight is labelled diff.
  const auto page = dir / "diff.html";
  const auto with_page = tdfx::testing::run_command(
      tdfx + quoted(a) + " " + quoted(dir / "fine_tuned.pt2") + " -o " + quoted(page) + " 2>&1");
  CHECK(with_page.status == 1);
  const std::string html = tdfx::testing::read_text(page.string());
  CHECK(html.find(R"({"label":"diff","text":"relative change 0.01, cosine 1; max abs diff )"
                  R"(0.00351, max rel diff 0.0099","refs":[]})") != std::string::npos);
  CHECK(html.find(R"("label":"run")") == std::string::npos);

  const auto missing =
      tdfx::testing::run_command(tdfx + quoted(a) + " " + quoted(dir / "missing.pt2") + " 2>&1");
  CHECK(missing.status == 2);
  CHECK(missing.out.find("missing.pt2") != std::string::npos);
  const auto usage = tdfx::testing::run_command(tdfx + quoted(a) + " 2>&1");
  CHECK(usage.status == 2);
  // A report that cannot be written is a failure, not an answer.
  const auto lost =
      tdfx::testing::run_command(tdfx + quoted(a) + " " + quoted(b) + " > /dev/full 2>&1");
  CHECK(lost.status == 2);
}

TEST_CASE("diff: two checkpoints of a trained policy, compared by module as people compare them") {
  at::manual_seed(3);
  auto pipeline = samples::actor_critic();
  pipeline->train(false);
  const TensorDict td = samples::actor_critic_input();
  const std::vector<std::pair<std::string, at::Tensor>> inputs = {
      {"observation", td.get("observation")}, {"agent_mask", td.get({"agent", "mask"})}};
  // The first checkpoint saved and loaded: a program of its own, not the module's tensors.
  const ScratchDir dir("tdfx_diff_checkpoints");
  save(export_program(pipeline, inputs), (dir / "before.pt2").string());
  const ExportedProgram before = load((dir / "before.pt2").string());
  std::map<std::string, at::Tensor> old_weights;
  for (const auto& item : pipeline->named_parameters(true)) {
    old_weights[item.key()] = item.value().detach().clone();
  }
  // A few steps of Adam on the critic's value: the critic moves most, the actor's head not at
  // all, the shared encoder some.
  torch::optim::Adam adam(pipeline->parameters(), torch::optim::AdamOptions(1e-2));
  for (int step = 0; step < 5; ++step) {
    adam.zero_grad();
    TensorDict work(td);
    pipeline->forward(work);
    work.get({"critic", "value"}).pow(2).mean().backward();
    adam.step();
  }
  const ProgramDiff diff = diff_programs(before, export_program(pipeline, inputs));
  tdfx::testing::check_golden("tests/export/golden/diff", "trained_checkpoints.txt", diff.report());
  // The same numbers computed here with torch ops: each module's parameters flattened into one
  // vector, in double.
  struct Expected {
    std::vector<at::Tensor> a, b;
    int64_t changed = 0;
  };
  std::map<std::string, Expected> expected;
  std::vector<std::string> moved;  // the parameters that differ, in the pipeline's order
  for (const auto& item : pipeline->named_parameters(true)) {
    const at::Tensor a = old_weights.at(item.key()).to(at::kDouble).flatten();
    const at::Tensor b = item.value().detach().to(at::kDouble).flatten();
    Expected& e = expected[item.key().substr(0, item.key().rfind('.'))];
    e.a.push_back(a);
    e.b.push_back(b);
    if (!at::equal(a, b)) {
      ++e.changed;
      moved.push_back(item.key());
    }
  }
  std::vector<std::pair<double, std::string>> ranked;
  std::map<std::string, double> cosines;
  for (const auto& [module, e] : expected) {
    if (e.changed == 0) continue;
    const at::Tensor a = at::cat(e.a), b = at::cat(e.b);
    ranked.emplace_back((b - a).norm().item<double>() / a.norm().item<double>(), module);
    cosines[module] = at::cosine_similarity(a, b, 0).item<double>();
  }
  std::sort(ranked.begin(), ranked.end(), std::greater<>());
  // The critic's layer moved most, then the encoder's layers; the actor's head not at all.
  REQUIRE(diff.modules.size() == ranked.size());
  REQUIRE(ranked.size() == 3);
  CHECK(ranked[0].second == "module.2.module");
  for (size_t i = 0; i < ranked.size(); ++i) {
    CAPTURE(i);
    const ModuleChange& m = diff.modules[i];
    CHECK(m.path == ranked[i].second);
    CHECK(m.relative_change == doctest::Approx(ranked[i].first).epsilon(1e-12));
    CHECK(m.cosine == doctest::Approx(cosines.at(m.path)).epsilon(1e-12));
    const Expected& e = expected.at(m.path);
    CHECK(m.weights == static_cast<int64_t>(e.a.size()));
    CHECK(m.changed == e.changed);
    CHECK(m.other_type == 0);
  }
  // Each parameter that moved, and only those, with its own relative change and cosine.
  REQUIRE(diff.weights.size() == moved.size());
  const auto params = pipeline->named_parameters(true);
  for (size_t i = 0; i < moved.size(); ++i) {
    const WeightChange& w = diff.weights[i];
    CAPTURE(w.path);
    CHECK(w.path == moved[i]);
    const at::Tensor a = old_weights.at(w.path).to(at::kDouble).flatten();
    const at::Tensor b = params[w.path].detach().to(at::kDouble).flatten();
    CHECK(w.max_abs == doctest::Approx((b - a).abs().max().item<double>()).epsilon(1e-12));
    const double norm = a.norm().item<double>();
    if (norm == 0) {
      // BatchNorm's bias starts at zero: no relative change or direction to compare with.
      CHECK(w.path == "module.0.module.2.module.bias");
      CHECK(std::isinf(w.relative_change));
      CHECK(std::isnan(w.cosine));
      continue;
    }
    CHECK(w.relative_change ==
          doctest::Approx((b - a).norm().item<double>() / norm).epsilon(1e-12));
    CHECK(w.cosine ==
          doctest::Approx(at::cosine_similarity(a, b, 0).item<double>()).epsilon(1e-12));
  }
}

TEST_CASE("diff: a large weight, read in blocks across threads, moves as torch's sums say") {
  // 700 x 600 elements (25.6 blocks of 16384), a few of them not finite in one program or both.
  at::manual_seed(4);
  const at::Tensor before = at::randn({700, 600});
  at::Tensor after = before + 0.01 * at::randn({700, 600});
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  before[3][5] = inf;   // inf to finite: counted, left out of the sums
  after[650][1] = nan;  // finite to NaN: the same
  before[100][100] = nan;
  after[100][100] = nan;  // NaN in both: equal
  before[699][599] = -inf;
  after[699][599] = -inf;  // equal
  const auto program = [](const at::Tensor& w) {
    auto linear = nn::Linear(nn::LinearOptions(600, 700).bias(false));
    linear->weight.set_data(w);
    return export_program(make_td_module(linear, {"x"}, {"y"}), {{"x", at::randn({2, 600})}});
  };
  const ProgramDiff diff = diff_programs(program(before), program(after));
  REQUIRE(diff.weights.size() == 1);
  const WeightChange& w = diff.weights[0];
  const at::Tensor a = before.to(at::kDouble), b = after.to(at::kDouble);
  const at::Tensor finite = at::isfinite(a).logical_and(at::isfinite(b));
  const at::Tensor fa = at::where(finite, a, at::zeros_like(a));
  const at::Tensor fb = at::where(finite, b, at::zeros_like(b));
  CHECK(w.non_finite == 2);
  CHECK(w.relative_change ==
        doctest::Approx((fb - fa).norm().item<double>() / fa.norm().item<double>()).epsilon(1e-12));
  CHECK(w.cosine ==
        doctest::Approx(at::cosine_similarity(fa.flatten(), fb.flatten(), 0).item<double>())
            .epsilon(1e-12));
  CHECK(w.max_abs == doctest::Approx((fb - fa).abs().max().item<double>()).epsilon(1e-12));
  const at::Tensor scale = at::maximum(fa.abs(), fb.abs());
  CHECK(w.max_rel ==
        doctest::Approx(
            at::where(scale > 0, (fb - fa).abs() / scale, at::zeros_like(a)).max().item<double>())
            .epsilon(1e-12));
  REQUIRE(diff.modules.size() == 1);
  CHECK(diff.modules[0].path == "module");
  CHECK(diff.modules[0].relative_change == w.relative_change);
}
