#include "tdfx/tracer/batch_generalise.h"

#include <ATen/ops/equal.h>
#include <fmt/format.h>
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

// The dimensions of `a` (recorded at batch `batch_a`) that are `batch_b` in `b`, its
// counterpart in the recording at batch_b.
std::vector<int64_t> following_dims(const jit::Value* a, const jit::Value* b, int64_t batch_a,
                                    int64_t batch_b) {
  const auto ta = a->type()->cast<c10::TensorType>();
  const auto tb = b->type()->cast<c10::TensorType>();
  if (!ta || !tb) return {};
  const auto sa = ta->sizes().concrete_sizes();
  const auto sb = tb->sizes().concrete_sizes();
  if (!sa || !sb || sa->size() != sb->size()) return {};
  std::vector<int64_t> dims;
  for (size_t i = 0; i < sa->size(); ++i) {
    if ((*sa)[i] == batch_a && (*sb)[i] == batch_b) dims.push_back(static_cast<int64_t>(i));
  }
  return dims;
}

// A constant input of `user` that is the batch in one recording and the other's batch in the
// other.
struct Patch {
  jit::Node* user;
  size_t input;
  bool operator==(const Patch& other) const { return user == other.user && input == other.input; }
};

// Two recordings of one module, at batch A (`a`, the example's) and batch B, walked op by op.
struct Alignment {
  std::optional<BatchDivergence> divergence;
  std::vector<Patch> patches;
  // Each value of `a` and its counterpart in `b`.
  std::unordered_map<const jit::Value*, const jit::Value*> same;

  const jit::Value* counterpart(const jit::Value* value) const {
    auto it = same.find(value);
    return it == same.end() ? nullptr : it->second;
  }
};

// BatchDivergence::what of a batch constant that no tensor the op takes has as a size.
constexpr const char* kNoTensorHasIt = "a size of no tensor it takes";

class Aligner {
 public:
  Aligner(const Recording& a, const Recording& b, int64_t batch_a, int64_t batch_b)
      : a_(a), b_(b), batch_a_(batch_a), batch_b_(batch_b) {}

  Alignment run() {
    const auto inputs_a = a_.graph->inputs();
    const auto inputs_b = b_.graph->inputs();
    jit::Node* first = next(a_.graph->nodes().begin(), a_.graph->return_node());
    if (inputs_a.size() != inputs_b.size()) return differs(first, "other inputs");
    for (size_t i = 0; i < inputs_a.size(); ++i) out_.same[inputs_a[i]] = inputs_b[i];
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
        if (!(a_done && b_done))
          return differs(a_done ? last : *a, a_done ? "more ops" : "fewer ops");
        break;
      }
      if (const char* what = mismatch(*a, *b)) return differs(*a, what);
      last = *a;
      ++a;
      ++b;
    }
    if (a_.outputs.size() != b_.outputs.size()) return differs(last, "other outputs");
    for (size_t i = 0; i < a_.outputs.size(); ++i) {
      const auto& [key_a, value_a] = a_.outputs[i];
      const auto& [key_b, value_b] = b_.outputs[i];
      if (key_a != key_b || out_.counterpart(value_a) != value_b) {
        return differs(value_a->node(), "other outputs");
      }
    }
    return std::move(out_);
  }

 private:
  static jit::graph_node_list::iterator skip_constants(jit::graph_node_list::iterator it,
                                                       const jit::Node* end) {
    while (*it != end && (*it)->kind() == c10::prim::Constant) ++it;
    return it;
  }
  static jit::Node* next(jit::graph_node_list::iterator it, const jit::Node* end) {
    return *skip_constants(it, end);
  }

  Alignment differs(const jit::Node* node, std::string what) {
    out_.divergence = BatchDivergence{node, batch_b_, std::move(what)};
    return std::move(out_);
  }

  // Why `a` and `b` are not the same op on counterpart inputs; null when they are.
  const char* mismatch(jit::Node* a, const jit::Node* b) {
    if (a->kind() != b->kind() || a->inputs().size() != b->inputs().size() ||
        a->outputs().size() != b->outputs().size()) {
      return "another op";
    }
    const auto read_a = a_.reads.find(a);
    const auto read_b = b_.reads.find(b);
    if ((read_a == a_.reads.end()) != (read_b == b_.reads.end())) return "another op";
    if (read_a != a_.reads.end() && read_a->second.key != read_b->second.key) {
      return "another key";
    }
    for (size_t i = 0; i < a->inputs().size(); ++i) {
      const jit::Value* in_a = a->input(i);
      const jit::Value* in_b = b->input(i);
      if (is_prim_constant(in_a) != is_prim_constant(in_b)) return "another input";
      if (!is_prim_constant(in_a)) {
        if (out_.counterpart(in_a) != in_b) return "another input";
        continue;
      }
      const c10::IValue value_a = *jit::toIValue(in_a);
      const c10::IValue value_b = *jit::toIValue(in_b);
      if (value_a.isInt() && value_b.isInt() && value_a.toInt() == batch_a_ &&
          value_b.toInt() == batch_b_) {
        out_.patches.push_back({a, i});
        continue;
      }
      if (value_a.isTensor() && value_b.isTensor()) {
        // IValue's == on tensors asks for one bool of their elementwise comparison.
        const at::Tensor& ta = value_a.toTensor();
        const at::Tensor& tb = value_b.toTensor();
        if (ta.sizes() != tb.sizes() || ta.scalar_type() != tb.scalar_type() ||
            !at::equal(ta, tb)) {
          return "a constant";
        }
        continue;
      }
      if (value_a.tagKind() != value_b.tagKind() || !(value_a == value_b)) return "a constant";
    }
    for (size_t i = 0; i < a->outputs().size(); ++i) out_.same[a->output(i)] = b->output(i);
    return nullptr;
  }

  const Recording& a_;
  const Recording& b_;
  int64_t batch_a_, batch_b_;
  Alignment out_;
};

