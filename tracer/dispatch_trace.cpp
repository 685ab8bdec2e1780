#include "tdfx/tracer/dispatch_trace.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/equal.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/graph/fx_call.h"
#include "tdfx/graph/namespace.h"
#include "tdfx/tensordict/access_hook.h"
#include "tdfx/tracer/batch_check.h"
#include "tdfx/tracer/builtin_layers.h"
#include "tdfx/tracer/dispatch_recorder.h"
#include "tdfx/tracer/module_state.h"
#include "tdfx/tracer/module_tree.h"
#include "tdfx/tracer/state_restore.h"

namespace tdfx::detail {
namespace {

class ProgramHook : public KeyAccessHook {
 public:
  ProgramHook(TensorDictModuleBase& module, const TensorDict& example, const PipelineLayout& layout)
      : module_(module), example_(example), layout_(layout), recorder_(out_.graph) {
    recorder_.on_node = [this](Node* node) { give_meta(node); };
    recorder_.on_captured = [this](const at::Tensor& tensor) { return lift_constant(tensor); };
    recorder_.on_value_read = [this](ValueReadCall& read, const std::vector<at::Tensor>& tensors) {
      guard_layer_read(read, tensors);
    };
  }

  PipelineRecording run() {
    plan();
    GeneratorRestore generator;
    struct StateRestore {
      DispatchRecorder& recorder;
      ~StateRestore() {
        try {
          recorder.restore_state();
        } catch (const std::exception&) {
          // A destructor must not throw; a same-shaped copy does not fail in practice.
        }
      }
    } state{recorder_};
    bind_parameters_and_buffers();
    TensorDict work(example_);  // the module writes here, not into the example
    {
      ScopedKeyAccessHook hook(this);
      recorder_.record([&] { module_.forward(work); });
    }
    std::vector<Argument> results;
    for (const NestedKey& key : module_.selected_out_keys()) {
      const at::Tensor value = work.contains(key) ? work.get(key) : at::Tensor();
      Node* node = recorder_.node_of(value);
      if (!node)
        fail<TraceError>("{}: out key {} was never written", module_.describe(), key.repr());
      results.emplace_back(node);
      out_.out_keys.push_back(key);
    }
    out_.graph.output(tuple(std::move(results)));
    out_.composites = recorder_.take_composites();
    out_.node_state = recorder_.take_state_reads();
    out_.batch = example_batch(example_);
    return std::move(out_);
  }

  at::Tensor on_read(const TensorDict& /*td*/, const NestedKey& key,
                     const at::Tensor& stored) override {
    if (recorder_.node_of(stored)) return stored;  // written during the recording
    auto it = reads_.find(key);
    if (it != reads_.end()) return it->second;
    // A copy, not recorded: the module may write into what it reads, and the example must
    // come out of the recording as it went in.
    at::Tensor copy;
    recorder_.unrecorded([&] { copy = stored.clone(); });
    Node* input;
    {
      Node* first = recorder_.first_node();
      auto guard =
          first ? out_.graph.inserting_before(first) : Graph::InsertGuard(out_.graph, nullptr);
      input = out_.graph.placeholder(parameter_name(key.joined("_")));
    }
    TensorMeta& meta = input->meta().tensor;
    meta.dtype = copy.scalar_type();
    meta.shape = copy.sizes().vec();
    meta.device = copy.device();
    recorder_.bind(copy, input);
    // Keys are read just before the call that reads them.
    out_.reads.push_back(
        {input, key, out_.calls.size(), recorder_.last_node(), copy.is_contiguous()});
    reads_.emplace(key, copy);
    return copy;
  }

  void on_write(const TensorDict& /*td*/, const NestedKey& /*key*/,
                const at::Tensor& /*value*/) override {}

  void on_sequential_child(size_t index, const torch::nn::Module& child) override {
    if (!call_) return;
    out_.children.push_back(
        {join_path(call_->inner_path, std::to_string(index)), std::string(), &child});
    child_ = out_.children.size() - 1;
  }

