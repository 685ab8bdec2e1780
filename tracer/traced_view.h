#pragma once

/// \file
/// TracedView: a trace's FX view (fx_view.h), made from the recording when first asked for.
/// TDGraphModule runs the program (program_pass.h) and shows this view; a trace that is run or
/// exported and never printed, drawn or edited never builds it. The program's errors name a
/// node as the view prints it (`%fc = call_module[target=0.module.fc]`), which builds the view
/// then.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "tdfx/graph/graph.h"
#include "tdfx/tracer/dispatch_trace.h"
#include "tdfx/tracer/leaf_calls.h"
#include "tdfx/tracer/trace_options.h"

namespace tdfx::detail {

class TracedView {
 public:
  /// What the view is made from: the recording whose graph flat_program made into a program,
  /// and the passes' findings about it.
  struct Source {
    PipelineRecording recording;
    LiveNodes live;
    StateUpdates updates;
    LeafCalls leaves;
    TraceOptions options;
  };

  /// A view to be made from `source` once made_into() names the program.
  explicit TracedView(Source source) : source_(std::move(source)) {}
  /// A view already made.
  explicit TracedView(Graph built);

  /// The program the recording became, where it stays until the view is built (the
  /// TDGraphModule that holds both runs it). Call once, before any other member.
  void made_into(const Graph& program) { program_ = &program; }

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

  mutable std::once_flag built_;
  mutable std::atomic<bool> is_built_{false};
  /// Set until the view is built.
  mutable std::optional<Source> source_;
  mutable Graph graph_;
  /// Program node → its description in the view (see shown_as).
  mutable std::unordered_map<const Node*, std::string> shown_;
  const Graph* program_ = nullptr;
  mutable uint64_t compiled_generation_ = 0;
};

}  // namespace tdfx::detail
