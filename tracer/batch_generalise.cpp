#include "tdfx/tracer/batch_generalise.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <unordered_map>

#include "tdfx/core/error.h"

namespace tdfx::detail {
namespace {

namespace jit = torch::jit;

bool is_prim_constant(const jit::Value* value) {
  return value->node()->kind() == c10::prim::Constant;
}

// The dimensions of `a` (recorded at `batch`) that are batch + 1 in `b`, its counterpart.
std::vector<int64_t> following_dims(const jit::Value* a, const jit::Value* b, int64_t batch) {
  const auto ta = a->type()->cast<c10::TensorType>();
  const auto tb = b->type()->cast<c10::TensorType>();
  if (!ta || !tb) return {};
  const auto sa = ta->sizes().concrete_sizes();
  const auto sb = tb->sizes().concrete_sizes();
  if (!sa || !sb || sa->size() != sb->size()) return {};
  std::vector<int64_t> dims;
  for (size_t i = 0; i < sa->size(); ++i) {
    if ((*sa)[i] == batch && (*sb)[i] == batch + 1) dims.push_back(static_cast<int64_t>(i));
  }
  return dims;
}

// Walks two recordings of one module, at batch B and B + 1, op by op.
class Comparison {
 public:
  Comparison(Recording& traced, const Recording& wider, int64_t batch)
      : a_(traced), b_(wider), batch_(batch) {}

  const jit::Node* run() {
    const auto inputs_a = a_.graph->inputs();
    const auto inputs_b = b_.graph->inputs();
    jit::Node* first = next(a_.graph->nodes().begin(), a_.graph->return_node());
    if (inputs_a.size() != inputs_b.size()) return first;
    for (size_t i = 0; i < inputs_a.size(); ++i) same_[inputs_a[i]] = inputs_b[i];
    auto a = a_.graph->nodes().begin();
    auto b = b_.graph->nodes().begin();
    jit::Node* last = nullptr;
    for (;;) {
      a = skip_constants(a, a_.graph->return_node());
      b = skip_constants(b, b_.graph->return_node());
      const bool a_done = *a == a_.graph->return_node();
      const bool b_done = *b == b_.graph->return_node();
      if (a_done || b_done) {
        // One recording ran more ops (a loop over the batch): its last common op is where.
        if (!(a_done && b_done)) return a_done ? last : *a;
        break;
      }
      if (!matches(*a, *b)) return *a;
      last = *a;
      ++a;
      ++b;
    }
    if (a_.outputs.size() != b_.outputs.size()) return last;
    for (size_t i = 0; i < a_.outputs.size(); ++i) {
      const auto& [key_a, value_a] = a_.outputs[i];
      const auto& [key_b, value_b] = b_.outputs[i];
      if (key_a != key_b || counterpart(value_a) != value_b) return value_a->node();
    }
    for (const Patch& patch : patches_) {
      if (!place_size_node(patch)) return patch.op;
    }
    for (const auto& [a_value, b_value] : same_) {
      auto dims = following_dims(a_value, b_value, batch_);
      if (!dims.empty()) a_.batch_dims[a_value] = std::move(dims);
    }
    return nullptr;
  }

 private:
  // A constant input of `user` that is the batch here and batch + 1 there.
  struct Patch {
    jit::Node* user;
    size_t input;
    jit::Node* op;  // the op taking it: `user` itself, or the op reading the list `user` makes
  };

  static jit::graph_node_list::iterator skip_constants(jit::graph_node_list::iterator it,
                                                       const jit::Node* end) {
    while (*it != end && (*it)->kind() == c10::prim::Constant) ++it;
    return it;
  }
  static jit::Node* next(jit::graph_node_list::iterator it, const jit::Node* end) {
    return *skip_constants(it, end);
  }

  const jit::Value* counterpart(const jit::Value* value) const {
    auto it = same_.find(value);
    return it == same_.end() ? nullptr : it->second;
  }