  std::vector<at::Tensor> on_call(const TensorDictModule& module,
                                  const std::vector<at::Tensor>& inputs,
                                  const std::function<std::vector<at::Tensor>()>& run) override {
    auto planned = planned_.find(&module);
    if (planned == planned_.end() || planned->second.next == planned->second.calls->size()) {
      fail<TraceError>("{}: called outside the traced pipeline's structure", module.describe());
    }
    out_.calls.push_back((*planned->second.calls)[planned->second.next++]);
    const size_t index = out_.calls.size() - 1;
    for (const at::Tensor& t : inputs) out_.calls[index].inputs.push_back(recorder_.node_of(t));
    // The keys read for this call were read just before it.
    for (auto read = out_.reads.rbegin(); read != out_.reads.rend() && read->call == index;
         ++read) {
      read->input->meta().td_module = out_.calls[index].td_path;
    }
    call_index_ = index;
    call_ = &out_.calls[index];
    recorder_.subject = [&module] { return module.describe(); };
    child_.reset();
    const size_t reads = recorder_.value_reads().size();
    std::vector<at::Tensor> outputs;
    try {
      outputs = run();
    } catch (const InternalError&) {
      throw;
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      // A module that failed after reading a value most likely failed because of it (a branch
      // taken for other tensors), so that is what it is told.
      refuse_value_reads(module, reads);
      const std::string layer = dynamic_cast<const c10::Error*>(&e)
                                    ? failed_layer(static_cast<const c10::Error&>(e))
                                    : "";
      fail<TraceError>("{}: the wrapped module failed while tracing{}: {}", module.describe(),
                       layer.empty() ? "" : ", in " + layer_path(module, call_->inner_path, layer),
                       library_message(e));
    }
    refuse_value_reads(module, reads);
    refuse_grad_mode_change(module);
    call_ = &out_.calls[index];  // the vector may not grow during a call, but be sure
    for (const at::Tensor& t : outputs) call_->outputs.push_back(recorder_.node_of(t));
    call_ = nullptr;
    child_.reset();
    recorder_.subject = nullptr;
    return outputs;
  }

 private:
  // A tensor the module captured becomes a constant of the module that read it, as torch.fx
  // lifts it when it traces that module: `_tensor_constant0`, `_tensor_constant1`, … under the
  // wrapped module's path (from the graph root). The names depend only on the order of reads,
  // so every recording of a dynamic trace gives the same.
  std::string lift_constant(const at::Tensor& tensor) {
    const std::string owner = call_ ? call_->inner_path : "";
    int& count = constants_of_[owner];
    std::string path = join_path(owner, "_tensor_constant" + std::to_string(count++));
    out_.constants.emplace_back(path, tensor);
    return path;
  }

  // A tensor registered at several paths (a layer shared by two TensorDictModules) is read at
  // its first; the recording keeps them all.
  void bind_parameters_and_buffers() {
    out_.table = layout_.table;
    const std::vector<StateTensor>& state = layout_.table->state();
    out_.first_state.reserve(state.size());
    for (size_t i = 0; i < state.size(); ++i) {
      const std::string& path = state[i].path;
      const size_t first = recorder_.bind_state(state[i].tensor, path, i);
      out_.first_state.push_back(first);
      if (first != i) {
        const std::string& first_path = state[first].path;
        std::vector<std::string>& paths = out_.state_paths[first_path];
        if (paths.empty()) paths.push_back(first_path);
        paths.push_back(path);
      }
    }
  }

  // Ops run under another grad mode than the trace's (`{ torch::NoGradGuard g; ... }` in a
  // forward, as for a target network) would be run under the caller's by the program: their
  // results would carry gradients the module's do not, and an in-place update of a parameter
  // there would fail. Refused until the graph holds grad mode.
  void refuse_grad_mode_change(const TensorDictModule& module) {
    const std::string& op = recorder_.grad_mode_changed_at();
    if (op.empty()) return;
    fail<TraceError>(
        "{}: its forward switches autograd's grad mode (a NoGradGuard, AutoGradMode or "
        "InferenceMode around {}), which the traced program would not: its runs would compute "
        "gradients where the module computes none. Call .detach() on what such a block "
        "computes instead, update parameters in place (weight clipping) outside the traced "
        "forward, and for a forward that computes no gradients at all, switch the mode around "
        "the traced module's call instead. (torch::tensor({{...}}) switches it too, to write "
        "a tensor literal: make a literal a buffer (register_buffer) or build it with a "
        "recorded factory, at::arange or at::full)",
        module.describe(), op);
  }

  // A value read by the module's own code is refused (torch.fx refuses control flow on traced
  // values); one inside a built-in layer's forward too, but for attention's comparisons of
  // query, key and value, which the recording guards (guard_layer_read).
  void refuse_value_reads(const TensorDictModule& module, size_t from) {
    const auto& reads = recorder_.value_reads();
    for (size_t i = from; i < reads.size(); ++i) {
      const ValueReadCall& read = reads[i];
      if (read.guarded) continue;
      if (!read.layer.empty()) {
        fail<TraceError>(
            "{}: LibTorch's {} turns a traced tensor into a C++ value ({}) in its forward; tdfx "
            "guards only the query/key/value comparisons of attention. {}",
            module.describe(), layer_path(module, call_->inner_path, read.layer), read.op,
            read.layer == "AdaptiveLogSoftmaxWithLoss"
                ? "Trace a module that calls its log_prob(input) instead (and computes the loss "
                  "from it with at::nll_loss)"
                : "Call its ops in a module of your own instead");
      }
      fail<TraceError>(
          "{}{}: {} turns a traced tensor into a C++ value; symbolically traced variables "
          "cannot be used as inputs to control flow, and the graph would keep only what this "
          "trace saw. Compute it with tensor ops instead (at::where for a branch)",
          module.describe(), call_->td_path.empty() ? "" : fmt::format(" at '{}'", call_->td_path),
          read.op);
    }
  }

