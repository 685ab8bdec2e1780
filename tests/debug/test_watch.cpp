// Watch over a training run: the records of a pipeline whose statistics are known exactly,
// the first bad step (a NaN loss, a NaN gradient under a finite loss, a spike), and its
// TensorBoard log read back apart from tdfx.

#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <doctest/doctest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include "tdfx/core/error.h"
#include "tdfx/debug/watch.h"
#include "tdfx/diagram/overlay.h"
#include "tdfx/export/archive.h"
#include "tdfx/export/program.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/module_tree.h"
#include "tests/support/test_support.h"

using namespace tdfx;

namespace {

std::string format_records(const std::vector<WatchRecord>& records) {
  std::string out;
  for (const WatchRecord& r : records) out += fmt::format("{} {} {:.6g}\n", r.step, r.tag, r.value);
  return out;
}

// y = x W^T + b with W = [[1, 2]] and b = [0.5], as a TensorDictModule reading x, writing y.
std::shared_ptr<TensorDictModule> known_linear() {
  torch::nn::Linear fc(2, 1);
  {
    torch::NoGradGuard no_grad;
    fc->weight.copy_(at::tensor({1.0f, 2.0f}).reshape({1, 2}));
    fc->bias.fill_(0.5f);
  }
  return make_td_module(fc, {"x"}, {"y"});
}

TensorDict known_input() {
  return TensorDict({{"x", at::tensor({1.0f, 1.0f, 2.0f, 0.0f}).reshape({2, 2})}}, {2});
}

// Three steps of SGD at 0.1 on known_input, the loss the sum of y, each observed by a watch
// made with `options`; no step may be bad. The watch is returned for its records.
std::unique_ptr<Watch> watch_three_known_steps(const WatchOptions& options) {
  auto module = known_linear();
  torch::optim::SGD optimizer(module->parameters(), torch::optim::SGDOptions(0.1));
  auto watch = std::make_unique<Watch>(module, options);
  for (int64_t step = 0; step < 3; ++step) {
    TensorDict td = known_input();
    module->forward(td);
    const at::Tensor loss = td.get("y").sum();
    optimizer.zero_grad();
    loss.backward();
    CHECK_FALSE(watch->observe(step, td, loss).bad);
    optimizer.step();
  }
  return watch;
}

}  // namespace

TEST_CASE("watch: the records of a pipeline whose statistics are known exactly") {
  // x = [[1, 1], [2, 0]]; the loss is the sum of y. Every step the gradients are dW = [3, 1]
  // (the column sums of x) and db = 2; SGD at 0.1 moves W by 0.1 [3, 1] and b by 0.2.
  // Step 0: y = [3.5, 2.5]; |W| = sqrt(5); its update ratio 0.1 sqrt(10) / sqrt(5) = 0.141421,
  // b's 0.2 / 0.5. Step 2 (after two updates): W = [0.4, 1.8], b = 0.1, y = [2.3, 0.9].
  WatchOptions options;
  options.interval = 2;
  const std::unique_ptr<Watch> watch = watch_three_known_steps(options);
  CHECK(format_records(watch->records()) ==
        "0 loss 6\n"
        "0 activation_nonfinite/module/y 0\n"
        "0 activation_mean/module/y 3\n"
        "0 activation_std/module/y 0.707107\n"
        "0 activation_min/module/y 2.5\n"
        "0 activation_max/module/y 3.5\n"
        "0 grad_norm/module.weight 3.16228\n"
        "0 weight_norm/module.weight 2.23607\n"
        "0 grad_norm/module.bias 2\n"
        "0 weight_norm/module.bias 0.5\n"
        "0 update_ratio/module.weight 0.141421\n"
        "0 update_ratio/module.bias 0.4\n"
        "2 loss 3.2\n"
        "2 activation_nonfinite/module/y 0\n"
        "2 activation_mean/module/y 1.6\n"
        "2 activation_std/module/y 0.989949\n"
        "2 activation_min/module/y 0.9\n"
        "2 activation_max/module/y 2.3\n"
        "2 grad_norm/module.weight 3.16228\n"
        "2 weight_norm/module.weight 1.84391\n"
        "2 grad_norm/module.bias 2\n"
        "2 weight_norm/module.bias 0.1\n");
  CHECK_FALSE(watch->first_bad_step());
}

TEST_CASE("watch: the first bad step: a NaN loss, a NaN gradient under a finite loss, a spike") {
  SUBCASE("a NaN in the inputs makes the loss NaN") {
    auto module = known_linear();
    Watch watch(module);
    for (int64_t step = 0; step < 5; ++step) {
      TensorDict td = known_input();
      if (step == 3) td.set("x", at::tensor({1.0f, NAN, 2.0f, 0.0f}).reshape({2, 2}));
      module->forward(td);
      const at::Tensor loss = td.get("y").sum();
      module->zero_grad();
      loss.backward();
      const WatchCheck check = watch.observe(step, td, loss);
      CHECK(check.bad == (step == 3));
      if (step == 3) CHECK(check.why == "the loss is NaN");
    }
    REQUIRE(watch.first_bad_step());
    CHECK(*watch.first_bad_step() == 3);
    // The bad step is recorded whole though it is not a sampled one: its output's NaN counted.
    const std::string records = format_records(watch.records());
    CHECK(records.find("3 activation_nonfinite/module/y 1\n") != std::string::npos);
    CHECK(records.find("3 first_bad_step 3\n") != std::string::npos);
  }
  SUBCASE("sqrt at 0: a finite loss, an infinite slope, a NaN gradient") {
    torch::nn::Linear fc(torch::nn::LinearOptions(1, 1).bias(false));
    {
      torch::NoGradGuard no_grad;
      fc->weight.fill_(1.0f);
    }
    auto module = make_td_sequential(
        {make_td_module(fc, {"x"}, {"z"}),
         make_td_module([](const at::Tensor& z) { return at::sqrt(z); }, {"z"}, {"y"})});
    Watch watch(module);
    TensorDict td({{"x", at::zeros({2, 1})}}, {2});
    module->forward(td);
    const at::Tensor loss = td.get("y").sum();
    loss.backward();
    const WatchCheck check = watch.observe(7, td, loss);
    CHECK(check.bad);
    CHECK(check.why == "the gradient of module.0.module.weight holds NaN or Inf");
    CHECK(*watch.first_bad_step() == 7);
  }
  SUBCASE("a loss five standard deviations off its last five") {
    auto module = known_linear();
    WatchOptions options;
    options.spike_sigmas = 5;
    options.spike_window = 5;
    Watch watch(module, options);
    TensorDict td = known_input();
    // The losses below are given; the gradients are one backward's, left in place.
    module->forward(td);
    td.get("y").sum().backward();
    int64_t step = 0;
    for (const float loss : {1.0f, 1.1f, 0.9f, 1.0f, 1.0f, 1.2f, 1.05f}) {
      CHECK_FALSE(watch.observe(step++, td, at::tensor(loss)).bad);
    }
    const WatchCheck check = watch.observe(step, td, at::tensor(10.0f));
    CHECK(check.bad);
    CHECK(check.why ==
          "the loss 10 is 81.9 standard deviations from the mean 1.03 of the last 5 losses");
  }
}

