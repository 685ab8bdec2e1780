#pragma once

/// \file
/// A thread-local observer of TensorDict key reads and writes and of TensorDictModule calls. The
/// tracer's recorder (tracer/recorder.cpp) installs one around the whole forward of the module
/// it traces, so that `td.get(key)` can become a getitem node or a placeholder and each call's
/// ops are known; the TensorDict and the modules themselves know nothing about tracing.

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <vector>

#include "tdfx/core/nested_key.h"

namespace tdfx {

class TensorDict;
class TensorDictModule;

}  // namespace tdfx
namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace tdfx {

/// Observes key reads and writes of every TensorDict on this thread while installed.
class KeyAccessHook {
 public:
  virtual ~KeyAccessHook() = default;
  /// Called by TensorDict::get(key) with the stored tensor; returns the tensor the caller sees.
  virtual at::Tensor on_read(const TensorDict& td, const NestedKey& key,
                             const at::Tensor& stored) = 0;
  /// Called by TensorDict::set(key, value) before storing.
  virtual void on_write(const TensorDict& td, const NestedKey& key, const at::Tensor& value) = 0;
  /// Called by get() for a key that is missing; may return a tensor to use instead (e.g. a
  /// placeholder). Default: nullopt → KeyError.
  virtual std::optional<at::Tensor> on_missing(const TensorDict& td, const NestedKey& key);
  /// Called by TensorDictModule::forward between reading its in keys and writing its out keys:
  /// runs the wrapped module by calling `run` and returns its outputs (the tracer records the
  /// ops of each call). Default: `run()`.
  virtual std::vector<at::Tensor> on_call(const TensorDictModule& module,
                                          const std::vector<at::Tensor>& inputs,
                                          const std::function<std::vector<at::Tensor>()>& run);
  /// Called by a wrapped torch::nn::Sequential (TensorDictModule's SequentialCall) before it
  /// runs `child`, its child `index`, so that the tracer can tell which child recorded which
  /// ops. Default: nothing.
  virtual void on_sequential_child(size_t index, const torch::nn::Module& child);
};

/// Installs `hook` for the current thread for the scope's lifetime (restores the previous one).
///
///     {
///       ScopedKeyAccessHook scope(&recorder);   // td.get / td.set now call recorder
///       module->forward(td);
///     }                                          // previous hook (usually none) is back
class ScopedKeyAccessHook {
 public:
  /// Installs `hook` (may be nullptr to disable hooks inside the scope).
  explicit ScopedKeyAccessHook(KeyAccessHook* hook);
  /// Restores the hook that was installed before.
  ~ScopedKeyAccessHook();
  ScopedKeyAccessHook(const ScopedKeyAccessHook&) = delete;
  ScopedKeyAccessHook& operator=(const ScopedKeyAccessHook&) = delete;

 private:
  KeyAccessHook* previous_;
};

/// The hook installed on this thread, or nullptr.
KeyAccessHook* current_key_access_hook();

}  // namespace tdfx
