// module_view_dot: the module view's DOT text. Deterministic: it walks the modules and keys in
// their given order, never by address.
//
// Layout: the modules of one sequential are laid out in rows of at most
// RenderOptions::modules_per_row, left to right (`rank=same` inside the sequential's
// cluster), the rows one under the other, so that a chain of 30 modules
// is a page of eight rows rather than a strip of 30 ranks. Each module is one node, a table
// whose left column holds its in keys and right column its out keys, each a port: an edge
// runs from the cell of the key written to the cells of the modules that read it, so each key
// shows once per module and no edge needs a label. Measured by bench/bench_viz.cpp.

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "tdfx/core/error.h"
#include "tdfx/viz/html.h"
#include "tdfx/viz/render.h"
#include "tdfx/viz/subgraph_groups.h"

namespace tdfx {
namespace {

/// Width of a wrapped row of text in a module or a box title, in bytes.
constexpr size_t kModuleLabelWrap = 32;
/// Longest key shown in a port cell.
constexpr size_t kMaxKeyText = 60;

/// `1234567` as `1,234,567`.
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

/// A quoted Graphviz ID: `module:PATH` (module_node_id), `input:N`, `output:N`.
std::string quoted_id(const std::string& prefix, const std::string& name) {
  return dot_quote(prefix == "module:" ? module_node_id(name) : prefix + name);
}

/// Where a key's current value comes from: a module's out port, or a pipeline input.
struct Source {
  int module = -1;  // index into options.modules; -1 for a pipeline input
  size_t port = 0;  // out port of the module, or the input's index
  bool read = false;
};

/// A key written by module `from` (its out port `out`) and read by `to` (in port `in`).
struct KeyEdge {
  int from;
  size_t out;
  int to;
  size_t in;
};

class ModuleViewWriter {
 public:
  explicit ModuleViewWriter(const RenderOptions& options)
      : options_(options),
        boxes_(options.modules),
        lr_(options.rankdir == Rankdir::kLeftRight),
        out_compass_(lr_ ? "s" : "e"),
        in_compass_(lr_ ? "n" : "w") {}

  ModuleViewBorder border() {
    assign_parents();
    connect_keys();
    ModuleViewBorder out;
    for (const NestedKey* key : inputs_) out.inputs.push_back(*key);
    for (const NestedKey* key : border_outputs_) out.outputs.push_back(*key);
    return out;
  }