TEST_CASE("watch: what it records goes to TensorBoard; bad arguments are named") {
  tdfx::testing::ScratchDir dir("tdfx_watch");
  auto module = known_linear();
  WatchOptions options;
  options.interval = 1;
  options.histogram_interval = 2;
  options.logdir = (dir / "run").string();
  {
    Watch watch(module, options);
    for (int64_t step = 0; step < 3; ++step) {
      TensorDict td = known_input();
      module->forward(td);
      const at::Tensor loss = td.get("y").sum();
      module->zero_grad();
      loss.backward();
      watch.observe(step, td, loss);
    }
    const auto read =
        tdfx::testing::run_command("/usr/bin/python3 " + tdfx::testing::source_dir() +
                                   "/tests/debug/read_events.py '" + watch.log_path() + "' 2>&1");
    REQUIRE(read.status == 0);
    // One record of the scalars of each step, one of the update ratios (at the step whose
    // update they measure), one of the histograms at steps 0 and 2 (y, and the gradient and
    // weight of both parameters), after the file version: every record in the log.
    size_t events = 0, scalars = 0, histograms = 0;
    std::istringstream lines(read.out);
    for (std::string line; std::getline(lines, line); ++events) {
      for (size_t at = 0; (at = line.find(" = ", at)) != std::string::npos; ++at) ++scalars;
      for (size_t at = 0; (at = line.find("histogram num", at)) != std::string::npos; ++at) {
        ++histograms;
      }
    }
    CHECK(events == 1 + 3 + 2 + 2);
    CHECK(scalars == watch.records().size());
    CHECK(histograms == 2 * 5);
    CHECK(read.out.find("step 0: loss = 6.0; activation_nonfinite/module/y = 0.0; ") !=
          std::string::npos);  // a scalar of 0 is written, not left out as a default
    CHECK(read.out.find("step 1: update_ratio/module.weight = 0.0; update_ratio/module.bias = "
                        "0.0\n") != std::string::npos);
    CHECK(read.out.find("step 2: activations/module/y: histogram num 2") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(Watch(nullptr), "Watch: the module is null", Error);
  options.interval = 0;
  CHECK_THROWS_WITH_AS(Watch(module, options),
                       "Watch: interval 0: statistics are taken every N steps, N at least 1",
                       Error);
  Watch watch(module);
  CHECK_THROWS_WITH_AS(watch.observe(0, known_input(), at::ones({2})),
                       "Watch::observe(step 0): the loss must be a real tensor of one element, "
                       "not of shape [2]",
                       Error);
}

TEST_CASE("watch: what a stranger tried is refused, or handled, by name") {
  // Found by a user trying to break the watch; each was a raw LibTorch error, a silently wrong
  // record, or a failure at the first bad step that lost why the step was bad.
  tdfx::testing::ScratchDir dir("tdfx_watch_stranger");
  auto module = known_linear();
  auto trained = [&] {
    TensorDict td = known_input();
    module->forward(td);
    module->zero_grad();
    td.get("y").sum().backward();
    return td;
  };
  WatchOptions options;
  SUBCASE("options") {
    options.interval = 7;
    options.histogram_interval = 10;
    CHECK_THROWS_WITH_AS(Watch(module, options),
                         "Watch: histogram_interval 10 is not a multiple of interval 7: "
                         "histograms are taken with the statistics, at steps divisible by both",
                         Error);
    options = {};
    options.spike_sigmas = NAN;
    CHECK_THROWS_AS(Watch(module, options), Error);
    options = {};
    options.snapshot = (dir / "missing" / "bad.pt2").string();
    CHECK_THROWS_WITH_AS(Watch(module, options),
                         (options.snapshot + ": cannot write the snapshot here: no folder " +
                          (dir / "missing").string())
                             .c_str(),
                         FileError);
    options.snapshot = dir.path().string();
    CHECK_THROWS_AS(Watch(module, options), FileError);
  }
  SUBCASE("steps, losses, gradients and TensorDicts") {
    Watch watch(module);
    const TensorDict td = trained();
    const at::Tensor loss = td.get("y").sum();
    CHECK_THROWS_WITH_AS(watch.observe(-1, td, loss),
                         "Watch::observe(step -1): steps are counted up from 0", Error);
    CHECK_FALSE(watch.observe(10, td, loss).bad);
    CHECK_THROWS_WITH_AS(watch.observe(5, td, loss),
                         "Watch::observe(step 5): steps are counted up from 0, and the last step "
                         "observed was 10",
                         Error);
    CHECK_THROWS_WITH_AS(watch.observe(11, td, at::ones({1}, at::kComplexFloat)),
                         "Watch::observe(step 11): the loss must be a real tensor of one "
                         "element, not a complex one",
                         Error);
    CHECK_THROWS_WITH_AS(watch.observe(100, TensorDict({}, {2}), loss),
                         "Watch::observe(step 100): the TensorDict holds none of the keys the "
                         "pipeline's modules write: give observe the TensorDict the forward pass "
                         "wrote",
                         Error);
    module->zero_grad();
    for (auto& p : module->parameters()) p.mutable_grad() = at::Tensor();
    CHECK_THROWS_WITH_AS(watch.observe(101, td, loss),
                         "Watch::observe(step 101): no parameter has a gradient: call observe "
                         "after loss.backward() and before the optimizer's zero_grad",
                         Error);
  }
  SUBCASE("a flat loss: a change in its last digits is no spike") {
    options.spike_sigmas = 3;
    options.spike_window = 5;
    Watch watch(module, options);
    const TensorDict td = trained();
    for (int64_t step = 0; step < 10; ++step) {
      CHECK_FALSE(watch.observe(step, td, at::tensor(1.0)).bad);
    }
    CHECK_FALSE(watch.observe(10, td, at::tensor(1.0 + 1e-6)).bad);
    const WatchCheck spike = watch.observe(11, td, at::tensor(1.01));
    CHECK(spike.bad);
    CHECK(spike.why ==
          "the loss 1.01 is 100.0 standard deviations from the mean 1 of the last 5 losses");
  }
  SUBCASE("a bias of zeros has no update ratio; integer outputs have statistics") {
    auto zeroed = make_td_sequential(
        {known_linear(),
         make_td_module([](const at::Tensor& y) { return y.argmax(1, /*keepdim=*/true); }, {"y"},
                        {"index"})});
    {
      torch::NoGradGuard no_grad;
      for (auto& item : zeroed->named_parameters()) {
        if (item.key().find("bias") != std::string::npos) item.value().zero_();
      }
    }
    torch::optim::SGD sgd(zeroed->parameters(), torch::optim::SGDOptions(0.1));
    Watch watch(zeroed);
    for (int64_t step = 0; step < 2; ++step) {
      TensorDict td = known_input();
      zeroed->forward(td);
      sgd.zero_grad();
      td.get("y").sum().backward();
      watch.observe(step, td, td.get("y").sum());
      sgd.step();
    }
    std::string tags;
    for (const WatchRecord& r : watch.records()) tags += r.tag + "\n";
    CHECK(tags.find("update_ratio/module.0.module.weight\n") != std::string::npos);
    CHECK(tags.find("update_ratio/module.0.module.bias") == std::string::npos);
    CHECK(tags.find("activation_mean/module.1/index\n") != std::string::npos);
  }
  SUBCASE("a sparse gradient: its stored values are checked and measured") {
    torch::nn::Embedding embedding(torch::nn::EmbeddingOptions(5, 2).sparse(true));
    auto sparse = make_td_module(embedding, {"i"}, {"e"});
    Watch watch(sparse);
    TensorDict td({{"i", at::tensor({0, 3}, at::kLong)}}, {2});
    sparse->forward(td);
    td.get("e").sum().backward();
    REQUIRE(sparse->parameters()[0].grad().is_sparse());
    CHECK_FALSE(watch.observe(0, td, td.get("e").sum()).bad);
    std::string grad_norm;
    for (const WatchRecord& r : watch.records()) {
      if (r.tag == "grad_norm/module.weight") grad_norm = fmt::format("{:.6g}", r.value);
    }
    CHECK(grad_norm == "2");  // two rows of ones
  }
}

TEST_CASE("watch: moments and buckets, exactly, with NaN, far from 0 and on the limits") {
  const tdfx::detail::Moments m =
      tdfx::detail::moments_of(at::tensor({1.0, 2.0, NAN, 3.0, 4.0, INFINITY, 5.0}));
  CHECK(m.finite == 5);
  CHECK(m.nonfinite == 2);
  CHECK(m.sum == 15);
  CHECK(m.sum_squares == 55);
  CHECK(m.min == 1);
  CHECK(m.max == 5);
  CHECK(m.mean == 3);
  CHECK(m.std() == doctest::Approx(std::sqrt(2.5)).epsilon(1e-15));
  // A mean of 1e12 and a spread of 1, in doubles: the variance survives (from sums of squares
  // alone, 7e24 in a double, it would be lost to rounding).
  const at::Tensor far = at::tensor({1e12, 1e12 + 1, 1e12 - 1, 1e12, 1e12 + 1, 1e12 - 1, 1e12});
  CHECK(tdfx::detail::moments_of(far).std() ==
        doctest::Approx(std::sqrt(4.0 / 6.0)).epsilon(1e-12));
  // Every element counted once whichever loop takes it (4 at a time, then the rest).
  for (int64_t n : {1, 3, 4, 5, 8, 11}) {
    const tdfx::detail::Moments r = tdfx::detail::moments_of(at::arange(1, n + 1, at::kFloat));
    CHECK(r.finite == n);
    CHECK(r.sum == n * (n + 1) / 2);
    CHECK(r.max == n);
    CHECK(r.min == 1);
  }
  // (limit[i-1], limit[i]]: a value on a limit goes below it.
  const at::Tensor some = at::tensor({0.0, 1.0, 1.5, 2.0, 2.5, 3.0, NAN});
  const tdfx::detail::Buckets three =
      tdfx::detail::equal_width_buckets(some, tdfx::detail::moments_of(some), 3);
  CHECK(three.limits == std::vector<double>{1, 2, 3});
  CHECK(three.counts == std::vector<double>{2, 2, 2});
  CHECK(tdfx::detail::all_finite(at::tensor({1.0f, 2.0f})));
  CHECK_FALSE(tdfx::detail::all_finite(at::tensor({1.0f, -INFINITY})));
  CHECK_FALSE(tdfx::detail::all_finite(at::tensor({NAN, 1.0})));
  CHECK(tdfx::detail::all_finite(at::tensor(std::vector<int64_t>{1, 2})));
  CHECK(tdfx::detail::distance(at::tensor({3.0f, 0.0f}), at::tensor({0.0f, 4.0f})) == 5);
}

TEST_CASE("watch: a key written again is recorded for its last writer") {
  // Linear writes h, ReLU writes h again: the TensorDict holds ReLU's h, so only ReLU's
  // records name it (min 0, as a ReLU's output has).
  auto module = make_td_sequential(
      {make_td_module(torch::nn::Linear(3, 4), {"x"}, {"h"}),
       make_td_module([](const at::Tensor& h) { return at::relu(h); }, {"h"}, {"h"})});
  Watch watch(module);
  TensorDict td({{"x", at::randn({5, 3})}}, {5});
  module->forward(td);
  const at::Tensor loss = td.get("h").sum();
  loss.backward();
  watch.observe(0, td, loss);
  std::string tags;
  for (const WatchRecord& r : watch.records()) {
    if (r.tag.rfind("activation_", 0) == 0) tags += r.tag + "\n";
  }
  CHECK(tags ==
        "activation_nonfinite/module.1/h\nactivation_mean/module.1/h\nactivation_std/module.1/h\n"
        "activation_min/module.1/h\nactivation_max/module.1/h\n");
}

TEST_CASE("watch: the sample trains until its planted Inf; its snapshot replays to that value") {
  tdfx::testing::ScratchDir dir("tdfx_watch_sample");
  const std::string snapshot = (dir / "bad.pt2").string();
  const auto run = tdfx::testing::run_command(tdfx::testing::bin_dir() + "/watch_training '" +
                                              (dir / "log").string() + "' '" + snapshot + "'");
  CHECK(run.status == 1);
  CHECK(run.out.rfind("step 120 is bad: the loss is Inf\nkept as " + snapshot + "\n", 0) == 0);
  // The snapshot holds the step's observation: run on it, the first non-finite value is the
  // planted one, row 7, column 2.
  const auto replay = tdfx::testing::run_command(tdfx::testing::bin_dir() + "/tdfx run '" +
                                                 snapshot + "' --find-nonfinite 2>&1");
  CHECK(replay.status == 3);
  CHECK(replay.out.find("observation  float32  [64, 4]  the archive's example\n") !=
        std::string::npos);
  CHECK(replay.out.find("first non-finite value: %observation (0 NaN, 1 Inf of 256 values)\n") !=
        std::string::npos);
  CHECK(replay.out.find("  at:     [7, 2]\n") != std::string::npos);
  // What the snapshot keeps besides the program, as `tdfx show --signature` lists it.
  const auto shown = tdfx::testing::run_command(tdfx::testing::bin_dir() + "/tdfx show '" +
                                                snapshot + "' --signature");
  CHECK(shown.status == 0);
  CHECK(shown.out.find("example input observation float32 [64, 4]\n"
                       "optimizer Adam group 0: amsgrad 0, beta1 0.9, beta2 0.999, eps 1e-08, "
                       "lr 0.001, weight_decay 0; 6 parameters\n"
                       "optimizer state module.0.module.bias: step 120, exp_avg, exp_avg_sq\n") !=
        std::string::npos);
}

TEST_CASE("watch: a snapshot needs the step's inputs in the TensorDict after the forward pass") {
  auto module =
      make_td_sequential({make_td_module([](const at::Tensor& x) { return x * 2; }, {"x"}, {"x"}),
                          make_td_module(torch::nn::Linear(3, 1), {"x"}, {"y"})});
  WatchOptions options;
  options.snapshot = "never.pt2";
  CHECK_THROWS_WITH_AS(Watch(module, options),
                       "Watch: a snapshot keeps the step's inputs, read from the TensorDict after "
                       "the forward pass, but module 'module.0' writes the input key x there",
                       Error);
}

namespace {

// A training layer as text: the run's charts, then per module its lines, fill, mark and charts.
std::string format_layer(const OverlayLayer& layer) {
  auto charts = [](const std::vector<Timeline>& timelines) {
    std::string out;
    for (const Timeline& t : timelines) {
      out += fmt::format("  {} @ {}:", t.label, fmt::join(t.steps, ","));
      for (const auto& [name, values] : t.series) {
        out += " " + name;
        for (const double v : values) out += fmt::format(" {:.6g}", v);
      }
      out += "\n";
    }
    return out;
  };
  std::string out =
      fmt::format("marked step {}\n", layer.marked_step.value_or(-1)) + charts(layer.timelines);
  for (const auto& [path, overlay] : layer.modules) {
    out += fmt::format("{}: fill '{}'{}\n", path, overlay.fill, overlay.marked ? ", ringed" : "");
    for (const std::string& line : overlay.lines) out += "  | " + line + "\n";
    const auto found = layer.module_timelines.find(path);
    if (found != layer.module_timelines.end()) out += charts(found->second);
  }
  return out;
}

}  // namespace

TEST_CASE("watch: the training layer: a chart per module and parameter, the bad step marked") {
  // known_linear (module.0: y = x W^T + b), then relu(y) -> z (module.1, no parameters), SGD at
  // 0.1, statistics every 2 steps. Steps 0 and 2 as in the first test; at step 3 (after three
  // updates: W = [0.1, 1.7], b = -0.1, in float) x = [[1, NaN], [2, 0]] gives y = [NaN, 0.1]
  // (0.0999999 in float): the loss sum(relu(y)) is NaN; relu's backward passes the gradient
  // where y is NaN (NaN <= 0 is false), so db = 2 stays finite and dW = [3, NaN] does not.
  // module.0's outputs hold the NaN first: it is
  // ringed; both modules are pink. Update ratios exist for steps 0 and 2 (each recorded when
  // the next step is observed); step 3 is never updated.
  auto module = make_td_sequential(
      {known_linear(),
       make_td_module([](const at::Tensor& y) { return at::relu(y); }, {"y"}, {"z"})});
  torch::optim::SGD optimizer(module->parameters(), torch::optim::SGDOptions(0.1));
  WatchOptions options;
  options.interval = 2;
  Watch watch(module, options);
  for (int64_t step = 0; step < 5; ++step) {
    TensorDict td = known_input();
    if (step == 3) td.set("x", at::tensor({1.0f, NAN, 2.0f, 0.0f}).reshape({2, 2}));
    module->forward(td);
    const at::Tensor loss = td.get("z").sum();
    optimizer.zero_grad();
    loss.backward();
    if (watch.observe(step, td, loss).bad) break;
    optimizer.step();
  }
  REQUIRE(watch.first_bad_step() == 3);
  // Drawn as a trace draws it: the modules `0` and `1` (the watch's `module.0`, `module.1`).
  RenderOptions drawing;
  drawing.modules = pipeline_modules(*module, "module");
  const OverlayLayer layer = training_layer(watch, drawing);
  CHECK(layer.name == "training");
  CHECK(format_layer(layer) ==
        "marked step 3\n"
        "  loss @ 0,2,3: loss 6 3.2 nan\n"
        "0: fill '#fde0dd', ringed\n"
        "  | y: 1 NaN/Inf at step 3\n"
        "  | module.weight: gradient holds NaN/Inf at step 3\n"
        "  | module.bias: gradient norm 2 at step 3\n"
        "  y @ 0,2,3: min 2.5 0.9 0.0999999 mean 3 1.6 0.0999999 max 3.5 2.3 0.0999999\n"
        "  y: NaN/Inf count @ 0,2,3: count 0 0 1\n"
        "  module.weight: gradient norm @ 0,2,3: gradient norm 3.16228 3.16228 nan\n"
        "  module.weight: weight norm @ 0,2,3: weight norm 2.23607 1.84391 1.70294\n"
        "  module.weight: update ratio @ 0,2: update ratio 0.141421 0.171499\n"
        "  module.bias: gradient norm @ 0,2,3: gradient norm 2 2 2\n"
        "  module.bias: weight norm @ 0,2,3: weight norm 0.5 0.1 0.1\n"
        "  module.bias: update ratio @ 0,2: update ratio 0.4 2\n"
        "1: fill '#fde0dd'\n"
        "  | z: 1 NaN/Inf at step 3\n"
        "  z @ 0,2,3: min 2.5 0.9 0.0999999 mean 3 1.6 0.0999999 max 3.5 2.3 0.0999999\n"
        "  z: NaN/Inf count @ 0,2,3: count 0 0 1\n");

  WatchOptions unkept;
  unkept.keep_records = false;
  // Exported programs name the modules as the watch does; any other drawing is refused.
  drawing.modules = pipeline_modules(*module, "");
  CHECK(training_layer(watch, drawing).modules.count("module.0"));
  drawing.modules.erase(drawing.modules.begin());
  CHECK_THROWS_WITH_AS(training_layer(watch, drawing),
                       "training_layer: the drawing (RenderOptions::modules) has no module "
                       "'module.0', which the watch records: draw the module the watch watches",
                       Error);
  CHECK_THROWS_WITH_AS(training_layer(Watch(module, unkept), drawing),
                       "training_layer: the watch kept no records (WatchOptions::keep_records is "
                       "false); its event files hold them",
                       Error);
}

namespace {

// x (3 features) -> Linear(3, 4) -> Tanh -> Linear(4, 1) -> y; the loss the mean of y².
std::shared_ptr<TensorDictSequential> small_regressor() {
  return make_td_sequential({make_td_module(torch::nn::Linear(3, 4), {"x"}, {"h"}),
                             make_td_module(torch::nn::Tanh(), {"h"}, {"h"}),
                             make_td_module(torch::nn::Linear(4, 1), {"h"}, {"y"})});
}

at::Tensor regressor_loss(TensorDictModuleBase& module, const at::Tensor& x) {
  TensorDict td({{"x", x}}, {x.size(0)});
  module.forward(td);
  return td.get("y").pow(2).mean();
}

}  // namespace

TEST_CASE("watch: a snapshot keeps Adam's state; restored, the step's update is the run's own") {
  // Adam trains 8 steps; step 8's input is 1000 times larger, and the loss's spike makes it
  // bad. The snapshot holds the weights and Adam's state before step 8's update (8 steps each).
  // A fresh module given those weights, and a fresh Adam (at another learning rate) given that
  // state, take step 8 again: their weights after it are the run's, bit for bit.
  tdfx::testing::ScratchDir dir("tdfx_watch_optimizer");
  const std::string snapshot = (dir / "spike.pt2").string();
  at::manual_seed(3);
  auto module = small_regressor();
  torch::optim::Adam adam(module->parameters(), torch::optim::AdamOptions(0.01));
  WatchOptions options;
  options.snapshot = snapshot;
  options.optimizer = &adam;
  options.spike_sigmas = 4;
  options.spike_window = 5;
  Watch watch(module, options);
  at::Tensor bad_input;
  OptimizerState before;
  for (int64_t step = 0; step < 9; ++step) {
    at::Tensor x = at::randn({8, 3});
    if (step == 8) x = x * 1000;
    TensorDict td({{"x", x}}, {8});
    module->forward(td);
    const at::Tensor loss = td.get("y").pow(2).mean();
    adam.zero_grad();
    loss.backward();
    if (watch.observe(step, td, loss).bad) {
      bad_input = x;
      before = optimizer_state_of(adam, *module);
    }
    adam.step();
  }
  REQUIRE(watch.first_bad_step() == 8);
  std::map<std::string, at::Tensor> after;
  for (const auto& item : module->named_parameters()) after[item.key()] = item.value().clone();

  const ExportedProgram program = load(snapshot);
  REQUIRE(program.optimizer_state());
  const OptimizerState& kept = *program.optimizer_state();
  CHECK(kept.type == "Adam");
  REQUIRE(kept.groups.size() == 1);
  CHECK(kept.groups[0].parameters ==
        std::vector<std::string>{"module.0.module.weight", "module.0.module.bias",
                                 "module.2.module.weight", "module.2.module.bias"});
  CHECK(kept.groups[0].options == std::map<std::string, double>{{"amsgrad", 0},
                                                                {"beta1", 0.9},
                                                                {"beta2", 0.999},
                                                                {"eps", 1e-8},
                                                                {"lr", 0.01},
                                                                {"weight_decay", 0}});
  for (const auto& [name, state] : kept.parameters) {
    CHECK(state.step == 8);
    CHECK(state.tensors.size() == 2);
    for (const auto& [tensor_name, tensor] : state.tensors) {
      CHECK(at::equal(tensor, before.parameters.at(name).tensors.at(tensor_name)));
    }
  }
  CHECK(kept.parameters.size() == 4);
  CHECK(at::equal(program.example_inputs().at("x"), bad_input));

  auto fresh = small_regressor();
  {
    torch::NoGradGuard no_grad;
    for (const InputSpec& in : program.graph_signature().inputs) {
      if (in.kind != InputKind::kParameter) continue;
      for (auto& item : fresh->named_parameters()) {
        if (item.key() == in.target) item.value().copy_(program.state().at(in.name));
      }
    }
  }
  torch::optim::Adam again(fresh->parameters(), torch::optim::AdamOptions(0.5));
  restore_optimizer_state(kept, again, *fresh);
  const at::Tensor loss = regressor_loss(*fresh, program.example_inputs().at("x"));
  again.zero_grad();
  loss.backward();
  again.step();
  for (const auto& item : fresh->named_parameters()) {
    CHECK_MESSAGE(at::equal(item.value(), after.at(item.key())), item.key());
  }

  // Another optimizer's type, or another module's parameters, are refused.
  torch::optim::SGD sgd(fresh->parameters(), torch::optim::SGDOptions(0.1));
  CHECK_THROWS_WITH_AS(restore_optimizer_state(kept, sgd, *fresh),
                       "restore_optimizer_state: the state is of an Adam optimizer; this "
                       "optimizer is SGD",
                       Error);
  torch::optim::Adam partial({fresh->parameters()[0]}, torch::optim::AdamOptions(0.1));
  CHECK_THROWS_WITH_AS(restore_optimizer_state(kept, partial, *fresh),
                       "restore_optimizer_state: parameter group 0 holds [module.0.module.weight, "
                       "module.0.module.bias, module.2.module.weight, module.2.module.bias] in the "
                       "state, [module.0.module.weight] in the optimizer",
                       Error);
}

TEST_CASE("watch: an optimizer tdfx does not keep is refused when the watch is made") {
  auto module = small_regressor();
  torch::optim::LBFGS lbfgs(module->parameters());
  WatchOptions options;
  options.optimizer = &lbfgs;
  CHECK_THROWS_WITH_AS(Watch(module, options),
                       "optimizer state: this optimizer is not one tdfx keeps (Adam, AdamW, SGD, "
                       "RMSprop, Adagrad: LibTorch's, as they are)",
                       Error);
  // Nor a class derived from one of LibTorch's: its step may not be Adam's.
  struct MyAdam : torch::optim::Adam {
    using torch::optim::Adam::Adam;
  };
  MyAdam mine(module->parameters());
  options.optimizer = &mine;
  CHECK_THROWS_AS(Watch(module, options), Error);
  // Nor one over tensors that are not the module's.
  torch::optim::SGD other({at::zeros({2}, at::TensorOptions().requires_grad(true))},
                          torch::optim::SGDOptions(0.1));
  options.optimizer = &other;
  CHECK_THROWS_WITH_AS(Watch(module, options),
                       "optimizer state: parameter group 0 holds a tensor of shape [2] that is "
                       "not a parameter of the module",
                       Error);
}

// Each value's bucket found the slow way: the first whose limit is at or above it.
static std::vector<double> counted_by_search(const at::Tensor& values,
                                             const std::vector<double>& limits) {
  std::vector<double> counts(limits.size(), 0.0);
  const at::Tensor d = values.to(at::kDouble).contiguous();
  for (int64_t k = 0; k < d.numel(); ++k) {
    const double v = d.data_ptr<double>()[k];
    if (!std::isfinite(v)) continue;
    const auto at = std::lower_bound(limits.begin(), limits.end(), v);
    counts[at == limits.end() ? limits.size() - 1 : static_cast<size_t>(at - limits.begin())] += 1;
  }
  return counts;
}

TEST_CASE("watch: histogram buckets count each value where its limits put it") {
  // Values on every limit and one step either side of it, with random ones, in float and
  // double, of lengths that end blocks part way, with and without a NaN (the loop by blocks and
  // the one by values).
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    for (const int buckets : {1, 2, 7, 30, 1000}) {
      for (const bool with_nan : {false, true}) {
        std::vector<double> picked;
        const double lo = -3.25, hi = 11.5, width = (hi - lo) / buckets;
        for (int i = 0; i <= buckets; ++i) {
          const double limit = lo + width * i;
          picked.insert(picked.end(),
                        {limit, std::nextafter(limit, -1e9), std::nextafter(limit, 1e9)});
        }
        at::Tensor values = at::cat({at::tensor(picked, at::kDouble).clamp(lo, hi).to(dtype),
                                     at::rand({1531}, at::TensorOptions(dtype)) * (hi - lo) + lo,
                                     at::tensor({lo, hi}).to(dtype)});
        if (with_nan) values = at::cat({values, at::tensor({NAN}).to(dtype)});
        const tdfx::detail::Moments m = tdfx::detail::moments_of(values);
        const tdfx::detail::Buckets b = tdfx::detail::equal_width_buckets(values, m, buckets);
        CAPTURE(buckets);
        CAPTURE(with_nan);
        REQUIRE(b.limits.size() == static_cast<size_t>(buckets));
        CHECK(b.counts == counted_by_search(values, b.limits));
      }
    }
  }
  // Extremes: a spread wider than a double holds, a width below the smallest normal, and 10000
  // limits within a few ulps of 1e6, most of them equal (each value then found among the
  // limits, not walked to). The limits finite and ascending, each count where they put it.
  std::vector<double> near_million;
  for (int k = 0; k < 2000; ++k) near_million.push_back(std::nextafter(1e6, 2e6) * (k % 2) + 1e6);
  for (const at::Tensor& odd :
       {at::tensor({-1e308, 0.0, 1e308, 5e307}), at::tensor({0.0, 4e-320, 1e-319, 5e-324}),
        at::tensor(near_million, at::kDouble)}) {
    const tdfx::detail::Buckets b =
        tdfx::detail::equal_width_buckets(odd, tdfx::detail::moments_of(odd), 10000);
    CAPTURE(odd);
    CHECK(std::is_sorted(b.limits.begin(), b.limits.end()));
    CHECK(std::all_of(b.limits.begin(), b.limits.end(), [](double l) { return std::isfinite(l); }));
    CHECK(b.counts == counted_by_search(odd, b.limits));
  }
  const at::Tensor wide = at::tensor({-1e308, 0.0, 1e308});
  const tdfx::detail::Buckets thirds =
      tdfx::detail::equal_width_buckets(wide, tdfx::detail::moments_of(wide), 3);
  CHECK(thirds.counts == std::vector<double>{1, 1, 1});
}

TEST_CASE("watch: moments are the same to the bit whichever loop sums them") {
  // Element i + k of each group of 4 is summed in lane k, the lanes then added in order; the
  // rest one by one: so with AVX2 or without, moments_of gives these very doubles.
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    for (const int64_t n : {3, 4, 1001, 4099}) {
      const at::Tensor values = at::randn({n}, at::TensorOptions(dtype)) * 3 + 1;
      const at::Tensor d = values.to(at::kDouble);
      const double* p = d.data_ptr<double>();
      const double shift = p[0];
      double lanes[4][4] = {}, lo[4] = {shift, shift, shift, shift},
             hi[4] = {shift, shift, shift, shift};
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        for (int k = 0; k < 4; ++k) {
          const double v = p[i + k], g = v - shift;
          lanes[0][k] += v;
          lanes[1][k] += v * v;
          lanes[2][k] += g;
          lanes[3][k] += g * g;
          lo[k] = std::min(lo[k], v);
          hi[k] = std::max(hi[k], v);
        }
      }
      double sums[4] = {}, low = INFINITY, high = -INFINITY;
      for (int k = 0; k < 4; ++k) {
        for (int s = 0; s < 4; ++s) sums[s] += lanes[s][k];
        low = std::min(low, lo[k]);
        high = std::max(high, hi[k]);
      }
      for (; i < n; ++i) {
        const double v = p[i], g = v - shift;
        sums[0] += v;
        sums[1] += v * v;
        sums[2] += g;
        sums[3] += g * g;
        low = std::min(low, v);
        high = std::max(high, v);
      }
      const tdfx::detail::Moments m = tdfx::detail::moments_of(values);
      CAPTURE(n);
      CHECK(m.sum == sums[0]);
      CHECK(m.sum_squares == sums[1]);
      CHECK(m.squared_gap == std::max(0.0, sums[3] - sums[2] * sums[2] / static_cast<double>(n)));
      CHECK(m.min == low);
      CHECK(m.max == high);
    }
  }
}

