// Comparing two exported programs: labels, alignment on the longest common subsequence,
// pairing what is left between aligned nodes, and the changes of each pair.

#include "tdfx/export/program_diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string_view>
#include <unordered_map>

#include "tdfx/codegen/python_code.h"
#include "tdfx/core/dtype_names.h"
#include "tdfx/export/weight_compare.h"
#include "tdfx/graph/graph_printer.h"

namespace tdfx {
namespace {

/// The most cells of the alignment's table (two bytes each) between the common head and tail
/// of the two programs; past it the alignment is greedy (each node of A takes the next node
/// of B with its label).
constexpr size_t kMaxAlignmentCells = size_t{16} << 20;

std::string shape_text(at::IntArrayRef sizes) {
  return fmt::format("[{}]", fmt::join(sizes, ", "));
}

CodeOptions export_style() {
  CodeOptions options;
  options.style = CodeStyle::kExport;
  return options;
}

/// `f32[8, 4]`.
std::string type_text(const at::Tensor& t) {
  return dtype_short(t.scalar_type()) + shape_text(t.sizes());
}

/// The dtype, shape and a hash of the bytes of a weight: equal weights have equal prints.
std::string fingerprint(const at::Tensor& tensor) {
  const at::Tensor t = tensor.detach().contiguous();
  const std::string_view bytes(static_cast<const char*>(t.data_ptr()), t.nbytes());
  return fmt::format("{}{}#{:x}", c10::toString(t.scalar_type()), shape_text(t.sizes()),
                     std::hash<std::string_view>{}(bytes));
}

/// One program as the diff reads it: its nodes in order, and what each is.
class Side {
 public:
  explicit Side(const ExportedProgram& program)
      : program_(program), lines_(node_lines(program.graph(), export_style())) {
    for (const InputSpec& spec : program.graph_signature().inputs) inputs_[spec.name] = &spec;
    for (const Node* node : program.graph().nodes()) {
      index_[node] = nodes_.size();
      by_name_[node->name()] = node;
      nodes_.push_back(node);
    }
    for (const Node* node : nodes_) labels_.push_back(label(*node));
  }

  const ExportedProgram& program() const { return program_; }
  size_t size() const { return nodes_.size(); }
  const Node& node(size_t i) const { return *nodes_[i]; }
  size_t index(const Node* node) const { return index_.at(node); }
  /// The node called `name`, null when none.
  const Node* named(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }
  const std::string& label(size_t i) const { return labels_[i]; }

  /// The node's input spec when it is a placeholder of the signature.
  const InputSpec* spec(const Node& node) const {
    if (node.op() != OpCode::kPlaceholder) return nullptr;
    auto it = inputs_.find(node.name());
    return it == inputs_.end() ? nullptr : it->second;
  }
  /// True for a parameter or buffer placeholder.
  bool is_weight(const Node& node) const {
    const InputSpec* s = spec(node);
    return s && s->kind != InputKind::kUserInput;
  }
  const at::Tensor& weight(const Node& node) const { return program_.state().at(node.name()); }

  /// The key that pairs nodes left between aligned ones: op and target (a weight's or an
  /// input's own name), or the op alone when `strict` is false (a weight and an input apart).
  std::string pairing_key(size_t i, bool strict) const {
    const Node& n = node(i);
    std::string key(to_string(n.op()));
    if (const InputSpec* s = spec(n)) key += std::string(to_string(s->kind));
    if (strict) key += ":" + n.target().str();
    return key;
  }

  /// The node's line of code, its type and its module: `relu = torch.relu(x)  # f32[1, 3] 0`.
  std::string describe(size_t i) const {
    const Node& n = node(i);
    std::string line = lines_[i];
    const size_t release = line.find(";  ");
    if (release != std::string::npos) line.resize(release);
    std::string notes = type_annotation(n);
    if (!n.meta().module_path.empty()) {
      notes += (notes.empty() ? "" : " ") + n.meta().module_path;
    }
    return notes.empty() ? line : line + "  # " + notes;
  }

