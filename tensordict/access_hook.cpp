#include "tdfx/tensordict/access_hook.h"

namespace tdfx {
namespace {

thread_local KeyAccessHook* installed_hook = nullptr;

}  // namespace

std::optional<at::Tensor> KeyAccessHook::on_missing(const TensorDict& /*td*/,
                                                    const NestedKey& /*key*/) {
  return std::nullopt;
}

std::vector<at::Tensor> KeyAccessHook::on_call(
    const TensorDictModule& /*module*/, const std::vector<at::Tensor>& /*inputs*/,
    const std::function<std::vector<at::Tensor>()>& run) {
  return run();
}

void KeyAccessHook::on_sequential_child(size_t /*index*/, const torch::nn::Module& /*child*/) {}

ScopedKeyAccessHook::ScopedKeyAccessHook(KeyAccessHook* hook) : previous_(installed_hook) {
  installed_hook = hook;
}

ScopedKeyAccessHook::~ScopedKeyAccessHook() { installed_hook = previous_; }

KeyAccessHook* current_key_access_hook() { return installed_hook; }

}  // namespace tdfx
