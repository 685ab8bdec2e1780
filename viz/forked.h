#pragma once

/// \file
/// Running a job in a forked copy of the process, for Graphviz (render.cpp). Internal to viz.

#include <functional>
#include <string>

namespace tdfx::detail {

/// Runs `job` in a forked copy of this process, which exits when it returns, and returns the
/// bytes it returned. A tdfx::Error the job throws is thrown here as a tdfx::Error with the
/// same message; a child that dies (a signal, an abort, an exit without an answer) is a
/// tdfx::Error naming `what` and how it died. The parent's own state is untouched by the job.
/// Safe to call from several threads at once. Throws tdfx::Error when no process can be made.
///
///     std::string svg = run_forked("viz: Graphviz", [&] { return lay_out(dot); });
std::string run_forked(const std::string& what, const std::function<std::string()>& job);

}  // namespace tdfx::detail
