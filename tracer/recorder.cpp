#include "tracer/recorder.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <vector>

#include "core/error.h"

namespace tdfx::detail {
namespace {

namespace jit = torch::jit;
namespace tracer = torch::jit::tracer;

std::string join_path(const std::string& a, const std::string& b) {
  return a.empty() ? b : a + "." + b;
}

// Suspends tracing for the scope: makes the runtime alias of a key without recording it.
class PauseTracing {
 public:
  PauseTracing() : state_(tracer::getTracingState()) { tracer::setTracingState(nullptr); }
  ~PauseTracing() { tracer::setTracingState(state_); }

 private:
  std::shared_ptr<tracer::TracingState> state_;
};

/// True when `a` and `b` hold the same bytes in the same shape, dtype and device.
bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type() || a.device() != b.device()) {
    return false;
  }
  return at::equal(a.contiguous().reshape({-1}).view(at::kByte),
                   b.contiguous().reshape({-1}).view(at::kByte));
}

// The parameters and buffers of a module, put back as they were when the scope ends, even
// by an exception: running a module to trace it may update them (BatchNorm's running
// statistics in training mode), and a trace leaves the module as it found it. Only tensors
// that changed are written back, so that a caller's autograd graph that saved the others
// stays valid. Their version counter does not tell: batch_norm updates the running
// statistics without bumping it.
class StateSnapshot {
 public:
  explicit StateSnapshot(torch::nn::Module& module) {
    at::NoGradGuard no_grad;
    for (const auto& item : module.named_parameters(true)) save(item.value());
    for (const auto& item : module.named_buffers(true)) save(item.value());
  }
  ~StateSnapshot() {
    at::NoGradGuard no_grad;
    for (Saved& saved : saved_) {
      at::Tensor& tensor = saved.tensor;
      try {
        if (bit_equal(tensor, saved.copy)) continue;
        const bool same_layout = tensor.sizes() == saved.copy.sizes() &&
                                 tensor.scalar_type() == saved.copy.scalar_type() &&
                                 tensor.device() == saved.copy.device();
        if (same_layout) {
          tensor.copy_(saved.copy);
        } else {
          tensor.set_data(saved.copy);  // resized or retyped in place
        }
      } catch (const std::exception&) {
        // A destructor must not throw; a tensor that cannot be restored stays as the trace
        // left it (copying a same-shaped tensor does not fail in practice).
      }
    }
  }
  StateSnapshot(const StateSnapshot&) = delete;
  StateSnapshot& operator=(const StateSnapshot&) = delete;

 private:
  struct Saved {
    at::Tensor tensor;
    at::Tensor copy;
  };

  void save(const at::Tensor& tensor) {
    if (tensor.defined()) saved_.push_back({tensor, tensor.clone()});
  }

  std::vector<Saved> saved_;
};

class Recorder {
 public:
  Recorder(const TensorDict& example, std::string strip_prefix)
      : td_(example), strip_(std::move(strip_prefix)) {}

  Recording run(TensorDictModuleBase& module) {
    auto state = std::make_shared<tracer::TracingState>();
    recording_.graph = state->graph;
    tracer::setTracingState(state);
    try {
      register_parameters(module);
      visit(module, "", {});
      for (const NestedKey& key : module.selected_out_keys()) {
        auto it = values_.find(key);
        if (it == values_.end()) {
          fail<TraceError>("{}: out key {} was never written", module.describe(), key.repr());
        }
        recording_.outputs.emplace_back(key, tracer::getValueTrace(it->second));
      }
    } catch (...) {
      tracer::abandon();
      tracer::setTracingState(nullptr);
      throw;
    }
    tracer::setTracingState(nullptr);
    return std::move(recording_);
  }

 private:
  std::string shown(const std::string& path) const {
    if (strip_.empty()) return path;
    if (path == strip_) return "";
    if (path.rfind(strip_ + ".", 0) == 0) return path.substr(strip_.size() + 1);
    return path;
  }

  void register_parameters(TensorDictModuleBase& module) {
    auto& graph = *recording_.graph;
    auto add = [&](const std::string& name, const at::Tensor& tensor) {
      jit::Value* value = graph.addInput(shown(name));
      value->inferTypeFrom(tensor);
      tracer::setValueTrace(tensor, value);
      recording_.parameters[value] = shown(name);
    };
    for (const auto& item : module.named_parameters(true)) add(item.key(), item.value());
    for (const auto& item : module.named_buffers(true)) add(item.key(), item.value());
  }