  std::string run() {
    assign_parents();
    connect_keys();
    out_ += "digraph G {\n";
    out_ += fmt::format(
        "  graph [rankdir={}, nodesep=0.25, ranksep=0.4, fontname=\"Helvetica\", "
        "fontsize=12",
        lr_ ? "LR" : "TB");
    if (!options_.title.empty()) {
      out_ += ", labelloc=t, label=<<b>" + escape_html(options_.title) + "</b>>";
    }
    out_ += "];\n";
    out_ += "  node [fontname=\"Helvetica\", fontsize=10, shape=plain];\n";
    out_ += "  edge [color=\"#555555\", arrowsize=0.6];\n";
    write_inputs();
    write_members(-1, "  ");
    write_outputs();
    write_rows();
    out_ += edges_;
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  /// Each box's enclosing sequential (the one with the longest path that prefixes its own), and
  /// the members of each sequential (and of the top level, -1) in order.
  void assign_parents() {
    std::unordered_map<std::string, int> sequentials;
    for (size_t b = 0; b < boxes_.size(); ++b) {
      if (boxes_[b].sequential) sequentials.emplace(boxes_[b].path, static_cast<int>(b));
    }
    parent_.assign(boxes_.size(), -1);
    for (size_t b = 0; b < boxes_.size(); ++b) {
      std::string path = boxes_[b].path;
      for (auto dot = path.rfind('.'); dot != std::string::npos; dot = path.rfind('.')) {
        path.resize(dot);
        auto it = sequentials.find(path);
        if (it != sequentials.end() && it->second != static_cast<int>(b)) {
          parent_[b] = it->second;
          break;
        }
      }
      members_[parent_[b]].push_back(static_cast<int>(b));
    }
  }

  /// The edges of the keys, in run order: a key read before any module writes it is a
  /// pipeline input; otherwise it comes from its last writer.
  void connect_keys() {
    std::unordered_map<std::string, Source> sources;
    for (size_t b = 0; b < boxes_.size(); ++b) {
      const ModuleBox& box = boxes_[b];
      if (box.sequential) continue;
      const std::string id = quoted_id("module:", box.path);
      for (size_t i = 0; i < box.in_keys.size(); ++i) {
        const std::string key = box.in_keys[i].repr();
        auto found = sources.find(key);
        if (found == sources.end()) {
          found = sources.emplace(key, Source{-1, inputs_.size()}).first;
          inputs_.push_back(&box.in_keys[i]);
        }
        Source& source = found->second;
        source.read = true;
        const std::string head = fmt::format("{}:\"i{}\":{}", id, i, in_compass_);
        if (source.module < 0) {
          edges_ +=
              fmt::format("  {} -> {};\n", quoted_id("input:", std::to_string(source.port)), head);
        } else {
          // Written once the rows are known (write_key_edge).
          edges_ += '\0';
          key_edges_.push_back({source.module, source.port, static_cast<int>(b), i});
        }
      }
      for (size_t o = 0; o < box.out_keys.size(); ++o) {
        sources[box.out_keys[o].repr()] = Source{static_cast<int>(b), o};
      }
    }
    // The pipeline's outputs: each marked in the cell of its last writer; those nothing
    // reads afterwards also drawn at the border. Without output keys, every key whose
    // last value nothing reads is one.
    std::vector<const NestedKey*> outputs;
    for (const NestedKey& key : options_.output_keys) outputs.push_back(&key);
    if (outputs.empty()) {
      for (const ModuleBox& box : boxes_) {
        if (box.sequential) continue;
        for (const NestedKey& key : box.out_keys) {
          const Source& source = sources.at(key.repr());
          if (!source.read && &boxes_[source.module] == &box &&
              &boxes_[source.module].out_keys[source.port] == &key) {
            outputs.push_back(&key);
          }
        }
      }
    }
    for (const NestedKey* key : outputs) {
      auto found = sources.find(key->repr());
      if (found != sources.end() && found->second.module >= 0) {
        output_cells_.insert({found->second.module, found->second.port});
        if (found->second.read) continue;
      }
      const size_t index = border_outputs_.size();
      border_outputs_.push_back(key);
      const std::string head = quoted_id("output:", std::to_string(index));
      if (found == sources.end()) continue;  // written by no module: a key passed through
      const Source& source = found->second;
      if (source.module < 0) {
        edges_ +=
            fmt::format("  {} -> {};\n", quoted_id("input:", std::to_string(source.port)), head);
      } else {
        edges_ += fmt::format("  {}:\"o{}\":{} -> {};\n",
                              quoted_id("module:", boxes_[source.module].path), source.port,
                              out_compass_, head);
      }
    }
  }

  void write_inputs() {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      out_ += fmt::format(
          "  {} [shape=tab, style=filled, fillcolor=\"#d9f2d9\", margin=\"0.08,0.04\", "
          "label=<{}>];\n",
          quoted_id("input:", std::to_string(i)),
          escape_html(truncate_text(inputs_[i]->repr(), kMaxKeyText)));
    }
  }

  void write_outputs() {
    for (size_t i = 0; i < border_outputs_.size(); ++i) {
      out_ += fmt::format(
          "  {} [shape=box, peripheries=2, style=filled, fillcolor=\"#f8d7da\", "
          "margin=\"0.08,0.04\", label=<{}>];\n",
          quoted_id("output:", std::to_string(i)),
          escape_html(truncate_text(border_outputs_[i]->repr(), kMaxKeyText)));
    }
  }

