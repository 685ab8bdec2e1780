#include "tdfx/tracer/dynamic_batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include "tdfx/core/error.h"
#include "tdfx/tracer/leaf_calls.h"
#include "tdfx/tracer/program_pass.h"

namespace tdfx::detail {
namespace {

// A (batch, value) sample of a size: the example's first, then one per probe.
using SizePoints = std::vector<std::pair<int64_t, int64_t>>;

// The function of the batch that `points` follow: the batch itself (accepted from two
// recordings, as a caller naming one probe gets), or, fitted on the first two and checked on
// every further one, s0*a + c (a >= 1) or s0//d. nullopt when none does.
std::optional<SizeExpr> fit_size(const SizePoints& points) {
  auto fits = [&](const SizeExpr& expr) {
    for (const auto& [batch, value] : points) {
      if (expr.at(batch) != value) return false;
    }
    return true;
  };
  if (fits(SizeExpr{})) return SizeExpr{};
  if (points.size() < 3) return std::nullopt;
  const auto [b0, v0] = points[0];
  const auto [b1, v1] = points[1];
  int64_t rise = 0, run = 0;
  if (!__builtin_sub_overflow(v1, v0, &rise) && !__builtin_sub_overflow(b1, b0, &run) && run != 0 &&
      rise % run == 0 && rise / run >= 1) {
    const int64_t scale = rise / run;
    int64_t scaled = 0, offset = 0;
    if (!__builtin_mul_overflow(scale, b0, &scaled) &&
        !__builtin_sub_overflow(v0, scaled, &offset)) {
      const SizeExpr affine{scale, 1, offset};
      if (fits(affine)) return affine;
    }
  }
  int64_t largest = 0;
  for (const auto& point : points) largest = std::max(largest, point.first);
  for (int64_t divisor = 2; divisor <= largest; ++divisor) {
    const SizeExpr quotient{1, divisor, 0};
    if (fits(quotient)) return quotient;
  }
  return std::nullopt;
}

// BatchDivergence::what of a batch integer that no tensor before it has as a size.
constexpr const char* kNoTensorHasIt = "a size of no tensor before it";

// An integer argument of `user`: argument `arg`, or item `item` of that list argument.
struct IntSlot {
  Node* user = nullptr;
  size_t arg = 0;
  std::optional<size_t> item;
};

// An integer argument whose value in another recording differs: that value.
struct IntDiff {
  IntSlot at;
  int64_t value = 0;
};

// Two recordings of one module, at batch A (`a`, the example's) and batch B, walked node by
// node until they part.
struct Alignment {
  std::optional<BatchDivergence> divergence;
  std::vector<IntDiff> ints;
  // Each node of `a` and its counterpart in `b`, up to where they part.
  std::unordered_map<const Node*, const Node*> same;

