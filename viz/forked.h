#pragma once

/// \file
/// Running a job in a forked copy of the process, for Graphviz (render.cpp). Internal to viz.

#include <chrono>
#include <functional>
#include <string>

namespace tdfx::detail {

/// Runs `job` in a forked copy of this process, which exits when it returns, and returns the
/// bytes it returned. An exception the job throws is thrown here with the same message: an
/// InternalError as an InternalError, anything else as a tdfx::Error. A child that dies (a
/// signal, an abort, an exit without a whole answer) or outlives `timeout` (it is then
/// killed) is a tdfx::Error naming `what` and how it ended. The caller's own state is
/// untouched by the job. In the child only the answer's pipe stays open, crash signals have
/// their default action, no core is dumped, and exit() leaves at once. Safe to call from
/// several threads at once. Throws tdfx::Error when no process can be made.
///
///     std::string svg = run_forked("viz: Graphviz", [&] { return lay_out(dot); });
std::string run_forked(const std::string& what, const std::function<std::string()>& job,
                       std::chrono::seconds timeout = std::chrono::seconds(600));

}  // namespace tdfx::detail