TEST_CASE("watch: every step's update ratio, the weights' copies kept between steps") {
  // As "known exactly", every step: W = [1, 2] → [0.7, 1.9] → [0.4, 1.8], b = 0.5 → 0.3 → 0.1;
  // each update moves W by 0.1 sqrt(10) and b by 0.2. Ratios: 0.316228 / sqrt(5), then
  // 0.316228 / sqrt(4.1) = 0.156174; 0.2 / 0.5, then 0.2 / 0.3.
  WatchOptions options;
  options.interval = 1;
  const std::unique_ptr<Watch> watch = watch_three_known_steps(options);
  std::vector<WatchRecord> ratios;
  for (const WatchRecord& r : watch->records()) {
    if (r.tag.rfind("update_ratio/", 0) == 0) ratios.push_back(r);
  }
  CHECK(format_records(ratios) ==
        "0 update_ratio/module.weight 0.141421\n"
        "0 update_ratio/module.bias 0.4\n"
        "1 update_ratio/module.weight 0.156174\n"
        "1 update_ratio/module.bias 0.666667\n");
}

TEST_CASE("watch: moments of values whose squares overflow a double") {
  // Squares of 1e160 are beyond a double: the sums are taken again of the values scaled by a
  // power of 2, so the norm and the spread stay right, not Inf or 0.
  const tdfx::detail::Moments apart = tdfx::detail::moments_of(at::tensor({-1e160, 1e160, 0.0}));
  CHECK(apart.mean == 0);
  CHECK(apart.std() == doctest::Approx(1e160).epsilon(1e-12));
  CHECK(apart.norm() == doctest::Approx(std::sqrt(2.0) * 1e160).epsilon(1e-12));
  CHECK(std::isinf(apart.sum_squares));  // 2e320 is no double
  const tdfx::detail::Moments top = tdfx::detail::moments_of(at::tensor({1e308, 1.5e308, 1.7e308}));
  CHECK(top.mean == doctest::Approx(1.4e308).epsilon(1e-12));
  CHECK(top.std() == doctest::Approx(std::sqrt(0.13) * 1e308).epsilon(1e-12));
  CHECK(std::isinf(top.sum));
  // Ordinary values are summed once, unscaled.
  const tdfx::detail::Moments plain = tdfx::detail::moments_of(at::tensor({3.0, 4.0}));
  CHECK(plain.scale == 1);
  CHECK(plain.norm() == 5);
}