  const Node* counterpart(const Node* node) const {
    auto it = same.find(node);
    return it == same.end() ? nullptr : it->second;
  }
};

class Aligner {
 public:
  Aligner(const PipelineRecording& a, const PipelineRecording& b, int64_t batch_b)
      : a_(a), b_(b), batch_b_(batch_b) {
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
        out_.same[a[i]] = b[i];
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

  // Why `a` and `b` are not the same node on counterpart inputs; null when they are (integers
  // may differ: whether they are a function of the batch is asked once all recordings are in).
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

  const char* compare(const Argument& a, const Argument& b, const IntSlot& at) {
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
      if (a.as<int64_t>() != b.as<int64_t>()) out_.ints.push_back({at, b.as<int64_t>()});
      return nullptr;
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
  int64_t batch_b_;
  std::unordered_map<const Node*, const RecordedRead*> reads_a_, reads_b_;
  Alignment out_;
};

const Argument& slot_argument(const IntSlot& slot) {
  const Argument& arg = slot.user->args().at(slot.arg);
  return slot.item ? arg.as<ArgumentList>().items.at(*slot.item) : arg;
}

// An integer argument that differs between the recordings, with its value in each (the
// example's first, then the probes' in order).
struct VaryingInt {
  IntSlot at;
  std::vector<int64_t> values;
};

// The node that stands for the batch at `user`: `x.size(d)` of a tensor the op takes whose
// dimension d is the batch; else of the nearest tensor before it in the same call that has
// one; else of the first input read that has one. Null when none has.
Node* batch_source(const PipelineRecording& traced, const std::vector<Node*>& order, size_t user_at,
                   int64_t& dim) {
  auto usable = [&](const Node* node) {
    if (node->op() == OpCode::kGetAttr || node->meta().tensor.batch_dims.empty()) return false;
    dim = node->meta().tensor.batch_dims.front();
    return true;
  };
  Node* user = order[user_at];
  for (Node* input : user->input_nodes()) {
    if (usable(input)) return input;
  }
  const size_t call = traced.node_call.get(user);
  for (size_t i = user_at; i-- > 0;) {
    if (traced.node_call.get(order[i]) == call && usable(order[i])) return order[i];
  }
  for (Node* node : order) {
    if (node->op() == OpCode::kPlaceholder && usable(node)) return node;
  }
  return nullptr;
}

// Replaces the integer at `slot` by the nodes computing `size` from the batch (`size =
// x.size(0)`, then `mul = size * 2`, ...), made just before its user. False when no tensor
// before it has a batch dimension to take the size of.
bool place_size_nodes(PipelineRecording& traced, const std::vector<Node*>& order, size_t user_at,
                      const IntSlot& slot, const SizeExpr& size) {
  Node* user = slot.user;
  int64_t dim = 0;
  Node* source = batch_source(traced, order, user_at, dim);
  if (!source) return false;
  Node* value = nullptr;
  {
    auto guard = traced.graph.inserting_before(user);
    auto make = [&](Target target, Args args, const char* name) {
      value = traced.graph.create_node(OpCode::kCallFunction, std::move(target), std::move(args),
                                       {}, name);
      traced.node_call.set(value, traced.node_call.get(user));
      traced.node_child.set(value, traced.node_child.get(user));
    };
    make(Target::aten("aten::size.int"), {source, dim}, "size");
    using Op = Target::SizeArith;
    if (size.scale != 1) make(Target::size_arith(Op::kMul), {value, size.scale}, "mul");
    if (size.divisor != 1)
      make(Target::size_arith(Op::kFloorDiv), {value, size.divisor}, "floordiv");
    if (size.offset > 0) make(Target::size_arith(Op::kAdd), {value, size.offset}, "add");
    if (size.offset < 0) make(Target::size_arith(Op::kSub), {value, -size.offset}, "sub");
  }
  if (slot.item) {
    ArgumentList list = user->args().at(slot.arg).as<ArgumentList>();
    list.items.at(*slot.item) = value;
    user->set_arg(slot.arg, list);
  } else {
    user->set_arg(slot.arg, value);
  }
  return true;
}

// Marks the dimensions of every node's tensor that are a function of the batch in all the
// recordings (TensorMeta::batch_dims for the batch itself, derived_dims for others).
void mark_batch_dims(PipelineRecording& traced, const SizePoints& batches,
                     const std::vector<Alignment>& alignments) {
  for (Node* node : traced.graph.nodes()) {
    const auto& shape = node->meta().tensor.shape;
    if (!shape) continue;
    std::vector<const std::vector<int64_t>*> shapes;
    for (const Alignment& alignment : alignments) {
      const Node* other = alignment.counterpart(node);
      const auto* other_shape = other ? &other->meta().tensor.shape : nullptr;
      if (!other_shape || !*other_shape || (*other_shape)->size() != shape->size()) break;
      shapes.push_back(&**other_shape);
    }
    if (shapes.size() != alignments.size()) continue;
    TensorMeta& meta = node->meta().tensor;
    for (size_t d = 0; d < shape->size(); ++d) {
      SizePoints points{{batches[0].first, (*shape)[d]}};
      bool varies = false;
      for (size_t i = 0; i < shapes.size(); ++i) {
        points.emplace_back(batches[i + 1].first, (*shapes[i])[d]);
        varies |= (*shapes[i])[d] != (*shape)[d];
      }
      if (!varies) continue;
      const std::optional<SizeExpr> size = fit_size(points);
      if (!size) continue;
      if (size->is_batch()) {
        meta.batch_dims.push_back(static_cast<int64_t>(d));
      } else {
        meta.derived_dims.push_back({static_cast<int64_t>(d), *size});
      }
    }
  }
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
  if (probes.empty()) return std::nullopt;
  std::vector<Alignment> alignments;
  for (size_t i = 0; i < probes.size(); ++i) {
    alignments.push_back(Aligner(traced, probes[i], probe_batches[i]).run());
  }
  const std::vector<Node*> order = traced.graph.node_list();
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  // Where the recordings first part in their ops (the earliest over the probes): only the
  // integers before it were recorded at every batch.
  const BatchDivergence* parting = nullptr;
  for (const Alignment& alignment : alignments) {
    if (alignment.divergence &&
        (!parting || position.at(alignment.divergence->node) < position.at(parting->node))) {
      parting = &*alignment.divergence;
    }
  }
  const size_t parting_at = parting ? position.at(parting->node) : order.size();
  // The integers that differ, in program order, with their value in every recording.
  std::map<std::tuple<size_t, size_t, int64_t>, VaryingInt> varying;
  for (size_t i = 0; i < alignments.size(); ++i) {
    for (const IntDiff& diff : alignments[i].ints) {
      const size_t at = position.at(diff.at.user);
      if (at >= parting_at) continue;
      auto key =
          std::make_tuple(at, diff.at.arg, diff.at.item ? static_cast<int64_t>(*diff.at.item) : -1);
      auto [it, added] = varying.try_emplace(key);
      if (added) {
        it->second.at = diff.at;
        it->second.values.assign(probes.size() + 1, slot_argument(diff.at).as<int64_t>());
      }
      it->second.values[i + 1] = diff.value;
    }
  }
  SizePoints batches{{batch, batch}};
  for (const int64_t probe : probe_batches) batches.emplace_back(probe, probe);
  std::vector<std::pair<const VaryingInt*, SizeExpr>> sizes;
  for (const auto& [key, slot] : varying) {
    SizePoints points;
    for (size_t i = 0; i < slot.values.size(); ++i)
      points.emplace_back(batches[i].first, slot.values[i]);
    const std::optional<SizeExpr> size = fit_size(points);
    if (!size) {
      // Named at the first batch whose recording holds another value.
      size_t i = 1;
      while (slot.values[i] == slot.values[0]) ++i;
      std::vector<int64_t> at(batches.size());
      for (size_t j = 0; j < batches.size(); ++j) at[j] = batches[j].first;
      std::string what = fmt::format("an integer argument is {} at batches {}, which ",
                                     fmt::join(slot.values, ", "), fmt::join(at, ", "));
      what += points.size() < 3
                  ? "two recordings cannot tell a function of the batch (s0*a + c and s0//d "
                    "are checked on a third: add a batch to TraceOptions::batch_probes)"
                  : "is no function of the batch (s0*a + c, s0//d)";
      return BatchDivergence{slot.at.user, probe_batches[i - 1], std::move(what), true};
    }
    sizes.emplace_back(&slot, *size);
  }
  if (parting) return *parting;
  mark_batch_dims(traced, batches, alignments);
  for (const auto& [slot, size] : sizes) {
    if (!place_size_nodes(traced, order, position.at(slot->at.user), slot->at, size)) {
      return BatchDivergence{slot->at.user, probe_batches.front(), kNoTensorHasIt};
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
      divergence.integer ? ": " + divergence.what
      : divergence.what == kNoTensorHasIt
          ? ": a size there follows the batch, but no tensor before it has a batch dimension "
            "to take it from"
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