  bool matches(jit::Node* a, const jit::Node* b) {
    if (a->kind() != b->kind() || a->inputs().size() != b->inputs().size() ||
        a->outputs().size() != b->outputs().size()) {
      return false;
    }
    const auto read_a = a_.reads.find(a);
    const auto read_b = b_.reads.find(b);
    if ((read_a == a_.reads.end()) != (read_b == b_.reads.end())) return false;
    if (read_a != a_.reads.end() && read_a->second.key != read_b->second.key) return false;
    for (size_t i = 0; i < a->inputs().size(); ++i) {
      const jit::Value* in_a = a->input(i);
      const jit::Value* in_b = b->input(i);
      if (is_prim_constant(in_a) != is_prim_constant(in_b)) return false;
      if (!is_prim_constant(in_a)) {
        if (counterpart(in_a) != in_b) return false;
        continue;
      }
      const c10::IValue value_a = *jit::toIValue(in_a);
      const c10::IValue value_b = *jit::toIValue(in_b);
      if (value_a.isInt() && value_b.isInt() && value_a.toInt() == batch_ &&
          value_b.toInt() == batch_ + 1) {
        patches_.push_back({a, i, a});
        continue;
      }
      if (value_a.tagKind() != value_b.tagKind() || !(value_a == value_b)) return false;
    }
    for (size_t i = 0; i < a->outputs().size(); ++i) same_[a->output(i)] = b->output(i);
    return true;
  }

  // Replaces the patched constant by `size = x.size(d)`, x a tensor the op takes whose
  // dimension d follows the batch. False when the op takes none.
  bool place_size_node(Patch patch) {
    if (patch.user->kind() == c10::prim::ListConstruct) {
      const auto& uses = patch.user->output()->uses();
      if (uses.size() != 1) return false;
      patch.op = uses[0].user;
    }
    for (jit::Value* input : patch.op->inputs()) {
      const jit::Value* other = counterpart(input);
      if (!other || input->node()->kind() == c10::prim::Param)
        continue;  // parameters have no batch
      const auto dims = following_dims(input, other, batch_);
      if (dims.empty() || !input->node()->isBefore(patch.user)) continue;
      jit::Graph& graph = *a_.graph;
      jit::WithInsertPoint here(patch.user);
      jit::Value* dim = graph.insertConstant(dims.front());
      jit::Node* size = graph.insertNode(graph.create(c10::aten::size, {input, dim}));
      size->output()->setType(c10::IntType::get());
      patch.user->replaceInput(patch.input, size->output());
      auto call = a_.node_call.find(patch.user);
      if (call != a_.node_call.end()) {
        a_.node_call[size] = call->second;
        auto& nodes = a_.calls[call->second].nodes;
        nodes.insert(std::find(nodes.begin(), nodes.end(), patch.user), size);
      }
      return true;
    }
    return false;
  }

  Recording& a_;
  const Recording& b_;
  int64_t batch_;
  std::unordered_map<const jit::Value*, const jit::Value*> same_;
  std::vector<Patch> patches_;
};

}  // namespace

const jit::Node* generalise_batch(Recording& traced, const Recording& wider, int64_t batch) {
  return Comparison(traced, wider, batch).run();
}

CheckedRecording record_batch_checked(TensorDictModuleBase& module, const TensorDict& example,
                                      const std::string& strip_prefix,
                                      const TraceOptions& options) {
  ModuleStateGuard state(module);  // one snapshot for both recordings
  CheckedRecording out;
  out.recording = record(module, example, strip_prefix, options);
  out.batch = example_batch(example);
  if (!out.batch) return out;
  if (*out.batch == 0) {  // no row to repeat
    out.specialised = true;
    return out;
  }
  Recording wider;
  try {
    wider = record(module, widened(example, *out.batch), strip_prefix, options);
  } catch (const Error&) {
    // The module cannot run at another batch size: the graph holds to this one.
    out.specialised = true;
    return out;
  }
  out.differs_at = generalise_batch(out.recording, wider, *out.batch);
  out.specialised = out.differs_at != nullptr;
  return out;
}

std::optional<BatchSpecialisation> specialisation_of(const CheckedRecording& checked,
                                                     const BuiltGraph& built) {
  if (!checked.specialised) return std::nullopt;
  BatchSpecialisation specialisation{*checked.batch, "", ""};
  if (!checked.differs_at) return specialisation;
  // The printed node of the first op that differs, or of the next op that has one (a list
  // or constant folds into the op reading it).
  for (const jit::Node* node = checked.differs_at; node->kind() != c10::prim::Return;
       node = node->next()) {
    auto it = built.origin.find(node);
    if (it != built.origin.end()) {
      specialisation.node = it->second->name();
      specialisation.module = it->second->meta().td_module;
      return specialisation;
    }
  }
  specialisation.node = "output";
  return specialisation;
}

}  // namespace tdfx::detail
