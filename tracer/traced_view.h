#pragma once

/// \file
/// TracedView: what a trace works out only when it is first looked at. A trace runs its program
/// as soon as it is pruned (program_pass.h); the program's nodes get their modules and
/// torch.export names when the program is first asked for (name_program()), and the FX view
/// (fx_view.h) is made from the recording when it is first asked for (graph()). A trace that is
/// only run does neither. The program's errors name a node as the view prints it
/// (`%fc = call_module[target=0.module.fc]`), which makes both then.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/tracer/dispatch_trace.h"
#include "tdfx/tracer/leaf_calls.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx::detail {

class TracedView {
 public:
  /// What the program's modules and names and the view are made from: the recording whose
  /// graph prune_program made into the program, and the passes' findings about it.
  struct Source {
    PipelineRecording recording;
    LiveNodes live;
    StateUpdates updates;
    TraceOptions options;
  };

  /// A view to be made from `source` once made_into() gives the program.
  explicit TracedView(Source source) : source_(std::move(source)) {}
  /// A view already made, of a program already named.
  explicit TracedView(Graph built);

  /// The runner of the program the recording became, where the program stays until it is
  /// named (the TDGraphModule that holds both runs it; nothing else may rename its nodes).
  /// Call once, before any other member.
  void made_into(GraphModule& runner) { runner_ = &runner; }

  /// Gives the program's nodes their modules and names (give_modules, ProgramNames) on the
  /// first call (from any thread, once). Until then they carry the recorder's names.
  void name_program() const;
  /// The view, built on the first call (from any thread, once).
  const Graph& graph() const;
  Graph& mutable_graph();
  /// How the view shows the program node `node`: the call_module node of the leaf call it is
  /// part of, or the view node it became under another name or as a method; "" when the view
  /// prints it as the program does.
  const std::string& shown_as(const Node& node) const;

  /// True once the view was built and edited since it was built or last marked compiled.
  bool edited() const;
  /// Takes the view as it is now as the one the program was compiled from.
  void mark_compiled();

 private:
  void build() const;

  mutable std::once_flag named_;
  mutable std::once_flag built_;
  mutable std::atomic<bool> is_built_{false};
  /// Set until the view is built.
  mutable std::optional<Source> source_;
  /// The program's leaf calls, found when it is named, until the view is built.
  mutable std::optional<LeafCalls> leaves_;
  mutable Graph graph_;
  /// Program node → its description in the view (see shown_as).
  mutable std::unordered_map<const Node*, std::string> shown_;
  /// Set by made_into until the view is built.
  mutable GraphModule* runner_ = nullptr;
  mutable uint64_t compiled_generation_ = 0;
};

}  // namespace tdfx::detail
