#include "tdfx/tracer/state_restore.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <exception>
#include <mutex>

namespace tdfx::detail {

GeneratorRestore::GeneratorRestore() : generator_(at::detail::getDefaultCPUGenerator()) {
  std::lock_guard<std::mutex> lock(generator_.mutex());
  state_ = generator_.get_state();
}

GeneratorRestore::~GeneratorRestore() {
  try {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(state_);
  } catch (const std::exception&) {
    // A destructor must not throw; the state was read from this generator, so it fits.
  }
}

ModuleStateRestore::ModuleStateRestore(torch::nn::Module& module) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& t : module.parameters(true)) {
    if (t.defined()) saved_.emplace_back(t, t.detach().clone());
  }
  for (const at::Tensor& t : module.buffers(true)) {
    if (t.defined()) saved_.emplace_back(t, t.detach().clone());
  }
}

ModuleStateRestore::~ModuleStateRestore() {
  try {
    at::NoGradGuard no_grad;
    for (auto& [tensor, copy] : saved_) tensor.detach().copy_(copy);
  } catch (const std::exception&) {
    // A destructor must not throw; each copy has its tensor's shape and dtype.
  }
}

}  // namespace tdfx::detail