TEST_CASE("watch: tensors without values one can read are refused by name") {
  const at::Tensor sparse = at::eye(3).to_sparse();
  CHECK_THROWS_WITH_AS(tdfx::histogram_of(sparse), doctest::Contains("sparse"), Error);
  CHECK_THROWS_WITH_AS(tdfx::detail::moments_of(sparse), doctest::Contains("to_dense()"), Error);
  const at::Tensor meta = at::empty({2, 2}, at::TensorOptions().device(at::kMeta));
  CHECK_THROWS_WITH_AS(tdfx::histogram_of(meta), doctest::Contains("meta tensor"), Error);
  CHECK_THROWS_WITH_AS(tdfx::detail::all_finite(meta), doctest::Contains("meta tensor"), Error);
  const at::Tensor quantized = at::quantize_per_tensor(at::ones({2}), 0.1, 0, at::kQInt8);
  CHECK_THROWS_WITH_AS(tdfx::histogram_of(quantized), doctest::Contains("dequantize()"), Error);
  const at::Tensor values = at::ones({4});
  CHECK_THROWS_WITH_AS(tdfx::histogram_from(values, tdfx::detail::moments_of(values), 0),
                       "histogram_from: 0 buckets; give 1 to 10000", Error);
  CHECK_THROWS_WITH_AS(tdfx::histogram_from(values, tdfx::detail::moments_of(values), 20000),
                       "histogram_from: 20000 buckets; give 1 to 10000", Error);
  auto module = known_linear();
  Watch watch(module);
  TensorDict td = known_input();
  module->forward(td);
  td.get("y").sum().backward();
  CHECK_THROWS_WITH_AS(watch.observe(0, td, at::empty({}, at::TensorOptions().device(at::kMeta))),
                       doctest::Contains("not a meta tensor"), Error);
}

