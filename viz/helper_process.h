#pragma once

/// \file
/// Running tdfx's Graphviz helper program (viz/graphviz_helper.cpp) for one drawing: found by
/// a path tdfx knows, started with posix_spawn, fed over a socket, bounded in time. Internal
/// to viz; not installed.

#include <chrono>
#include <string>
#include <vector>

namespace tdfx::detail {

/// Starts `program` (an absolute path; never looked up in PATH) with `args`, writes `input` to
/// its standard input, and returns the answer it writes to its standard output: a tag byte
/// ('R' for a result, 'F' for a failure), the length of what follows (8 bytes, little endian)
/// and the bytes. A failure is thrown as a tdfx::Error with its message. A program that cannot
/// start, dies (a signal, an exit without a whole answer) or outlives `timeout` (it is then
/// killed) is a tdfx::Error naming `what` and how it ended (`timeout_name`, when given, names
/// where the time limit is set). The child gets none of the
/// caller's file descriptors but its standard input and output (on one socket) and stderr on
/// /dev/null, default signal handlers and an empty signal mask. Safe to call from several
/// threads at once.
std::string run_helper(const std::string& what, const std::string& program,
                       const std::vector<std::string>& args, const std::string& input,
                       std::chrono::seconds timeout, const std::string& timeout_name = "");

/// Where tdfx-graphviz is, in this order: the file `TDFX_GRAPHVIZ_HELPER` names (an absolute
/// path), `tdfx-graphviz` next to the running program (the build tree's bin/), then
/// `../libexec/tdfx/tdfx-graphviz` from it (an installed `tdfx`), then the installed package's
/// path that find_package(tdfx) compiles into the program (`tdfx_graphviz_helper_path()`).
/// tdfx::Error listing the places looked in when none holds an executable file.
std::string graphviz_helper_path();

}  // namespace tdfx::detail
