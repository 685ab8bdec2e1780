#include "tdfx/tracer/traced_view.h"

#include "tdfx/core/error.h"
#include "tdfx/graph/graph_printer.h"
#include "tdfx/tracer/fx_view.h"
#include "tdfx/tracer/program_pass.h"

namespace tdfx::detail {

TracedView::TracedView(Graph built) : graph_(std::move(built)) {
  std::call_once(named_, [] {});
  std::call_once(built_, [] {});
  compiled_generation_ = graph_.generation();
  is_built_ = true;
}

const Graph& TracedView::graph() const {
  std::call_once(built_, [this] { build(); });
  return graph_;
}

Graph& TracedView::mutable_graph() {
  graph();
  return graph_;
}

const std::string& TracedView::shown_as(const Node& node) const {
  static const std::string as_itself;
  graph();
  auto it = shown_.find(&node);
  return it == shown_.end() ? as_itself : it->second;
}

bool TracedView::edited() const {
  // Not built yet (or being built): as traced. Built: edited when its generation moved on.
  return is_built_.load(std::memory_order_acquire) && graph_.generation() != compiled_generation_;
}

void TracedView::mark_compiled() { compiled_generation_ = graph().generation(); }

void TracedView::name_program() const {
  std::call_once(named_, [this] {
    if (!runner_) throw InternalError("TracedView: the program is asked for before it is made");
    Source& s = *source_;  // give_modules describes its modules
    const Graph& program = runner_->graph();
    leaves_ = give_modules(program, s.recording, s.live, s.updates, s.options);
    ProgramNames name_of(s.recording);
    runner_->rename_nodes([&](const Node& node) { return name_of(node); });
  });
}

void TracedView::build() const {
  name_program();
  const Source& s = *source_;
  const Graph& program = runner_->graph();
  FxView view = fx_view(program, s.recording, s.live, *leaves_, s.updates, s.options);
  // Each program node that the view shows otherwise (inside a leaf call, as a method, or by
  // another name) is described as its view node. The nodes of one leaf call come one after
  // another and share their view node: described once.
  const Node* last_shown = nullptr;
  const std::string* last_description = nullptr;
  for (const Node* node : program.nodes()) {
    if (node->op() == OpCode::kPlaceholder || node->op() == OpCode::kOutput) continue;
    // A parameter is shown as the leaf call that first reads it, if one does.
    const Node* reader = node->op() == OpCode::kGetAttr ? s.live.first_user(node) : nullptr;
    const Node* owner = reader ? reader : node;
    if (owner != node && !leaves_->find(owner)) continue;
    auto origin = view.origin.find(owner);
    if (origin == view.origin.end()) continue;
    const Node& printed = *origin->second;
    if (printed.op() != OpCode::kCallModule && printed.op() != OpCode::kCallMethod &&
        printed.name() == node->name()) {
      continue;
    }
    if (&printed != last_shown) {
      last_shown = &printed;
      last_description = &(shown_[node] = describe(printed));
    } else {
      shown_[node] = *last_description;
    }
  }
  graph_ = std::move(view.graph);
  compiled_generation_ = graph_.generation();
  source_.reset();
  leaves_.reset();
  runner_ = nullptr;
  is_built_.store(true, std::memory_order_release);
}

}  // namespace tdfx::detail
