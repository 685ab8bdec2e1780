// Drawing in tdfx's Graphviz helper process (viz/helper_process.h): its answer comes back
// whole, a helper that fails, dies or hangs is an Error saying so, it is found where tdfx
// says and nowhere else, it inherits none of the caller's files, and a sequence of drawings
// that crashes Graphviz in one process draws.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/viz/helper_process.h"
#include "tdfx/viz/render.h"
#include "tests/support/test_support.h"

using tdfx::detail::run_helper;

namespace {

constexpr std::chrono::seconds kLong{60};

// A helper written in Python that answers its whole input back ('R'), or with `tag`.
std::vector<std::string> echo(const std::string& tag = "R") {
  return {"-c", "import sys; data = sys.stdin.buffer.read(); sys.stdout.buffer.write(b'" + tag +
                    "' + len(data).to_bytes(8, 'little') + data)"};
}

// Sets TDFX_GRAPHVIZ_HELPER for the scope.
struct HelperOverride {
  explicit HelperOverride(const std::string& path) {
    ::setenv("TDFX_GRAPHVIZ_HELPER", path.c_str(), 1);
  }
  ~HelperOverride() { ::unsetenv("TDFX_GRAPHVIZ_HELPER"); }
};

// An executable shell script in `dir`.
std::string script(const tdfx::testing::ScratchDir& dir, const std::string& name,
                   const std::string& body) {
  const std::string path = (dir / name).string();
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

}  // namespace

TEST_CASE("helper: what it answers comes back whole, a failure as an Error with its message") {
  std::string big(10 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7919 % 251);
  CHECK(run_helper("test", "/usr/bin/python3", echo(), big, kLong) == big);
  CHECK(run_helper("test", "/usr/bin/python3", echo(), "", kLong).empty());
  CHECK_THROWS_WITH_AS(run_helper("test", "/usr/bin/python3", echo("F"), "no luck", kLong),
                       "no luck", tdfx::Error);
}

TEST_CASE("helper: one that dies, exits without an answer or hangs is an Error saying how") {
  const tdfx::testing::ScratchDir dir("tdfx_helper");
  CHECK_THROWS_WITH_AS(
      run_helper("viz: Graphviz", script(dir, "segv", "kill -SEGV $$"), {}, "", kLong),
      "viz: Graphviz failed: its process killed by signal 11 (SEGV)", tdfx::Error);
  CHECK_THROWS_WITH_AS(run_helper("viz: Graphviz", script(dir, "seven", "exit 7"), {}, "x", kLong),
                       "viz: Graphviz failed: its process exited with status 7 without an answer",
                       tdfx::Error);
  // Its input unread, a big one: the caller neither blocks nor dies of SIGPIPE.
  CHECK_THROWS_WITH_AS(
      run_helper("test", script(dir, "deaf", "exit 0"), {}, std::string(32 << 20, 'x'), kLong),
      "test failed: its process exited with status 0 without an answer", tdfx::Error);
  CHECK_THROWS_WITH_AS(run_helper("test", "/bin/sleep", {"30"}, "", std::chrono::seconds(1)),
                       "test failed: its process took longer than 1 s and was stopped",
                       tdfx::Error);
  CHECK_THROWS_WITH_AS(run_helper("test", "/nonexistent/helper", {}, "", kLong),
                       "test: cannot start its helper /nonexistent/helper: No such file or "
                       "directory",
                       tdfx::Error);
}

TEST_CASE("helper: it gets the caller's standard input and output only, on one socket") {
  const int leaked = ::open("/dev/null", O_RDONLY);  // not close-on-exec
  REQUIRE(leaked >= 3);
  const std::string listed =
      run_helper("test", "/usr/bin/python3",
                 {"-c",
                  "import os, sys; fds = sorted(int(f) for f in os.listdir('/proc/self/fd')); "
                  "text = ' '.join(map(str, fds)).encode(); "
                  "sys.stdout.buffer.write(b'R' + len(text).to_bytes(8, 'little') + text)"},
                 "", kLong);
  ::close(leaked);
  // 0 and 1 the socket, 2 /dev/null, 3 the listing's own directory handle.
  CHECK(listed == "0 1 2 3");
}

TEST_CASE("helper: found by TDFX_GRAPHVIZ_HELPER or next to the program, never through PATH") {
  CHECK(tdfx::detail::graphviz_helper_path() == tdfx::testing::bin_dir() + "/tdfx-graphviz");
  {
    HelperOverride relative("tdfx-graphviz");
    CHECK_THROWS_WITH_AS(tdfx::detail::graphviz_helper_path(),
                         "viz: TDFX_GRAPHVIZ_HELPER must be an absolute path, not "
                         "'tdfx-graphviz'",
                         tdfx::Error);
  }
  {
    HelperOverride missing("/nonexistent/tdfx-graphviz");
    CHECK_THROWS_WITH_AS(tdfx::render_dot("digraph { a }", tdfx::Format::kSvg),
                         "viz: TDFX_GRAPHVIZ_HELPER names '/nonexistent/tdfx-graphviz', which is "
                         "not an executable file",
                         tdfx::Error);
  }
  const tdfx::testing::ScratchDir dir("tdfx_helper");
  HelperOverride crashing(script(dir, "crash", "kill -ABRT $$"));
  CHECK_THROWS_WITH_AS(tdfx::render_dot("digraph { a }", tdfx::Format::kSvg),
                       "viz: Graphviz failed: its process killed by signal 6 (ABRT)", tdfx::Error);
}

TEST_CASE("helper: Graphviz's own errors and the helper's refusals come back as Errors") {
  CHECK_THROWS_WITH_AS(tdfx::render_dot("digraph { a -> }", tdfx::Format::kSvg),
                       doctest::Contains("viz: Graphviz could not parse the DOT text: "),
                       tdfx::Error);
  const std::string helper = tdfx::detail::graphviz_helper_path();
  CHECK_THROWS_WITH_AS(run_helper("test", helper, {"jpg", "100"}, "digraph { a }", kLong),
                       "viz: tdfx-graphviz cannot write 'jpg'", tdfx::Error);
}

TEST_CASE("helper: threads draw at once") {
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&results, t] {
      for (int i = 0; i < 3; ++i) {
        results[t] = tdfx::render_dot(
            "digraph { n" + std::to_string(t) + "_" + std::to_string(i) + " }", tdfx::Format::kSvg);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t t = 0; t < results.size(); ++t) {
    CHECK(results[t].find("n" + std::to_string(t) + "_2") != std::string::npos);
  }
}

// Graphviz 2.42 segfaults in the 44th of these drawings when all run in one process (its
// own API crashes the same way on such sequences: mincross.c's install_in_rank assertion):
// the DOT texts and their order are those of a real run that crashed, a nested pipeline and
// a 100-module chain, each in both views, in SVG, PNG and PDF. Which drawing crashes depends
// on every drawing before it in the process; in a helper process per drawing, none does.
TEST_CASE("helper: the drawings that crash Graphviz in one process all draw, the same each time") {
  const std::string dir = tdfx::testing::source_dir() + "/tests/viz/data/";
  std::map<std::string, std::string> dots;
  for (const char* name :
       {"replay_nested.ops", "replay_nested.modules", "replay_chain.ops", "replay_chain.modules"}) {
    dots[name] = tdfx::testing::read_text(dir + name + ".dot");
  }
  const char* n_o = "replay_nested.ops";
  const char* n_m = "replay_nested.modules";
  const char* c_o = "replay_chain.ops";
  const char* c_m = "replay_chain.modules";
  using tdfx::Format;
  const std::vector<std::pair<const char*, Format>> run = {
      {n_o, Format::kSvg}, {n_o, Format::kPng}, {n_o, Format::kSvg}, {n_m, Format::kSvg},
      {n_o, Format::kPdf}, {n_o, Format::kSvg}, {n_o, Format::kPng}, {n_o, Format::kSvg},
      {n_m, Format::kSvg}, {n_o, Format::kPdf}, {c_o, Format::kSvg}, {c_o, Format::kPng},
      {c_o, Format::kSvg}, {c_m, Format::kSvg}, {c_o, Format::kPdf}, {c_o, Format::kSvg},
      {c_o, Format::kPng}, {c_o, Format::kSvg}, {c_m, Format::kSvg}, {c_o, Format::kPdf},
      {n_o, Format::kSvg}, {n_m, Format::kSvg}, {n_m, Format::kSvg}, {n_m, Format::kPng},
      {n_m, Format::kSvg}, {n_m, Format::kSvg}, {n_m, Format::kPdf}, {n_m, Format::kSvg},
      {n_m, Format::kPng}, {n_m, Format::kSvg}, {n_m, Format::kSvg}, {n_m, Format::kPdf},
      {c_m, Format::kSvg}, {c_m, Format::kPng}, {c_m, Format::kSvg}, {c_m, Format::kSvg},
      {c_m, Format::kPdf}, {c_m, Format::kSvg}, {c_m, Format::kPng}, {c_m, Format::kSvg},
      {c_m, Format::kSvg}, {c_m, Format::kPdf}, {n_o, Format::kSvg}, {n_m, Format::kSvg},
  };
  std::map<std::string, std::string> first_svg;
  for (size_t i = 0; i < run.size(); ++i) {
    const auto& [name, format] = run[i];
    CAPTURE(i);
    CAPTURE(name);
    const std::string bytes = tdfx::render_dot(dots.at(name), format);
    CHECK(bytes.size() > 100);
    if (format != Format::kSvg) continue;
    auto [it, first] = first_svg.emplace(name, bytes);
    if (!first) CHECK(bytes == it->second);
  }
}
