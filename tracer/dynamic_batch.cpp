#include "tdfx/tracer/dynamic_batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/tracer/leaf_calls.h"
#include "tdfx/tracer/program_pass.h"

namespace tdfx::detail {
namespace {

// The dimensions of `a` (recorded at batch `batch_a`) that are `batch_b` in `b`, its
// counterpart in the recording at batch_b.
std::vector<int64_t> following_dims(const Node& a, const Node& b, int64_t batch_a,
                                    int64_t batch_b) {
  const auto& sa = a.meta().tensor.shape;
  const auto& sb = b.meta().tensor.shape;
  if (!sa || !sb || sa->size() != sb->size()) return {};
  std::vector<int64_t> dims;
  for (size_t i = 0; i < sa->size(); ++i) {
    if ((*sa)[i] == batch_a && (*sb)[i] == batch_b) dims.push_back(static_cast<int64_t>(i));
  }
  return dims;
}

// An integer argument of `user` that is the batch in one recording and the other's batch in
// the other: argument `arg`, or item `item` of that list argument.
struct Patch {
  Node* user = nullptr;
  size_t arg = 0;
  std::optional<size_t> item;
  bool operator==(const Patch& other) const {
    return user == other.user && arg == other.arg && item == other.item;
  }
};

// Two recordings of one module, at batch A (`a`, the example's) and batch B, walked node by
// node.
struct Alignment {
  std::optional<BatchDivergence> divergence;
  std::vector<Patch> patches;
  // Each node of `a` and its counterpart in `b`.
  std::unordered_map<const Node*, const Node*> same;

  const Node* counterpart(const Node* node) const {
    auto it = same.find(node);
    return it == same.end() ? nullptr : it->second;
  }
};

// BatchDivergence::what of a batch integer that no tensor the op takes has as a size.
constexpr const char* kNoTensorHasIt = "a size of no tensor it takes";

class Aligner {
 public:
  Aligner(const PipelineRecording& a, const PipelineRecording& b, int64_t batch_a, int64_t batch_b)
      : a_(a), b_(b), batch_a_(batch_a), batch_b_(batch_b) {
    for (const RecordedRead& read : a.reads) reads_a_[read.input] = &read;
    for (const RecordedRead& read : b.reads) reads_b_[read.input] = &read;
  }

  Alignment run() {
    const std::vector<Node*> a = a_.graph.node_list();
    const std::vector<Node*> b = b_.graph.node_list();
    const Node* last = nullptr;
    for (size_t i = 0;; ++i) {
      const bool a_done = a[i]->op() == OpCode::kOutput;
      const bool b_done = b[i]->op() == OpCode::kOutput;
      if (a_done || b_done) {
        // One recording ran more ops (a loop over the batch): its last common op is where.
        if (!(a_done && b_done))
          return differs(a_done ? last : a[i], a_done ? "more ops" : "fewer ops");
        if (a_.out_keys != b_.out_keys || compare_args(a[i], b[i]) != nullptr) {
          return differs(a[i], "other outputs");
        }
        break;
      }
      if (const char* what = mismatch(a[i], b[i])) return differs(a[i], what);
      out_.same[a[i]] = b[i];
      last = a[i];
    }
    // Placeholders come first; where each key was read is checked once the ops are aligned.
    for (const RecordedRead& read_a : a_.reads) {
      const RecordedRead& read_b = *reads_b_.at(counterpart(read_a.input));
      const bool same_place =
          read_a.after ? counterpart(read_a.after) == read_b.after : read_b.after == nullptr;
      if (!same_place) return differs(read_a.input, "another op");
    }
    return std::move(out_);
  }

 private:
  Alignment differs(const Node* node, std::string what) {
    out_.divergence = BatchDivergence{node, batch_b_, std::move(what)};
    return std::move(out_);
  }

  // Why `a` and `b` are not the same node on counterpart inputs; null when they are.
  const char* mismatch(Node* a, const Node* b) {
    if (a->op() != b->op() || a->target().str() != b->target().str() ||
        a->args().size() != b->args().size()) {
      return "another op";
    }
    if (a->op() == OpCode::kPlaceholder) {
      const RecordedRead& read_a = *reads_a_.at(a);
      const RecordedRead& read_b = *reads_b_.at(b);
      return read_a.key == read_b.key ? nullptr : "another key";
    }
    return compare_args(a, b);
  }

  const Node* counterpart(const Node* node) const { return out_.counterpart(node); }

  const char* compare_args(Node* a, const Node* b) {
    for (size_t i = 0; i < a->args().size(); ++i) {
      if (const char* what = compare(a->args()[i], b->args()[i], {a, i, std::nullopt})) {
        return what;
      }
    }
    return nullptr;
  }