  /// The members of sequential `parent` (-1: the top level): boxes for sequentials, nodes for
  /// modules; consecutive modules of one sequential fill rows.
  /// Sequentials and rows are subgraphs, grouped when there are many (viz/subgraph_groups.h).
  void write_members(int parent, const std::string& indent) {
    const size_t first_row = rows_.size();
    const auto& members = members_[parent];
    detail::SubgraphGroups sequentials(
        out_,
        std::count_if(members.begin(), members.end(), [&](int b) { return boxes_[b].sequential; }),
        indent);
    const std::string* at = &indent;
    for (int b : members) {
      const ModuleBox& box = boxes_[static_cast<size_t>(b)];
      if (box.sequential) {
        in_row_ = false;
        at = &sequentials.next();
        write_sequential(b, *at);
        continue;
      }
      if (!in_row_ ||
          (options_.modules_per_row > 0 && rows_.back().size() >= options_.modules_per_row)) {
        rows_.emplace_back();
        row_parent_.push_back(parent);
        in_row_ = true;
      }
      rows_.back().push_back(b);
      out_ += *at + module_stmt(box);
    }
    sequentials.close();
    in_row_ = false;
    // Each row on one rank, stated inside its sequential's box: a rank=same subgraph outside
    // a cluster takes its nodes out of it (and `newrank`, which allows that, does not keep
    // flat edges in order).
    auto stated = [&](size_t r) { return row_parent_[r] == parent && rows_[r].size() >= 2; };
    size_t count = 0;
    for (size_t r = first_row; r < rows_.size(); ++r) count += stated(r);
    detail::SubgraphGroups rows(out_, count, indent);
    for (size_t r = first_row; r < rows_.size(); ++r) {
      if (!stated(r)) continue;
      out_ += rows.next() + "{rank=same;";
      for (int b : rows_[r]) out_ += " " + quoted_id("module:", boxes_[b].path) + ";";
      out_ += "}\n";
    }
    rows.close();
  }

  void write_sequential(int b, const std::string& indent) {
    const ModuleBox& box = boxes_[static_cast<size_t>(b)];
    out_ += fmt::format("{}subgraph cluster_{} {{\n", indent, b);
    std::string label = "<b>" + escape_html(box.path) + "</b>  " +
                        escape_html(box.type.empty() ? "TensorDictSequential" : box.type);
    if (box.parameters > 0) label += "  " + grouped(box.parameters) + " parameters";
    out_ += fmt::format(
        "{}  graph [label=<{}>, style=\"rounded,filled\", fillcolor=\"#eef0f8\", "
        "color=\"#7a7aa8\", labeljust=l, fontsize=10];\n",
        indent, label);
    write_members(b, indent + "  ");
    out_ += indent + "}\n";
  }

  /// One key's cell: its port, the key, and a colour when it is a pipeline output.
  std::string key_cell(const NestedKey& key, const std::string& port, bool output,
                       size_t span) const {
    return fmt::format(
        "<td port=\"{}\"{} bgcolor=\"{}\">{}</td>", port,
        span > 1 ? fmt::format(lr_ ? " colspan=\"{}\"" : " rowspan=\"{}\"", span) : "",
        output ? "#f8d7da" : "#ffffff", escape_html(truncate_text(key.repr(), kMaxKeyText)));
  }

  /// The cells of one side (in or out keys), the last one spanning what the other side
  /// has more.
  std::vector<std::string> key_cells(const ModuleBox& box, bool out, size_t lines, int index) {
    const auto& keys = out ? box.out_keys : box.in_keys;
    std::vector<std::string> cells;
    if (keys.empty()) {
      cells.push_back(fmt::format(
          "<td{}></td>",
          lines > 1 ? fmt::format(lr_ ? " colspan=\"{}\"" : " rowspan=\"{}\"", lines) : ""));
      return cells;
    }
    for (size_t k = 0; k < keys.size(); ++k) {
      const size_t span = k + 1 == keys.size() ? lines - k : 1;
      const bool output = out && output_cells_.count({index, k}) > 0;
      cells.push_back(key_cell(keys[k], fmt::format("{}{}", out ? 'o' : 'i', k), output, span));
    }
    return cells;
  }

  std::string title_html(const ModuleBox& box) const {
    std::string title = "<b>" + escape_html(box.path) + "</b>";
    if (!box.type.empty()) title += "<br/>" + escape_html(box.type);
    const bool plain = box.label.empty() || box.label == box.type || box.label == box.type + "()";
    if (!plain) {
      title += "<br/><font point-size=\"8\">" +
               wrapped_html(truncate_text(box.label, 4 * kModuleLabelWrap), kModuleLabelWrap) +
               "</font>";
    }
    if (box.parameters > 0) title += "<br/>" + grouped(box.parameters) + " parameters";
    if (box.buffers > 0) title += "<br/>" + grouped(box.buffers) + " in buffers";
    if (const NodeOverlay* o = overlay_of(box)) {
      for (const std::string& line : o->lines) {
        title += "<br/><i>" + escape_html(truncate_text(line, 4 * kModuleLabelWrap)) + "</i>";
      }
    }
    return title;
  }

