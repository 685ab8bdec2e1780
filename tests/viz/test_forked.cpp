// Drawing in a child process: what a job returns or throws comes back, a child that dies is an
// Error, and a sequence of drawings that crashes Graphviz in one process draws.
#include <doctest/doctest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tdfx/core/error.h"
#include "tdfx/viz/forked.h"
#include "tdfx/viz/render.h"
#include "tests/support/test_support.h"

using tdfx::detail::run_forked;

TEST_CASE("forked: what the job returns comes back whole, and its effects stay in the child") {
  std::string big(10 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7919 % 251);
  int touched = 0;
  const std::string back = run_forked("test", [&] {
    touched = 1;
    return big;
  });
  CHECK(back == big);
  CHECK(touched == 0);
  CHECK(run_forked("test", [] { return std::string(); }).empty());
}

TEST_CASE("forked: an exception in the job is a tdfx::Error with its message") {
  CHECK_THROWS_WITH_AS(run_forked("test", []() -> std::string { tdfx::fail("no {}", "luck"); }),
                       "no luck", tdfx::Error);
  CHECK_THROWS_WITH_AS(
      run_forked("test", []() -> std::string { throw std::runtime_error("plain"); }), "plain",
      tdfx::Error);
}

TEST_CASE("forked: a child that dies is an Error saying how") {
  CHECK_THROWS_WITH_AS(run_forked("viz: Graphviz",
                                  []() -> std::string {
                                    std::raise(SIGSEGV);
                                    return "";
                                  }),
                       "viz: Graphviz failed: its process killed by signal 11 (SEGV)", tdfx::Error);
  CHECK_THROWS_WITH_AS(run_forked("viz: Graphviz",
                                  []() -> std::string {
                                    std::_Exit(7);
                                    return "";
                                  }),
                       "viz: Graphviz failed: its process exited with status 7 without an answer",
                       tdfx::Error);
}

TEST_CASE("forked: an InternalError stays one; exit() and a hang end as Errors") {
  CHECK_THROWS_WITH_AS(
      run_forked("test", []() -> std::string { throw tdfx::InternalError("a bug"); }), "a bug",
      tdfx::InternalError);
  // exit() runs none of this process's exit handlers in the child (a static ScratchDir's
  // destructor would remove the caller's folder): it leaves at once, without an answer.
  static const tdfx::testing::ScratchDir kept("tdfx_forked_kept");
  CHECK_THROWS_WITH_AS(run_forked("test",
                                  []() -> std::string {
                                    std::exit(0);
                                    return "";
                                  }),
                       "test failed: its process exited with status 4 without an answer",
                       tdfx::Error);
  CHECK(std::filesystem::exists(kept.path()));
  CHECK_THROWS_WITH_AS(run_forked(
                           "test",
                           []() -> std::string {
                             for (;;) ::pause();
                           },
                           std::chrono::seconds(1)),
                       "test failed: its process took longer than 1 s and was stopped",
                       tdfx::Error);
}

TEST_CASE("forked: threads run jobs at once") {
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&results, t] {
      for (int i = 0; i < 5; ++i) {
        results[t] = run_forked("test", [t, i] { return std::to_string(t * 100 + i); });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(results == std::vector<std::string>{"4", "104", "204", "304"});
}

// Graphviz 2.42 segfaults in the 44th of these drawings when all run in one process (its
// own API crashes the same way on such sequences: mincross.c's install_in_rank assertion):
// the DOT texts and their order are those of a real run that crashed, a nested pipeline and
// a 100-module chain, each in both views, in SVG, PNG and PDF. Which drawing crashes depends
// on every drawing before it in the process; in children, none does.
TEST_CASE("forked: the drawings that crash Graphviz in one process all draw, the same each time") {
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