TEST_CASE("watch: a call that fails leaves the watch as it was") {
  auto module = known_linear();
  WatchOptions options;
  options.interval = 1;
  Watch watch(module, options);
  TensorDict td = known_input();
  module->forward(td);
  // Observed before backward: refused, and the step can be observed again once it is done.
  CHECK_THROWS_WITH_AS(watch.observe(0, td, td.get("y").sum()),
                       doctest::Contains("no parameter has a gradient"), Error);
  td.get("y").sum().backward();
  CHECK_FALSE(watch.observe(0, td, td.get("y").sum()).bad);
  module->zero_grad();
  // A TensorDict the pipeline did not write: refused, its loss not recorded.
  TensorDict other({{"z", at::ones({2, 2})}}, {2});
  TensorDict again = known_input();
  module->forward(again);
  again.get("y").sum().backward();
  CHECK_THROWS_WITH_AS(watch.observe(1, other, at::full({}, 111.0)),
                       doctest::Contains("none of the keys"), Error);
  CHECK_FALSE(watch.observe(1, again, at::full({}, 222.0)).bad);
  std::string losses;
  for (const WatchRecord& r : watch.records()) {
    if (r.tag == "loss") losses += fmt::format("{} {}\n", r.step, r.value);
  }
  CHECK(losses == "0 6\n1 222\n");
}