  const NodeOverlay* overlay_of(const ModuleBox& box) const {
    auto it = options_.module_overlay.find(box.path);
    return it == options_.module_overlay.end() ? nullptr : &it->second;
  }

  std::string module_stmt(const ModuleBox& box) {
    const int index = static_cast<int>(&box - boxes_.data());
    const size_t lines = std::max<size_t>({box.in_keys.size(), box.out_keys.size(), 1});
    const std::vector<std::string> ins = key_cells(box, false, lines, index);
    const std::vector<std::string> outs = key_cells(box, true, lines, index);
    const NodeOverlay* overlay = overlay_of(box);
    const std::string fill =
        overlay && !overlay->fill.empty() ? dot_escape_colour(overlay->fill) : "#ffe3c7";
    const std::string title = fmt::format(
        "<td{} bgcolor=\"{}\" balign=\"left\">{}</td>",
        lines > 1 ? fmt::format(lr_ ? " colspan=\"{}\"" : " rowspan=\"{}\"", lines) : "", fill,
        title_html(box));
    // A marked module (where NaN or Inf starts) is ringed in red, as the op view rings a node.
    std::string table =
        overlay && overlay->marked
            ? "<table border=\"3\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"3\" "
              "color=\"#d62728\">"
            : "<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"3\" "
              "color=\"#9a7a5a\">";
    if (lr_) {
      // In keys a row on top, the title under them, out keys a row at the bottom.
      table += "<tr>";
      for (const auto& cell : ins) table += cell;
      table += "</tr><tr>" + title + "</tr><tr>";
      for (const auto& cell : outs) table += cell;
      table += "</tr>";
    } else {
      // In keys a column on the left, the title, out keys a column on the right.
      for (size_t line = 0; line < lines; ++line) {
        table += "<tr>";
        if (line < ins.size()) table += ins[line];
        if (line == 0) table += title;
        if (line < outs.size()) table += outs[line];
        table += "</tr>";
      }
    }
    table += "</table>";
    return fmt::format("{} [label=<{}>];\n", quoted_id("module:", box.path), table);
  }

  /// Each row's modules in order (an invisible edge between neighbours: a flat edge between
  /// ports does not order them), and each row under the one before: in one sequential their
  /// first modules one above the other (a heavy invisible edge), so that rows start at the
  /// same left margin rather than each where the last ended.
  void write_rows() {
    row_of_.assign(boxes_.size(), -1);
    for (size_t r = 0; r < rows_.size(); ++r) {
      for (int b : rows_[r]) row_of_[static_cast<size_t>(b)] = static_cast<int>(r);
    }
    std::string edges;
    size_t next = 0;
    for (char c : edges_) {
      if (c == '\0') {
        edges += key_edge(key_edges_[next++]);
      } else {
        edges += c;
      }
    }
    edges_ = std::move(edges);
    for (size_t r = 0; r < rows_.size(); ++r) {
      const auto& row = rows_[r];
      for (size_t i = 1; i < row.size(); ++i) {
        if (plain_joined_.count({row[i - 1], static_cast<size_t>(row[i])})) continue;
        edges_ += flat_edge(row[i - 1], row[i], "style=invis");
      }
      if (r == 0) continue;
      if (row_parent_[r] == row_parent_[r - 1]) {
        edges_ += fmt::format("  {} -> {} [style=invis, weight=100];\n",
                              quoted_id("module:", boxes_[rows_[r - 1][0]].path),
                              quoted_id("module:", boxes_[row[0]].path));
      } else {
        // Rows of two sequentials: from the end of one to the start of the next. An edge
        // between their first modules makes `dot` reorder the modules inside the clusters.
        edges_ += fmt::format("  {} -> {} [style=invis];\n",
                              quoted_id("module:", boxes_[rows_[r - 1].back()].path),
                              quoted_id("module:", boxes_[row[0]].path));
      }
    }
    write_border_rank("min", "input:", inputs_.size());
    write_border_rank("max", "output:", border_outputs_.size());
  }

