#include "tdfx/tracer/dispatch_trace.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/equal.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <deque>
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
#include "tdfx/tracer/module_tree.h"

namespace tdfx::detail {
namespace {

// The default CPU generator's state, put back when the scope ends: a recording draws from it
// (Dropout), and leaves it as it found it.
class GeneratorRestore {
 public:
  GeneratorRestore() : generator_(at::detail::getDefaultCPUGenerator()) {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    state_ = generator_.get_state();
  }
  ~GeneratorRestore() {
    try {
      std::lock_guard<std::mutex> lock(generator_.mutex());
      generator_.set_state(state_);
    } catch (const std::exception&) {
      // A destructor must not throw; the state was read from this generator, so it fits.
    }
  }
  GeneratorRestore(const GeneratorRestore&) = delete;
  GeneratorRestore& operator=(const GeneratorRestore&) = delete;

 private:
  at::Generator generator_;
  at::Tensor state_;
};

// Where a TensorDictModule's nodes belong.
struct CallPlace {
  std::string td_path, inner_path, module_type;
};

// A built-in layer, by the parameters and buffers it owns.
struct Layer {
  std::string path, type;
};

// A copy of `graph` whose nodes are named afresh in order, as if the nodes erased from it had
// never been (the recorder names each op as it runs, before anything is known to be dead): the
// nodes a trace prunes before naming leave no gap in the names (`view_4` follows `view_3`).
Graph named_afresh(const Graph& graph) {
  Graph fresh;
  std::unordered_map<const Node*, Node*> copies;
  auto copy_of = [&](Node* node) { return copies.at(node); };
  for (const Node* node : graph.nodes()) {
    Args args;
    for (const Argument& arg : node->args()) args.push_back(map_nodes(arg, copy_of));
    Kwargs kwargs;
    for (const auto& [name, arg] : node->kwargs())
      kwargs.emplace_back(name, map_nodes(arg, copy_of));
    Node* copy = nullptr;
    if (node->op() == OpCode::kOutput) {
      copy = fresh.output(args.at(0));
    } else {
      const std::string hint = node->op() == OpCode::kPlaceholder ? node->name()
                               : node->op() == OpCode::kCallFunction
                                   ? fx_name(node->target(), node->args(), node->kwargs())
                                   : "";
      copy =
          fresh.create_node(node->op(), node->target(), std::move(args), std::move(kwargs), hint);
    }
    copy->meta() = node->meta();
    copies[node] = copy;
  }
  return fresh;
}

class ProgramHook : public KeyAccessHook {
 public:
  ProgramHook(TensorDictModuleBase& module, const TensorDict& example)
      : module_(module), example_(example), recorder_(out_.graph) {
    recorder_.on_node = [this](Node* node) { give_meta(node); };
    recorder_.on_value_read = [this](ValueReadCall& read, const std::vector<at::Tensor>& tensors) {
      guard_layer_read(read, tensors);
    };
  }

  RecordedProgram run() {
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
    for (const auto& item : module_.named_parameters(true)) {
      recorder_.bind_state(item.value(), item.key());
    }
    for (const auto& item : module_.named_buffers(true)) {
      if (item.value().defined()) recorder_.bind_state(item.value(), item.key());
    }
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
    attribute_layers();
    out_.graph.output(tuple(std::move(results)));
    out_.graph.eliminate_dead_code();
    out_.graph = named_afresh(out_.graph);
    out_.graph.lint();
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
    out_.input_keys.push_back(key);
    reads_.emplace(key, copy);
    return copy;
  }

  void on_write(const TensorDict& /*td*/, const NestedKey& /*key*/,
                const at::Tensor& /*value*/) override {}

  void on_sequential_child(size_t index, const torch::nn::Module& child) override {
    if (!call_) return;
    child_ = Layer{join_path(call_->inner_path, std::to_string(index)), describe_module(child)};
  }

  std::vector<at::Tensor> on_call(const TensorDictModule& module,
                                  const std::vector<at::Tensor>& /*inputs*/,
                                  const std::function<std::vector<at::Tensor>()>& run) override {
    auto planned = planned_.find(&module);
    if (planned == planned_.end() || planned->second.empty()) {
      fail<TraceError>("{}: called outside the traced pipeline's structure", module.describe());
    }
    const CallPlace place = planned->second.front();
    planned->second.pop_front();
    call_ = &place;
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
      refuse_value_reads(module, place, reads);
      const std::string layer = dynamic_cast<const c10::Error*>(&e)
                                    ? failed_layer(static_cast<const c10::Error&>(e))
                                    : "";
      fail<TraceError>("{}: the wrapped module failed while tracing{}: {}", module.describe(),
                       layer.empty() ? "" : ", in " + layer, library_message(e));
    }
    refuse_value_reads(module, place, reads);
    call_ = nullptr;
    child_.reset();
    return outputs;
  }