  // LibTorch's attention compares query, key and value with `equal` to choose its fused
  // self-attention path: the recording holds the path taken, and a guard follows that checks
  // on every run that the comparison comes out as it did here, so that another path is never
  // silently replaced by this one. Tensors that are one recorded value, or differ in shape,
  // need no guard.
  void guard_layer_read(ValueReadCall& read, const std::vector<at::Tensor>& tensors) {
    read.layer = builtin_layer_on_stack();
    // A layer's forward compiled into the caller's binary (a template base's, as BatchNorm1d's)
    // has no frame name to find; but a TensorDictModule wrapping a built-in layer runs only it.
    if (read.layer.empty() && call_ && is_builtin_leaf(*call_->module->inner_ptr())) {
      read.layer = short_type(*call_->module->inner_ptr());
    }
    if (read.layer.empty() || read.op != "aten::equal" || tensors.size() != 2) return;
    const at::Tensor& a = tensors[0];
    const at::Tensor& b = tensors[1];
    Node* na = recorder_.node_of(a);
    Node* nb = recorder_.node_of(b);
    if (!na || !nb) return;
    read.guarded = true;
    if (na == nb || a.sizes() != b.sizes()) return;
    bool equal_now = false;
    DispatchRecorder::unrecorded([&] { equal_now = at::equal(a, b); });
    recorder_.record_guard(a, b, equal_now);
  }

  // Each module's calls as the layout plans them; this recording takes them in call order.
  void plan() {
    out_.level_count = layout_.level_count;
    for (const auto& [module, calls] : layout_.calls) planned_[module].calls = &calls;
  }

  // Notes the TensorDictModule call that recorded a node, and the child of a wrapped Sequential
  // running; the passes make the module metadata from them (PipelineRecording::give_module).
  // Which built-in layer's call it is, leaf_calls.h finds later.
  void give_meta(Node* node) {
    note_item(node);
    const size_t composite = recorder_.composite_running();
    if (composite != DispatchRecorder::kNoComposite) out_.node_composite.set(node, composite);
    if (!call_) return;
    out_.node_call.set(node, call_index_);
    if (child_) out_.node_child.set(node, *child_);
  }

  // An item of an op with several results, by its index (PipelineRecording::items).
  void note_item(Node* node) {
    if (node->op() != OpCode::kCallFunction || !node->target().is_getitem()) return;
    std::vector<Node*>& items = out_.items[node->args().at(0).node()];
    const auto index = static_cast<size_t>(node->args().at(1).as<int64_t>());
    if (items.size() <= index) items.resize(index + 1);
    items[index] = node;
  }

  TensorDictModuleBase& module_;
  const TensorDict& example_;
  const PipelineLayout& layout_;
  PipelineRecording out_;
  DispatchRecorder recorder_;
  // Each module's planned calls, in call order, and the next one to be made.
  struct Planned {
    const std::vector<RecordedCall>* calls = nullptr;  // the layout's
    size_t next = 0;
  };
  std::unordered_map<const TensorDictModule*, Planned> planned_;
  std::map<NestedKey, at::Tensor> reads_;
  RecordedCall* call_ = nullptr;
  size_t call_index_ = 0;
  std::optional<size_t> child_;
  // How many constants each wrapped module (by path) has lifted.
  std::unordered_map<std::string, int> constants_of_;
};

}  // namespace

PipelineLayout pipeline_layout(TensorDictModuleBase& module, const std::string& strip_prefix) {
  PipelineLayout layout;
  walk_pipeline(module, strip_prefix, [&](const TensorDictModuleBase& m, PipelinePlace&& place) {
    if (place.level >= 0) {  // a sequential: one more level of names
      layout.level_count = std::max(layout.level_count, place.level + 1);
      layout.places.emplace_back(&m, std::move(place));
      return;
    }
    const TensorDictModule* td_module = &traced_td_module(m);
    refuse_untraceable_layers(
        *td_module->inner_ptr(), [td_module] { return td_module->describe(); }, place.inner_path);
    RecordedCall call;
    call.module = td_module;
    call.td_path = place.path;
    call.inner_path = place.inner_path;
    call.levels = place.levels;
    layout.calls[td_module].push_back(std::move(call));
    layout.places.emplace_back(&m, std::move(place));
  });
  layout.table = std::make_shared<const ModuleTable>(module, strip_prefix);
  return layout;
}

PipelineRecording record_pipeline(TensorDictModuleBase& module, const TensorDict& example,
                                  const PipelineLayout& layout) {
  return ProgramHook(module, example, layout).run();
}

PipelineRecording record_pipeline(TensorDictModuleBase& module, const TensorDict& example,
                                  const std::string& strip_prefix) {
  return record_pipeline(module, example, pipeline_layout(module, strip_prefix));
}

}  // namespace tdfx::detail