  const char* compare(const Argument& a, const Argument& b, const Patch& at) {
    if (a.value.index() != b.value.index())
      return a.node() || b.node() ? "another input" : "a constant";
    if (a.is<Node*>()) return counterpart(a.node()) == b.node() ? nullptr : "another input";
    if (a.is<ArgumentList>()) {
      const auto& la = a.as<ArgumentList>().items;
      const auto& lb = b.as<ArgumentList>().items;
      if (la.size() != lb.size()) return "a constant";
      for (size_t j = 0; j < la.size(); ++j) {
        if (const char* what = compare(la[j], lb[j], {at.user, at.arg, j})) return what;
      }
      return nullptr;
    }
    if (a.is<int64_t>()) {
      if (a.as<int64_t>() == batch_a_ && b.as<int64_t>() == batch_b_) {
        out_.patches.push_back(at);
        return nullptr;
      }
      return a.as<int64_t>() == b.as<int64_t>() ? nullptr : "a constant";
    }
    if (a.is<double>()) {
      // Bit for bit: a NaN constant is the same constant.
      const double da = a.as<double>(), db = b.as<double>();
      return std::memcmp(&da, &db, sizeof da) == 0 ? nullptr : "a constant";
    }
    const bool equal = std::visit(
        [&](const auto& va) {
          using T = std::decay_t<decltype(va)>;
          if constexpr (std::is_same_v<T, Node*> || std::is_same_v<T, ArgumentList>) {
            return false;  // handled above
          } else {
            return va == std::get<T>(b.value);
          }
        },
        a.value);
    return equal ? nullptr : "a constant";
  }

  const PipelineRecording& a_;
  const PipelineRecording& b_;
  int64_t batch_a_, batch_b_;
  std::unordered_map<const Node*, const RecordedRead*> reads_a_, reads_b_;
  Alignment out_;
};

// Replaces the patched integer by `size = x.size(d)`, x a tensor the op takes whose dimension
// d follows the batch. False when the op takes none.
bool place_size_node(PipelineRecording& traced, const Alignment& first, int64_t batch,
                     int64_t probe, const Patch& patch) {
  Node* user = patch.user;
  for (Node* input : user->input_nodes()) {
    const Node* other = first.counterpart(input);
    if (!other || input->op() == OpCode::kGetAttr) continue;  // parameters have no batch
    const auto dims = following_dims(*input, *other, batch, probe);
    if (dims.empty()) continue;
    Node* size;
    {
      auto guard = traced.graph.inserting_before(user);
      size = traced.graph.create_node(OpCode::kCallFunction, Target::aten("aten::size.int"),
                                      {input, dims.front()}, {}, "size");
    }
    traced.node_call.set(size, traced.node_call.get(user));
    traced.node_child.set(size, traced.node_child.get(user));
    if (patch.item) {
      ArgumentList list = user->args().at(patch.arg).as<ArgumentList>();
      list.items.at(*patch.item) = size;
      user->set_arg(patch.arg, list);
    } else {
      user->set_arg(patch.arg, size);
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

std::optional<BatchDivergence> generalise_batch(PipelineRecording& traced, int64_t batch,
                                                const std::vector<PipelineRecording>& probes,
                                                const std::vector<int64_t>& probe_batches) {
  std::vector<Alignment> alignments;
  for (size_t i = 0; i < probes.size(); ++i) {
    alignments.push_back(Aligner(traced, probes[i], batch, probe_batches[i]).run());
    if (alignments.back().divergence) return alignments.back().divergence;
  }
  if (alignments.empty()) return std::nullopt;
  const Alignment& first = alignments.front();
  // Every other probe agrees on which integers are the batch. (The same ops on the same
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
  // The dimensions that follow the batch, as the first probe shows them.
  for (Node* node : traced.graph.nodes()) {
    const Node* other = first.counterpart(node);
    if (!other) continue;
    auto dims = following_dims(*node, *other, batch, probe_batches.front());
    if (!dims.empty()) node->meta().tensor.batch_dims = std::move(dims);
  }
  for (const Patch& patch : first.patches) {
    if (!place_size_node(traced, first, batch, probe_batches.front(), patch)) {
      return BatchDivergence{patch.user, probe_batches.front(), kNoTensorHasIt};
    }
  }
  traced.graph.lint();
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
  out.layout = pipeline_layout(module, strip_prefix);
  const PipelineLayout& layout = out.layout;
  out.recording = record_pipeline(module, example, layout);
  if (out.batch) out.recorded.push_back(*out.batch);
  if (!options.dynamic_batch) return out;

  const int64_t batch = *out.batch;
  const std::vector<int64_t> probe_batches = dynamic_batch_probes(batch, options.batch_probes);
  std::vector<PipelineRecording> probes;
  for (const int64_t probe : probe_batches) {
    try {
      probes.push_back(record_pipeline(module, resized(example, batch, probe), layout));
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

void refuse_divergence(ContractRecording& recorded, const LiveNodes& live,
                       const StateUpdates& updates, const TraceOptions& options,
                       const std::string& subject) {
  PipelineRecording& recording = recorded.recording;
  describe_modules(recording);
  const LeafCalls leaves = find_leaf_calls(recording.graph, recording, live, updates, options);
  const FxView view = fx_view(recording.graph, recording, live, leaves, updates, options);
  const BatchDivergence& divergence = *recorded.divergence;
  // The printed node of the first op that differs, or of the next op that has one (a
  // parameter read folds into the op reading it).
  std::string where = "its outputs";
  const std::vector<Node*> nodes = recorded.recording.graph.node_list();
  auto from = std::find(nodes.begin(), nodes.end(), divergence.node);
  for (auto it = from; it != nodes.end() && (*it)->op() != OpCode::kOutput; ++it) {
    auto shown_at = view.origin.find(*it);
    if (shown_at == view.origin.end()) continue;
    const Node& shown = *shown_at->second;
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