// Replaces the patched constant by `size = x.size(d)`, x a tensor the op takes whose
// dimension d follows the batch. False when the op takes none.
bool place_size_node(Recording& traced, const Alignment& first, int64_t batch, int64_t probe,
                     Patch patch) {
  jit::Node* op = patch.user;
  if (patch.user->kind() == c10::prim::ListConstruct) {
    const auto& uses = patch.user->output()->uses();
    if (uses.size() != 1) return false;
    op = uses[0].user;
  }
  for (jit::Value* input : op->inputs()) {
    const jit::Value* other = first.counterpart(input);
    if (!other || input->node()->kind() == c10::prim::Param) continue;  // parameters have no batch
    const auto dims = following_dims(input, other, batch, probe);
    if (dims.empty() || !input->node()->isBefore(patch.user)) continue;
    jit::Graph& graph = *traced.graph;
    jit::WithInsertPoint here(patch.user);
    jit::Value* dim = graph.insertConstant(dims.front());
    jit::Node* size = graph.insertNode(graph.create(c10::aten::size, {input, dim}));
    size->output()->setType(c10::IntType::get());
    patch.user->replaceInput(patch.input, size->output());
    auto call = traced.node_call.find(patch.user);
    if (call != traced.node_call.end()) {
      traced.node_call[size] = call->second;
      auto& nodes = traced.calls[call->second].nodes;
      nodes.insert(std::find(nodes.begin(), nodes.end(), patch.user), size);
    }
    return true;
  }
  return false;
}

}  // namespace

std::vector<int64_t> dynamic_batch_probes(int64_t batch, const std::vector<int64_t>& probes) {
  if (probes.empty()) {
    if (batch == 1) return {2, 7};
    return {batch + 1, 1, 4 * batch + 3};
  }
  for (size_t i = 0; i < probes.size(); ++i) {
    const int64_t probe = probes[i];
    if (probe <= 0 || probe == batch ||
        std::find(probes.begin(), probes.begin() + static_cast<std::ptrdiff_t>(i), probe) !=
            probes.begin() + static_cast<std::ptrdiff_t>(i)) {
      fail<TraceError>(
          "TraceOptions::batch_probes: {} is not a batch to probe: each must be positive, "
          "differ from the example's batch ({}) and appear once",
          probe, batch);
    }
  }
  return probes;
}