  /// An edge of a key between two modules, weightless between ports (the rows, not the keys,
  /// say where a module sits). From the key's cell to the reader's cell, but for modules of
  /// one row that write and read that key alone: a flat edge between ports costs `dot` a layout of
  /// its own (10,000 modules: 8.4 s against 4.7 s), and attaches where a plain edge would.
  std::string key_edge(const KeyEdge& e) {
    const ModuleBox& from = boxes_[static_cast<size_t>(e.from)];
    const ModuleBox& to = boxes_[static_cast<size_t>(e.to)];
    const bool flat = row_of_[static_cast<size_t>(e.from)] == row_of_[static_cast<size_t>(e.to)];
    if (flat && from.out_keys.size() == 1 && to.in_keys.size() == 1) {
      plain_joined_.insert({e.from, static_cast<size_t>(e.to)});
      // With weight 0 a flat edge stops ordering its ends inside a cluster.
      return flat_edge(e.from, e.to, "");
    }
    return fmt::format("  {}:\"o{}\":{} -> {}:\"i{}\":{} [weight=0];\n",
                       quoted_id("module:", from.path), e.out, out_compass_,
                       quoted_id("module:", to.path), e.in, in_compass_);
  }

  /// An edge between two modules of one row, which also orders them: `from` first. Left to
  /// right, `dot` lays out the flat edges inside a cluster mirrored (the row, a column then,
  /// reads bottom to top), so there the edge is written the other way round and drawn back.
  std::string flat_edge(int from, int to, const std::string& attributes) {
    const bool mirrored = lr_ && row_parent_[static_cast<size_t>(row_of_[from])] >= 0;
    std::string attrs = mirrored ? "dir=back" : "";
    if (!attributes.empty()) attrs += (attrs.empty() ? "" : ", ") + attributes;
    return fmt::format("  {} -> {}{};\n", quoted_id("module:", boxes_[mirrored ? to : from].path),
                       quoted_id("module:", boxes_[mirrored ? from : to].path),
                       attrs.empty() ? "" : " [" + attrs + "]");
  }

  void write_border_rank(const char* rank, const char* prefix, size_t count) {
    if (count == 0) return;
    out_ += fmt::format("  {{rank={};", rank);
    for (size_t i = 0; i < count; ++i) out_ += " " + quoted_id(prefix, std::to_string(i)) + ";";
    out_ += "}\n";
  }

  struct PairHash {
    size_t operator()(const std::pair<int, size_t>& p) const {
      return std::hash<size_t>()(static_cast<size_t>(p.first) * 1000003u + p.second);
    }
  };

  const RenderOptions& options_;
  const std::vector<ModuleBox>& boxes_;
  const bool lr_;
  const char* out_compass_;
  const char* in_compass_;
  std::string out_;
  std::string edges_;
  std::vector<int> parent_;
  std::unordered_map<int, std::vector<int>> members_;
  std::vector<const NestedKey*> inputs_;
  std::vector<const NestedKey*> border_outputs_;
  /// (module, out port) of every cell that holds a pipeline output.
  std::unordered_set<std::pair<int, size_t>, PairHash> output_cells_;
  /// The key edges between modules, in order; `edges_` holds a NUL where each goes.
  std::vector<KeyEdge> key_edges_;
  /// (writer, reader) of modules joined by a plain edge, which orders them as well.
  std::unordered_set<std::pair<int, size_t>, PairHash> plain_joined_;
  std::vector<std::vector<int>> rows_;
  /// The row of each module (-1: a sequential).
  std::vector<int> row_of_;
  /// The sequential each row is in (-1: the top level).
  std::vector<int> row_parent_;
  /// False when the next module starts a row (at the start of each sequential's members).
  bool in_row_ = false;
};

}  // namespace

std::string_view to_string(View view) { return view == View::kModules ? "modules" : "ops"; }

std::optional<View> view_from_string(std::string_view text) {
  if (text == "ops") return View::kOps;
  if (text == "modules") return View::kModules;
  return std::nullopt;
}

std::string module_node_id(const std::string& path) { return "module:" + path; }

std::string module_view_dot(const RenderOptions& options) {
  return ModuleViewWriter(options).run();
}

ModuleViewBorder module_view_border(const RenderOptions& options) {
  return ModuleViewWriter(options).border();
}

}  // namespace tdfx