  // `path` is the module's path from the traced module ("" for it).
  void visit(TensorDictModuleBase& module, const std::string& path,
             std::vector<std::pair<int, int>> levels) {
    if (auto* seq = dynamic_cast<TensorDictSequential*>(&module)) {
      const int level = seq_level_++;
      recording_.level_count = std::max(recording_.level_count, seq_level_);
      const auto& children = seq->children_modules();
      for (size_t i = 0; i < children.size(); ++i) {
        auto child_levels = levels;
        child_levels.insert(child_levels.begin(), {level, static_cast<int>(i)});
        visit(*children[i], join_path(join_path(path, "module"), std::to_string(i)), child_levels);
      }
      return;
    }
    auto* td_module = dynamic_cast<TensorDictModule*>(&module);
    if (!td_module) {
      fail<TraceError>(
          "{}: cannot trace this module type; tdfx traces TensorDictModule and "
          "TensorDictSequential",
          module.describe());
    }
    call(*td_module, path, std::move(levels));
  }

  void call(TensorDictModule& module, const std::string& path,
            std::vector<std::pair<int, int>> levels) {
    ModuleCall record;
    record.module = &module;
    record.td_path = shown(path);
    record.inner_path = shown(join_path(path, "module"));
    record.levels = std::move(levels);
    const size_t index = recording_.calls.size();

    std::vector<at::Tensor> inputs;
    for (const NestedKey& key : module.in_keys()) inputs.push_back(read(key, index));
    for (const auto& t : inputs) record.inputs.push_back(tracer::getValueTrace(t));

    jit::Node* before = last_node();
    std::vector<at::Tensor> outputs;
    try {
      outputs = module.run_inner(inputs);
    } catch (const Error&) {
      throw;
    } catch (const c10::Error& e) {
      fail<TraceError>("{}: the wrapped module failed while tracing: {}", module.describe(),
                       e.what_without_backtrace());
    } catch (const std::exception& e) {
      fail<TraceError>("{}: the wrapped module failed while tracing: {}", module.describe(),
                       e.what());
    }
    for (jit::Node* node = next_node(before); node != end_node(); node = node->next()) {
      record.nodes.push_back(node);
      recording_.node_call[node] = index;
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      jit::Value* value = tracer::getValueTrace(outputs[i]);
      record.outputs.push_back(value);
      values_[module.out_keys()[i]] = outputs[i];
    }
    recording_.calls.push_back(std::move(record));
  }

  // The traced value of `key`: the value written earlier in the trace, or a
  // `tdfx::read` node at the point of the first read.
  at::Tensor read(const NestedKey& key, size_t call_index) {
    auto it = values_.find(key);
    if (it != values_.end()) return it->second;
    at::Tensor stored;
    {
      PauseTracing pause;
      if (!td_.contains(key)) {
        std::string keys;
        for (const auto& k : td_.keys(true, true)) keys += (keys.empty() ? "" : ", ") + k.repr();
        fail<KeyError>("key {} not found in the example TensorDict; keys: {}", key.repr(), keys);
      }
      // A copy: the module may write into its input (an in-place op), and the example
      // TensorDict must come out of the trace as it went in.
      stored = td_.get(key).clone();
    }
    auto& graph = *recording_.graph;
    jit::Node* node = graph.create(c10::Symbol::fromQualString("tdfx::read"), {}, 1);
    graph.insertNode(node);
    node->output()->inferTypeFrom(stored);
    tracer::setValueTrace(stored, node->output());
    recording_.reads[node] = KeyRead{key, call_index};
    values_[key] = stored;
    return stored;
  }

  jit::Node* last_node() const { return recording_.graph->block()->return_node()->prev(); }
  jit::Node* end_node() const { return recording_.graph->block()->return_node(); }
  static jit::Node* next_node(jit::Node* node) { return node->next(); }

  const TensorDict& td_;
  std::string strip_;
  Recording recording_;
  std::map<NestedKey, at::Tensor> values_;
  int seq_level_ = 0;
};

}  // namespace

Recording record(TensorDictModuleBase& module, const TensorDict& example,
                 const std::string& strip_prefix) {
  if (tracer::isTracing()) {
    fail<TraceError>("{}: a trace is already active on this thread", module.describe());
  }
  StateSnapshot snapshot(module);
  return Recorder(example, strip_prefix).run(module);
}

}  // namespace tdfx::detail