std::optional<BatchDivergence> generalise_batch(Recording& traced, int64_t batch,
                                                const std::vector<Recording>& probes,
                                                const std::vector<int64_t>& probe_batches) {
  std::vector<Alignment> alignments;
  for (size_t i = 0; i < probes.size(); ++i) {
    alignments.push_back(Aligner(traced, probes[i], batch, probe_batches[i]).run());
    if (alignments.back().divergence) return alignments.back().divergence;
  }
  if (alignments.empty()) return std::nullopt;
  const Alignment& first = alignments.front();
  // The dimensions that follow the batch, as the first probe shows them.
  std::unordered_map<const jit::Value*, std::vector<int64_t>> dims;
  for (const auto& [a_value, b_value] : first.same) {
    auto found = following_dims(a_value, b_value, batch, probe_batches.front());
    if (!found.empty()) dims[a_value] = std::move(found);
  }
  // Every other probe agrees on which constants are the batch. (The same ops on the same
  // constants are the same program; the shapes they give follow from it.)
  for (size_t i = 1; i < alignments.size(); ++i) {
    const Alignment& other = alignments[i];
    const int64_t probe = probe_batches[i];
    for (size_t p = 0; p < std::max(first.patches.size(), other.patches.size()); ++p) {
      if (p >= first.patches.size() || p >= other.patches.size() ||
          !(first.patches[p] == other.patches[p])) {
        const Patch& at = p < other.patches.size() ? other.patches[p] : first.patches[p];
        return BatchDivergence{at.user, probe, "a constant"};
      }
    }
  }
  for (const Patch& patch : first.patches) {
    if (!place_size_node(traced, first, batch, probe_batches.front(), patch)) {
      return BatchDivergence{patch.user, probe_batches.front(), kNoTensorHasIt};
    }
  }
  traced.batch_dims = std::move(dims);
  return std::nullopt;
}

ContractRecording record_with_contract(TensorDictModuleBase& module, const TensorDict& example,
                                       const std::string& strip_prefix,
                                       const TraceOptions& options) {
  ContractRecording out;
  out.batch = example_batch(example);
  if (options.dynamic_batch && (!out.batch || *out.batch == 0)) {
    fail<TraceError>(
        "{}: a dynamic batch was asked for, but the example has {}: trace with an example "
        "whose tensors share a leading batch size of at least 1 (or give the TensorDict a "
        "batch size)",
        module.describe(), out.batch ? "batch 0 (no row to repeat)" : "no batch size");
  }
  out.recording = record(module, example, strip_prefix, options);
  if (out.batch) out.recorded.push_back(*out.batch);
  if (!options.dynamic_batch) return out;

  const int64_t batch = *out.batch;
  const std::vector<int64_t> probe_batches = dynamic_batch_probes(batch, options.batch_probes);
  std::vector<Recording> probes;
  for (const int64_t probe : probe_batches) {
    try {
      probes.push_back(record(module, resized(example, batch, probe), strip_prefix, options));
    } catch (const TraceError& error) {
      fail<TraceError>(
          "{}: a dynamic batch is checked by recording the pipeline at batches {} besides the "
          "example's {}, and it fails at batch {}: {}\n(a pipeline that cannot run there, as "
          "BatchNorm in training cannot at batch 1, names the batches to check in "
          "TraceOptions::batch_probes; or trace with a static batch)",
          module.describe(), fmt::format("{}", fmt::join(probe_batches, ", ")), batch, probe,
          error.what());
    }
    out.recorded.push_back(probe);
  }
  out.divergence = generalise_batch(out.recording, batch, probes, probe_batches);
  return out;
}

void refuse_divergence(const ContractRecording& recorded, const BuiltGraph& built,
                       const std::string& subject) {
  const BatchDivergence& divergence = *recorded.divergence;
  // The printed node of the first op that differs, or of the next op that has one (a list
  // or constant folds into the op reading it).
  std::string where = "its outputs";
  for (const jit::Node* node = divergence.node; node && node->kind() != c10::prim::Return;
       node = node->next()) {
    auto it = built.origin.find(node);
    if (it == built.origin.end()) continue;
    const Node& shown = *it->second;
    where = "%" + shown.name() +
            (shown.meta().td_module.empty() ? "" : " (module " + shown.meta().td_module + ")");
    break;
  }
  const std::string why =
      divergence.what == kNoTensorHasIt
          ? ": the batch is a size there, but of no tensor the op takes, so no size node can "
            "stand for it"
          : " (" + divergence.what + "), so the pipeline branches or loops on the batch size there";
  fail<TraceError>(
      "{}: no dynamic batch: the recordings at batch {} and at batch {} differ at {}{}; trace "
      "with a static batch (the default), or compute it with tensor ops",
      subject, *recorded.batch, divergence.batch, where, why);
}

std::optional<BatchSpecialisation> specialisation_of(const ContractRecording& recorded) {
  if (!recorded.batch || recorded.recorded.size() > 1) return std::nullopt;
  return BatchSpecialisation{*recorded.batch, "", ""};
}

}  // namespace tdfx::detail
