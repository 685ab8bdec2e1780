// Watch over a training run: the records of a pipeline whose statistics are known exactly,
// the first bad step (a NaN loss, a NaN gradient under a finite loss, a spike), and its
// TensorBoard log read back apart from tdfx.

#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/tensor.h>
#include <doctest/doctest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "tdfx/core/error.h"
#include "tdfx/debug/watch.h"
#include "tdfx/tensordict/modules.h"
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

}  // namespace

TEST_CASE("watch: the records of a pipeline whose statistics are known exactly") {
  // x = [[1, 1], [2, 0]]; the loss is the sum of y. Every step the gradients are dW = [3, 1]
  // (the column sums of x) and db = 2; SGD at 0.1 moves W by 0.1 [3, 1] and b by 0.2.
  // Step 0: y = [3.5, 2.5]; |W| = sqrt(5); its update ratio 0.1 sqrt(10) / sqrt(5) = 0.141421,
  // b's 0.2 / 0.5. Step 2 (after two updates): W = [0.4, 1.8], b = 0.1, y = [2.3, 0.9].
  auto module = known_linear();
  torch::optim::SGD optimizer(module->parameters(), torch::optim::SGDOptions(0.1));
  WatchOptions options;
  options.interval = 2;
  Watch watch(module, options);
  for (int64_t step = 0; step < 3; ++step) {
    TensorDict td = known_input();
    module->forward(td);
    const at::Tensor loss = td.get("y").sum();
    optimizer.zero_grad();
    loss.backward();
    CHECK_FALSE(watch.observe(step, td, loss).bad);
    optimizer.step();
  }
  CHECK(format_records(watch.records()) ==
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
  CHECK_FALSE(watch.first_bad_step());
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
      if (step == 3) CHECK(check.why == "the loss is nan");
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
    const TensorDict td = known_input();
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
                       "Watch::observe(step 0): the loss must be a tensor of one element, not of "
                       "shape [2]",
                       Error);
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
  CHECK(tdfx::detail::bucket_counts(at::tensor({0.0, 1.0, 1.5, 2.0, 2.5, 3.0, NAN}),
                                    {1.0, 2.0, 3.0}) == std::vector<double>{2, 2, 2});
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
  CHECK(run.out.rfind("step 120 is bad: the loss is inf\nkept as " + snapshot + "\n", 0) == 0);
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