 private:
  std::string label(const Node& n) const {
    if (const InputSpec* s = spec(n)) {
      if (s->kind == InputKind::kUserInput) return "input:" + s->target;
      return std::string(to_string(s->kind)) + ":" + fingerprint(weight(n));
    }
    if (n.op() == OpCode::kOutput) return "output";
    std::string out = fmt::format("{}:{}(", to_string(n.op()), n.target().str());
    for (const Argument& arg : n.args()) out += arg_label(arg) + ",";
    out += "){";
    for (const auto& [name, arg] : n.kwargs()) out += name + "=" + arg_label(arg) + ",";
    return out + "}";
  }

  /// A node argument as `%` (its name left out) or, for a weight, its fingerprint; a constant
  /// as the code prints it.
  std::string arg_label(const Argument& arg) const {
    if (const Node* node = arg.node()) return is_weight(*node) ? fingerprint(weight(*node)) : "%";
    if (arg.is<ArgumentList>()) {
      std::string out = "[";
      for (const Argument& item : arg.as<ArgumentList>().items) out += arg_label(item) + ",";
      return out + "]";
    }
    return fx_repr(arg);
  }

  const ExportedProgram& program_;
  std::vector<std::string> lines_;
  std::unordered_map<std::string, const InputSpec*> inputs_;
  std::vector<const Node*> nodes_;
  std::unordered_map<const Node*, size_t> index_;
  std::unordered_map<std::string, const Node*> by_name_;
  std::vector<std::string> labels_;
};

using Pairs = std::vector<std::pair<size_t, size_t>>;

/// Pairs of equal labels in increasing order: the longest common subsequence of a[lo_a, hi_a)
/// and b[lo_b, hi_b) when its table fits kMaxAlignmentCells, else a greedy one.
void align_middle(const std::vector<int>& a, const std::vector<int>& b, size_t lo_a, size_t hi_a,
                  size_t lo_b, size_t hi_b, Pairs& out) {
  const size_t n = hi_a - lo_a, m = hi_b - lo_b;
  if (n == 0 || m == 0) return;
  if (n * m > kMaxAlignmentCells || std::min(n, m) >= 65535) {
    std::unordered_map<int, std::vector<size_t>> positions;  // label -> b positions, reversed
    for (size_t j = hi_b; j-- > lo_b;) positions[b[j]].push_back(j);
    size_t next_b = lo_b;
    for (size_t i = lo_a; i < hi_a; ++i) {
      auto it = positions.find(a[i]);
      if (it == positions.end()) continue;
      auto& list = it->second;
      while (!list.empty() && list.back() < next_b) list.pop_back();
      if (list.empty()) continue;
      out.emplace_back(i, list.back());
      next_b = list.back() + 1;
      list.pop_back();
    }
    return;
  }
  // lcs[i][j]: the longest common subsequence of a[lo_a + i, hi_a) and b[lo_b + j, hi_b).
  std::vector<uint16_t> lcs((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint16_t& { return lcs[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      at(i, j) = a[lo_a + i] == b[lo_b + j] ? static_cast<uint16_t>(at(i + 1, j + 1) + 1)
                                            : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  for (size_t i = 0, j = 0; i < n && j < m;) {
    if (a[lo_a + i] == b[lo_b + j]) {
      out.emplace_back(lo_a + i, lo_b + j);
      ++i, ++j;
    } else if (at(i + 1, j) >= at(i, j + 1)) {
      ++i;
    } else {
      ++j;
    }
  }
}

/// The aligned pairs of the two programs' labels: the common head and tail, and between them
/// align_middle's.
Pairs align(const Side& a, const Side& b) {
  std::unordered_map<std::string, int> ids;
  auto ids_of = [&](const Side& side) {
    std::vector<int> out;
    for (size_t i = 0; i < side.size(); ++i) {
      out.push_back(ids.emplace(side.label(i), static_cast<int>(ids.size())).first->second);
    }
    return out;
  };
  const std::vector<int> la = ids_of(a), lb = ids_of(b);
  size_t head = 0;
  while (head < la.size() && head < lb.size() && la[head] == lb[head]) ++head;
  size_t tail = 0;
  while (tail < la.size() - head && tail < lb.size() - head &&
         la[la.size() - 1 - tail] == lb[lb.size() - 1 - tail]) {
    ++tail;
  }
  Pairs pairs;
  for (size_t i = 0; i < head; ++i) pairs.emplace_back(i, i);
  align_middle(la, lb, head, la.size() - tail, head, lb.size() - tail, pairs);
  for (size_t t = tail; t-- > 0;) pairs.emplace_back(la.size() - 1 - t, lb.size() - 1 - t);
  return pairs;
}

/// Pairs, in order, the nodes of a[lo_a, hi_a) and b[lo_b, hi_b) not yet matched whose
/// pairing keys agree: each node of A takes the first unmatched node of B with its key after the
/// last one taken. B's unmatched nodes are listed by key once, and each list is walked forward
/// only, so the gap costs linear time in its nodes (and a hash of each key).
void pair_gap(const Side& a, const Side& b, size_t lo_a, size_t hi_a, size_t lo_b, size_t hi_b,
              bool strict, std::vector<long>& a_to_b, std::vector<long>& b_to_a) {
  struct Positions {
    std::vector<size_t> at;  // increasing
    size_t next = 0;         // the first not yet passed
  };
  std::unordered_map<std::string, Positions> by_key;
  for (size_t j = lo_b; j < hi_b; ++j) {
    if (b_to_a[j] < 0) by_key[b.pairing_key(j, strict)].at.push_back(j);
  }
  if (by_key.empty()) return;
  size_t next_b = lo_b;
  for (size_t i = lo_a; i < hi_a; ++i) {
    if (a_to_b[i] >= 0) continue;
    const auto it = by_key.find(a.pairing_key(i, strict));
    if (it == by_key.end()) continue;
    Positions& positions = it->second;
    while (positions.next < positions.at.size() && positions.at[positions.next] < next_b) {
      ++positions.next;
    }
    if (positions.next == positions.at.size()) continue;
    const size_t j = positions.at[positions.next++];
    a_to_b[i] = static_cast<long>(j);
    b_to_a[j] = static_cast<long>(i);
    next_b = j + 1;
  }
}

// A ratio as the report prints it: `digits` significant digits, `inf`, `nan`.
std::string number_text(double value, int digits = 4) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.{}g}", value, digits);
}

/// Compares matched nodes and fills the diff.
class Differ {
 public:
  Differ(const ExportedProgram& a, const ExportedProgram& b) : a_(a), b_(b) {}

  ProgramDiff run() {
    match();
    ProgramDiff diff;
    for (size_t j = 0; j < b_.size(); ++j) {
      const long i = b_to_a_[j];
      diff.matches.emplace_back(b_.node(j).name(),
                                i < 0 ? "" : a_.node(static_cast<size_t>(i)).name());
      if (i < 0) {
        diff.added.push_back({b_.node(j).name(), b_.describe(j)});
      } else if (b_.is_weight(b_.node(j))) {
        compare_weights(static_cast<size_t>(i), j, diff);
      } else {
        std::vector<std::string> what = changes(static_cast<size_t>(i), j);
        if (!what.empty()) {
          diff.changed.push_back(
              {a_.node(static_cast<size_t>(i)).name(), b_.node(j).name(), std::move(what)});
        }
      }
    }
    for (size_t i = 0; i < a_.size(); ++i) {
      if (a_to_b_[i] < 0) diff.removed.push_back({a_.node(i).name(), a_.describe(i)});
    }
    diff.signature = signature_changes();
    diff.modules = module_changes();
    return diff;
  }

 private:
  void match() {
    a_to_b_.assign(a_.size(), -1);
    b_to_a_.assign(b_.size(), -1);
    Pairs pairs = align(a_, b_);
    for (const auto& [i, j] : pairs) {
      a_to_b_[i] = static_cast<long>(j);
      b_to_a_[j] = static_cast<long>(i);
    }
    // The gaps between aligned pairs, with sentinels before the first and after the last.
    size_t prev_a = 0, prev_b = 0;
    pairs.emplace_back(a_.size(), b_.size());
    for (const auto& [i, j] : pairs) {
      for (bool strict : {true, false})
        pair_gap(a_, b_, prev_a, i, prev_b, j, strict, a_to_b_, b_to_a_);
      prev_a = i + 1;
      prev_b = j + 1;
    }
  }

  /// The match in B of A's node, null when none.
  const Node* match_of(const Node* a_node) const {
    const long j = a_to_b_[a_.index(a_node)];
    return j < 0 ? nullptr : &b_.node(static_cast<size_t>(j));
  }

  bool same_arg(const Argument& x, const Argument& y) const {
    if (x.node() || y.node()) return x.node() && y.node() && match_of(x.node()) == y.node();
    if (x.is<ArgumentList>() && y.is<ArgumentList>()) {
      const auto& xs = x.as<ArgumentList>().items;
      const auto& ys = y.as<ArgumentList>().items;
      if (xs.size() != ys.size()) return false;
      for (size_t k = 0; k < xs.size(); ++k) {
        if (!same_arg(xs[k], ys[k])) return false;
      }
      return true;
    }
    return fx_repr(x) == fx_repr(y);
  }

  std::vector<std::string> changes(size_t i, size_t j) const {
    const Node& x = a_.node(i);
    const Node& y = b_.node(j);
    std::vector<std::string> what;
    if (!(x.target() == y.target()) && x.op() != OpCode::kPlaceholder) {
      what.push_back(fmt::format("target {} -> {}", x.target().str(), y.target().str()));
    }
    const size_t count = std::max(x.args().size(), y.args().size());
    for (size_t k = 0; k < count; ++k) {
      const bool in_x = k < x.args().size(), in_y = k < y.args().size();
      if (in_x && in_y && same_arg(x.args()[k], y.args()[k])) continue;
      what.push_back(fmt::format("argument {}: {} -> {}", k, in_x ? fx_str(x.args()[k]) : "-",
                                 in_y ? fx_str(y.args()[k]) : "-"));
    }
    const std::string kx = fx_kwargs_str(x.kwargs()), ky = fx_kwargs_str(y.kwargs());
    bool same_kwargs = x.kwargs().size() == y.kwargs().size();
    for (size_t k = 0; same_kwargs && k < x.kwargs().size(); ++k) {
      same_kwargs = x.kwargs()[k].first == y.kwargs()[k].first &&
                    same_arg(x.kwargs()[k].second, y.kwargs()[k].second);
    }
    if (!same_kwargs) what.push_back(fmt::format("keyword arguments {} -> {}", kx, ky));
    const std::string tx = type_annotation(x), ty = type_annotation(y);
    if (tx != ty) what.push_back(fmt::format("type {} -> {}", tx, ty));
    if (x.meta().module_path != y.meta().module_path) {
      what.push_back(fmt::format("module {} -> {}", x.meta().module_path, y.meta().module_path));
    }
    return what;
  }

  // A module's parameters of one dtype and shape in both programs, summed together.
  struct ModuleSums {
    detail::Norms norms;
    int64_t weights = 0, changed = 0, other_type = 0;
  };

  // The module a parameter belongs to: its path without the last part (`module.0.module`).
  ModuleSums& module_sums(const std::string& path) {
    const size_t dot = path.rfind('.');
    const std::string module = dot == std::string::npos ? "" : path.substr(0, dot);
    auto [it, added] = module_index_.emplace(module, module_sums_.size());
    if (added) module_sums_.emplace_back(module, ModuleSums{});
    return module_sums_[it->second].second;
  }

  void compare_weights(size_t i, size_t j, ProgramDiff& diff) {
    const at::Tensor& x = a_.weight(a_.node(i));
    const at::Tensor& y = b_.weight(b_.node(j));
    WeightChange change;
    change.name_a = a_.node(i).name();
    change.name_b = b_.node(j).name();
    const InputSpec* spec = b_.spec(b_.node(j));
    change.path = spec ? spec->target : b_.node(j).name();
    const bool parameter = spec && spec->kind == InputKind::kParameter;
    if (x.scalar_type() != y.scalar_type() || !x.sizes().equals(y.sizes())) {
      change.what = type_text(x) + " -> " + type_text(y);
      change.relative_change = change.cosine = std::numeric_limits<double>::quiet_NaN();
      if (parameter) ++module_sums(change.path).other_type;
      diff.weights.push_back(std::move(change));
      return;
    }
    if (x.numel() == 0) return;
    const detail::WeightSums m = detail::compare_weights(x, y);
    if (parameter) {
      ModuleSums& module = module_sums(change.path);
      module.norms += m.norms;
      ++module.weights;
      module.changed += m.equal ? 0 : 1;
    }
    if (m.equal) return;
    change.relative_change = detail::relative_change(m.norms);
    change.cosine = detail::cosine(m.norms);
    change.max_abs = m.max_abs;
    change.max_rel = m.max_rel;
    change.non_finite = m.non_finite;
    change.what =
        fmt::format("relative change {}, cosine {}; max abs diff {:.3g}, max rel diff {:.3g}",
                    number_text(change.relative_change), number_text(change.cosine, 6),
                    change.max_abs, change.max_rel);
    if (change.non_finite > 0) {
      change.what +=
          fmt::format(", {} non-finite element{} differ{}", change.non_finite,
                      change.non_finite == 1 ? "" : "s", change.non_finite == 1 ? "s" : "");
    }
    diff.weights.push_back(std::move(change));
  }

  // The modules with a weight whose value changed, largest relative change first (ties in
  // the order B holds them).
  std::vector<ModuleChange> module_changes() const {
    std::vector<ModuleChange> out;
    for (const auto& [path, sums] : module_sums_) {
      if (sums.changed == 0) continue;
      out.push_back({path, detail::relative_change(sums.norms), detail::cosine(sums.norms),
                     sums.weights, sums.changed, sums.other_type});
    }
    std::stable_sort(out.begin(), out.end(), [](const ModuleChange& p, const ModuleChange& q) {
      const double a = std::isnan(p.relative_change) ? -1 : p.relative_change;
      const double b = std::isnan(q.relative_change) ? -1 : q.relative_change;
      return a > b;
    });
    return out;
  }

  std::vector<std::string> signature_changes() const {
    std::vector<std::string> out;
    const GraphSignature& sa = a_.program().graph_signature();
    const GraphSignature& sb = b_.program().graph_signature();
    auto user_inputs = [](const GraphSignature& s) {
      std::vector<const InputSpec*> v;
      for (const InputSpec& spec : s.inputs) {
        if (spec.kind == InputKind::kUserInput) v.push_back(&spec);
      }
      return v;
    };
    for (const InputSpec* in_b : user_inputs(sb)) {
      const Node* node_b = b_.named(in_b->name);
      const long i = node_b ? b_to_a_[b_.index(node_b)] : -1;
      const InputSpec* in_a = i < 0 ? nullptr : a_.spec(a_.node(static_cast<size_t>(i)));
      if (!in_a) {
        out.push_back(fmt::format("input {} added", in_b->target));
        continue;
      }
      if (in_a->target != in_b->target) {
        out.push_back(fmt::format("input {} renamed to {}", in_a->target, in_b->target));
      }
      if (in_a->batch_dims != in_b->batch_dims) {
        out.push_back(fmt::format("input {}: dimensions that follow the batch [{}] -> [{}]",
                                  in_b->target, fmt::join(in_a->batch_dims, ", "),
                                  fmt::join(in_b->batch_dims, ", ")));
      }
    }
    for (const InputSpec* in_a : user_inputs(sa)) {
      const Node* node_a = a_.named(in_a->name);
      if (!node_a || a_to_b_[a_.index(node_a)] < 0) {
        out.push_back(fmt::format("input {} removed", in_a->target));
      }
    }
    // Outputs by key, then a key whose node is the match of a key that went: renamed.
    std::vector<bool> a_used(sa.outputs.size(), false);
    std::vector<const OutputSpec*> b_left;
    for (const OutputSpec& ob : sb.outputs) {
      size_t k = 0;
      while (k < sa.outputs.size() && !(sa.outputs[k].key == ob.key)) ++k;
      if (k == sa.outputs.size()) {
        b_left.push_back(&ob);
        continue;
      }
      a_used[k] = true;
      const Node* from_a = a_.named(sa.outputs[k].name);
      const Node* from_b = b_.named(ob.name);
      if (!from_a || match_of(from_a) != from_b) {
        out.push_back(fmt::format("output {} now from %{} (was %{})", ob.key.joined("."), ob.name,
                                  sa.outputs[k].name));
      }
    }
    for (const OutputSpec* ob : b_left) {
      const Node* from_b = b_.named(ob->name);
      bool renamed = false;
      for (size_t k = 0; k < sa.outputs.size() && !renamed; ++k) {
        const Node* from_a = a_.named(sa.outputs[k].name);
        if (a_used[k] || !from_a || match_of(from_a) != from_b) continue;
        a_used[k] = renamed = true;
        out.push_back(fmt::format("output {} renamed to {}", sa.outputs[k].key.joined("."),
                                  ob->key.joined(".")));
      }
      if (!renamed) out.push_back(fmt::format("output {} added", ob->key.joined(".")));
    }
    for (size_t k = 0; k < sa.outputs.size(); ++k) {
      if (!a_used[k])
        out.push_back(fmt::format("output {} removed", sa.outputs[k].key.joined(".")));
    }
    return out;
  }

  Side a_, b_;
  std::vector<long> a_to_b_, b_to_a_;
  std::vector<std::pair<std::string, ModuleSums>> module_sums_;  // in B's order
  std::unordered_map<std::string, size_t> module_index_;
};

/// `name` or `name (A: other)` when the two programs name a matched node apart.
std::string pair_name(const std::string& a, const std::string& b) {
  return a == b ? b : fmt::format("{} (A: {})", b, a);
}

}  // namespace

std::string detail::plural(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

bool ProgramDiff::equal() const {
  return added.empty() && removed.empty() && changed.empty() && signature.empty() &&
         weights.empty();
}

std::string ProgramDiff::report() const {
  if (equal()) return "";
  std::string out = fmt::format(
      "nodes: {} added, {} removed, {} changed; signature: {}; weights: {}\n", added.size(),
      removed.size(), changed.size(), detail::plural(signature.size(), "change", "changes"),
      detail::plural(weights.size(), "differs", "differ"));
  if (!signature.empty()) {
    out += "signature:\n";
    for (const std::string& line : signature) out += "  " + line + "\n";
  }
  if (!added.empty()) {
    out += "added:\n";
    for (const DiffNode& n : added) out += "  + " + n.line + "\n";
  }
  if (!removed.empty()) {
    out += "removed:\n";
    for (const DiffNode& n : removed) out += "  - " + n.line + "\n";
  }
  if (!changed.empty()) {
    out += "changed:\n";
    for (const NodeChange& c : changed) {
      out += "  ~ " + pair_name(c.name_a, c.name_b) + "\n";
      for (const std::string& w : c.what) out += "      " + w + "\n";
    }
  }
  if (!modules.empty()) {
    out += "modules, by relative change ‖B − A‖ / ‖A‖ of their parameters:\n";
    size_t width = 0;
    for (const ModuleChange& m : modules) width = std::max(width, m.path.size());
    for (const ModuleChange& m : modules) {
      out += fmt::format("  {:<{}}  relative change {}, cosine {} ({} of {} parameter{} changed",
                         m.path.empty() ? "(root)" : m.path, width, number_text(m.relative_change),
                         number_text(m.cosine, 6), m.changed, m.weights, m.weights == 1 ? "" : "s");
      if (m.other_type > 0) {
        out += fmt::format("; {} of another shape or dtype left out", m.other_type);
      }
      out += ")\n";
    }
  }
  if (!weights.empty()) {
    out += "weights:\n";
    for (const WeightChange& w : weights) {
      out += "  " + pair_name(w.name_a, w.name_b) + ": " + w.what + "\n";
    }
  }
  return out;
}

ProgramDiff diff_programs(const ExportedProgram& a, const ExportedProgram& b) {
  return Differ(a, b).run();
}

ProgramDiff diff_programs(const TDGraphModule& a, const TDGraphModule& b) {
  return diff_programs(export_program(a), export_program(b));
}

}  // namespace tdfx
