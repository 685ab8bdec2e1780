// Watching a training run: a small actor-critic trained with Adam in a plain LibTorch loop,
// watched by tdfx::Watch, until a planted instability — one observation of step 120 that is
// infinite, as a broken sensor would give — makes the loss infinite. The watch stops the
// loop at that step and says why; with a folder, its records go there as TensorBoard event
// files (`tensorboard --logdir FOLDER`); with a file, that step is kept there as a snapshot
// that `tdfx run FILE --find-nonfinite` replays; with a page, the run is drawn on the
// pipeline in an interactive page (its `training` layer: a chart per module, the bad step
// marked).
//
//   watch_training [LOGDIR [SNAPSHOT.pt2 [PAGE.html]]]     ("" for one not wanted)

#include <ATen/ops/randn.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <iostream>
#include <limits>

#include "tdfx/debug/watch.h"
#include "tdfx/diagram/overlay.h"
#include "tdfx/diagram/traced_diagram.h"
#include "tdfx/tensordict/modules.h"
#include "tdfx/tracer/symbolic_trace.h"

int main(int argc, char** argv) try {
  using namespace tdfx;
  at::manual_seed(0);
  auto policy = make_td_sequential({
      make_td_module(torch::nn::Linear(4, 32), {"observation"}, {"hidden"}),
      make_td_module(torch::nn::Tanh(), {"hidden"}, {"hidden"}),
      make_td_module(torch::nn::Linear(32, 2), {"hidden"}, {{"agent", "action"}}),
      make_td_module(torch::nn::Linear(32, 1), {"hidden"}, {{"critic", "value"}}),
  });
  torch::optim::Adam optimizer(policy->parameters(), torch::optim::AdamOptions(1e-3));

  WatchOptions options;
  options.interval = 20;
  options.histogram_interval = 100;
  if (argc > 1) options.logdir = argv[1];
  if (argc > 2) options.snapshot = argv[2];
  options.optimizer = &optimizer;  // the snapshot keeps Adam's state too
  const std::string page = argc > 3 ? argv[3] : "";
  Watch watch(policy, options);

  constexpr int64_t kPlanted = 120;
  for (int64_t step = 0; step < 1000; ++step) {
    at::Tensor observation = at::randn({64, 4});
    if (step == kPlanted) observation[7][2] = std::numeric_limits<float>::infinity();
    // The action should follow the first two observations, the value their sum.
    const at::Tensor target_action = observation.narrow(1, 0, 2);
    const at::Tensor target_value = observation.sum(1, /*keepdim=*/true);
    TensorDict td({{"observation", observation}}, {64});
    policy->forward(td);
    const at::Tensor loss = (td.get({"agent", "action"}) - target_action).pow(2).mean() +
                            (td.get({"critic", "value"}) - target_value).pow(2).mean();
    optimizer.zero_grad();
    loss.backward();
    const WatchCheck check = watch.observe(step, td, loss);
    if (check.bad) {
      std::cout << "step " << step << " is bad: " << check.why << "\n";
      if (!check.snapshot.empty()) std::cout << "kept as " << check.snapshot << "\n";
      break;
    }
    optimizer.step();
  }
  // What the watch saw of the hidden layer on the way, and at the bad step.
  for (const WatchRecord& r : watch.records()) {
    if (r.tag == "loss" || r.tag == "activation_max/module.1/hidden" ||
        r.tag == "grad_norm/module.0.module.weight") {
      std::cout << "  step " << r.step << "  " << r.tag << " = " << r.value << "\n";
    }
  }
  if (!options.logdir.empty()) std::cout << "TensorBoard log: " << watch.log_path() << "\n";
  if (!page.empty()) {
    // The pipeline traced on a batch like the run's, drawn with the run as its training layer.
    const TDGraphModule gm =
        symbolic_trace(policy, TensorDict({{"observation", at::randn({64, 4})}}, {64}));
    RenderOptions render = diagram_options(gm);
    render.title = "watch_training";
    render.layers.push_back(training_layer(watch, render));
    save_diagram(gm.graph(), page, render);
    std::cout << "page: " << page << "\n";
  }
  return watch.first_bad_step() ? 1 : 0;
} catch (const std::exception& e) {
  std::cerr << "watch_training: " << e.what() << "\n";
  return 2;
}