TEST_CASE("watch: a parameter given another shape between steps has no update ratio then") {
  auto module = known_linear();
  torch::optim::SGD optimizer(module->parameters(), torch::optim::SGDOptions(0.1));
  WatchOptions options;
  options.interval = 1;
  Watch watch(module, options);
  auto* linear = module->inner_ptr()->as<torch::nn::Linear>();
  REQUIRE(linear);
  for (int64_t step = 0; step < 4; ++step) {
    if (step == 2) {
      // The weight made 2 × 2: y then has two columns.
      torch::NoGradGuard no_grad;
      linear->weight.set_data(at::ones({2, 2}));
      linear->weight.mutable_grad() = at::Tensor();
    }
    TensorDict td = known_input();
    module->forward(td);
    const at::Tensor loss = td.get("y").sum();
    optimizer.zero_grad();
    loss.backward();
    CHECK_FALSE(watch.observe(step, td, loss).bad);
    optimizer.step();
  }
  std::string ratios;
  for (const WatchRecord& r : watch.records()) {
    if (r.tag.rfind("update_ratio/", 0) == 0) ratios += fmt::format("{} {}\n", r.step, r.tag);
  }
  // Step 1's weight was updated, then replaced before step 2 was observed: no ratio for it.
  CHECK(ratios ==
        "0 update_ratio/module.weight\n0 update_ratio/module.bias\n"
        "1 update_ratio/module.bias\n"
        "2 update_ratio/module.weight\n2 update_ratio/module.bias\n");
}