 private:
  // A value read by the module's own code is refused (torch.fx refuses control flow on traced
  // values); one inside a built-in layer's forward too, but for attention's comparisons of
  // query, key and value, which the recording guards (guard_layer_read).
  void refuse_value_reads(const TensorDictModule& module, const CallPlace& place, size_t from) {
    const auto& reads = recorder_.value_reads();
    for (size_t i = from; i < reads.size(); ++i) {
      const ValueReadCall& read = reads[i];
      if (read.guarded) continue;
      if (!read.layer.empty()) {
        fail<TraceError>(
            "{}: LibTorch's {} turns a traced tensor into a C++ value ({}) in its forward; tdfx "
            "guards only the query/key/value comparisons of attention. {}",
            module.describe(), read.layer, read.op,
            read.layer == "AdaptiveLogSoftmaxWithLoss"
                ? "Trace a module that calls its log_prob(input) instead (and computes the loss "
                  "from it with at::nll_loss)"
                : "Call its ops in a module of your own instead");
      }
      fail<TraceError>(
          "{}{}: {} turns a traced tensor into a C++ value; symbolically traced variables "
          "cannot be used as inputs to control flow, and the graph would keep only what this "
          "trace saw. Compute it with tensor ops instead (at::where for a branch)",
          module.describe(), place.td_path.empty() ? "" : fmt::format(" at '{}'", place.td_path),
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

  // The calls of the pipeline's TensorDictModules, as walk_pipeline finds them, and the
  // built-in layers inside each (the outermost where one holds another).
  void plan() {
    walk_pipeline(module_, "", [&](const TensorDictModuleBase& m, const PipelinePlace& place) {
      if (place.level >= 0) return;
      const TensorDictModule* td_module = &traced_td_module(m);
      planned_[td_module].push_back(
          {place.path, place.inner_path, describe_module(*td_module->inner_ptr())});
      std::vector<std::string> inside;  // paths of the layers found, to skip their children
      for (const auto& item : td_module->inner_ptr()->named_modules("", true)) {
        const std::string path = join_path(place.inner_path, item.key());
        bool nested = false;
        for (const std::string& outer : inside) nested |= path.rfind(outer + ".", 0) == 0;
        if (nested || !is_builtin_leaf(*item.value())) continue;
        inside.push_back(path);
        const Layer layer{path, describe_module(*item.value())};
        for (const auto& p : item.value()->named_parameters(true)) {
          layers_.emplace(p.value().unsafeGetTensorImpl(), layer);
        }
        for (const auto& b : item.value()->named_buffers(true)) {
          if (b.value().defined()) layers_.emplace(b.value().unsafeGetTensorImpl(), layer);
        }
      }
    });
  }

  // A node's TensorDictModule, and its module until attribute_layers() says otherwise: the
  // child of a wrapped Sequential running, else the wrapped module. Notes the layer whose
  // parameter or buffer it reads.
  void give_meta(Node* node) {
    if (!call_) return;
    NodeMeta& meta = node->meta();
    meta.td_module = call_->td_path;
    meta.module_path = child_ ? child_->path : call_->inner_path;
    meta.module_type = child_ ? child_->type : call_->module_type;
    const Layer* layer = nullptr;
    if (node->op() == OpCode::kGetAttr) {
      layer = layer_of_path(node->target().str());
    } else {
      for (const Node* input : node->input_nodes()) {
        if (input->op() != OpCode::kGetAttr) continue;
        auto it = reads_layer_.find(input);
        if (it != reads_layer_.end()) layer = it->second;
      }
    }
    if (layer) reads_layer_[node] = layer;
  }

  // The built-in layer each op belongs to: one that reads its parameters or buffers, or that
  // lies between two of its ops (Linear's matmul between `t` of its weight and the `add_` of its
  // bias), as C++ modules have no call hook to tell. What only follows a layer's ops (the relu
  // after a Linear) is not the layer's.
  void attribute_layers() {
    std::unordered_map<const Node*, const Layer*> after;  // reached from a layer's op
    for (const Node* node : out_.graph.nodes()) {
      auto direct = reads_layer_.find(node);
      if (direct != reads_layer_.end()) {
        after[node] = direct->second;
        continue;
      }
      for (const Node* input : node->input_nodes()) {
        auto it = after.find(input);
        if (it != after.end()) after[node] = it->second;
      }
    }
    std::unordered_map<const Node*, const Layer*> inside;
    const std::vector<Node*> nodes = out_.graph.node_list();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node* node = *it;
      const Layer* layer = nullptr;
      auto direct = reads_layer_.find(node);
      if (direct != reads_layer_.end()) {
        layer = direct->second;
      } else if (auto reached = after.find(node); reached != after.end()) {
        for (const Node* user : node->users()) {
          auto in = inside.find(user);
          if (in != inside.end() && in->second == reached->second) layer = reached->second;
        }
      }
      if (!layer) continue;
      inside[node] = layer;
      node->meta().module_path = layer->path;
      node->meta().module_type = layer->type;
    }
  }

  const Layer* layer_of_path(const std::string& path) {
    const auto& parameters = state_tensors();
    auto tensor = parameters.find(path);
    if (tensor == parameters.end()) return nullptr;
    auto it = layers_.find(tensor->second);
    return it == layers_.end() ? nullptr : &it->second;
  }

  const std::unordered_map<std::string, const c10::TensorImpl*>& state_tensors() {
    if (paths_.empty()) {
      for (const auto& item : module_.named_parameters(true)) {
        paths_.emplace(item.key(), item.value().unsafeGetTensorImpl());
      }
      for (const auto& item : module_.named_buffers(true)) {
        paths_.emplace(item.key(), item.value().unsafeGetTensorImpl());
      }
    }
    return paths_;
  }

  TensorDictModuleBase& module_;
  const TensorDict& example_;
  RecordedProgram out_;
  DispatchRecorder recorder_;
  std::unordered_map<const TensorDictModule*, std::deque<CallPlace>> planned_;
  std::unordered_map<const c10::TensorImpl*, Layer> layers_;
  std::unordered_map<std::string, const c10::TensorImpl*> paths_;
  std::unordered_map<const Node*, const Layer*> reads_layer_;
  std::map<NestedKey, at::Tensor> reads_;
  const CallPlace* call_ = nullptr;
  std::optional<Layer> child_;
};

}  // namespace

RecordedProgram record_program(TensorDictModuleBase& module, const TensorDict& example) {
  return ProgramHook(module, example).run();
}

}  // namespace tdfx::detail
