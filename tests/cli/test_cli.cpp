// The `tdfx` executable, run as a user would: exit codes, printed text, files written.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace fs = std::filesystem;

namespace {

using Run = tdfx::testing::CommandResult;

std::string tdfx_bin() {
  const char* dir = std::getenv("TDFX_BIN_DIR");
  return std::string(dir ? dir : TDFX_BIN_DIR_DEFAULT) + "/tdfx";
}

// Runs `tdfx ARGS` through the shell, stderr merged into the captured text.
Run run_tdfx(const std::string& args) {
  const std::string command = "'" + tdfx_bin() + "' " + args + " 2>&1";
  return tdfx::testing::run_command(command);
}

// One demo run shared by every test: tracing and exporting is the slow part.
const fs::path& demo_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("tdfx_test_cli_" + std::to_string(getpid()));
    fs::remove_all(d);
    return d;
  }();
  return dir;
}

const Run& demo_run() {
  static const Run run = run_tdfx("demo --out '" + (demo_dir() / "nested" / "out").string() + "'");
  return run;
}

fs::path demo_file(const std::string& name) { return demo_dir() / "nested" / "out" / name; }

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

}  // namespace

TEST_CASE("cli: demo prints seed 002's graph and writes the SVG and the .pt2") {
  const Run& run = demo_run();
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK(run.out.find(tdfx::testing::golden("seed_sequential.graph.txt")) != std::string::npos);
  CHECK(run.out.find("def forward(") != std::string::npos);
  CHECK(run.out.find("wrote " + demo_file("trace_sequential.svg").string()) != std::string::npos);
  CHECK(run.out.find("wrote " + demo_file("trace_sequential.pt2").string()) != std::string::npos);
  const std::string svg = tdfx::testing::read_text(demo_file("trace_sequential.svg").string());
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(fs::file_size(demo_file("trace_sequential.pt2")) > 0);
}

TEST_CASE("cli: show prints the signature, graph, code and readable module") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  const Run signature = run_tdfx("show " + pt2 + " --signature");
  CHECK(signature.status == 0);
  CHECK(signature.out.find("user_input input_x") != std::string::npos);
  CHECK(signature.out.find("user_input input_mask") != std::string::npos);
  const Run graph = run_tdfx("show " + pt2 + " --graph");
  CHECK(graph.status == 0);
  CHECK(graph.out.find("graph():") != std::string::npos);
  const Run code = run_tdfx("show " + pt2 + " --code");
  CHECK(code.status == 0);
  CHECK(code.out.find("def forward(") != std::string::npos);
  const Run readable = run_tdfx("show " + pt2 + " --readable");
  CHECK(readable.status == 0);
  CHECK(run_tdfx("show " + pt2).out == readable.out);
}

TEST_CASE("cli: show rejects two of its options at once") {
  REQUIRE(demo_run().status == 0);
  CHECK(run_tdfx("show " + quoted(demo_file("trace_sequential.pt2")) + " --graph --code").status ==
        1);
}

TEST_CASE("cli: render draws a PNG and rejects an unknown extension before loading") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  const fs::path png = demo_dir() / "out.png";
  const Run run = run_tdfx("render " + pt2 + " -o " + quoted(png));
  INFO(run.out);
  CHECK(run.status == 0);
  const std::string bytes = tdfx::testing::read_text(png.string());
  CHECK(bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0);

  const Run txt = run_tdfx("render " + pt2 + " -o " + quoted(demo_dir() / "out.txt"));
  CHECK(txt.status == 1);
  CHECK(txt.out.find(".svg") != std::string::npos);
  CHECK_FALSE(fs::exists(demo_dir() / "out.txt"));
  // The extension is checked first, so a missing input is still a usage error here.
  CHECK(run_tdfx("render /nonexistent.pt2 -o out.txt").status == 1);
}

TEST_CASE("cli: a file that is not an archive exits 2 naming the file") {
  fs::create_directories(demo_dir());
  const fs::path junk = demo_dir() / "junk.pt2";
  {
    std::ofstream out(junk, std::ios::binary);
    std::mt19937 random(42);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(random() & 0xff));
  }
  const Run show = run_tdfx("show " + quoted(junk));
  CHECK(show.status == 2);
  CHECK(show.out.find("tdfx: " + junk.string() + ": ") != std::string::npos);
  const Run render = run_tdfx("render " + quoted(junk) + " -o " + quoted(demo_dir() / "junk.svg"));
  CHECK(render.status == 2);
  CHECK(render.out.find(junk.string()) != std::string::npos);
}

TEST_CASE("cli: a missing file exits 2 naming the file") {
  const fs::path missing = demo_dir() / "missing.pt2";
  const Run run = run_tdfx("show " + quoted(missing));
  CHECK(run.status == 2);
  CHECK(run.out.find("tdfx: " + missing.string() + ": ") != std::string::npos);
}

TEST_CASE("cli: usage errors exit 1 and --help exits 0") {
  CHECK(run_tdfx("").status == 1);
  CHECK(run_tdfx("--no-such-option").status == 1);
  CHECK(run_tdfx("demo --no-such-option").status == 1);
  CHECK(run_tdfx("frobnicate").status == 1);
  CHECK(run_tdfx("show").status == 1);
  const Run help = run_tdfx("--help");
  CHECK(help.status == 0);
  CHECK(help.out.find("render") != std::string::npos);
  CHECK(help.out.find("Exit status") != std::string::npos);
  const Run show_help = run_tdfx("show --help");
  CHECK(show_help.status == 0);
  CHECK(show_help.out.find("--signature") != std::string::npos);
  CHECK(run_tdfx("demo --help").status == 0);
  CHECK(run_tdfx("render --help").status == 0);
}

TEST_CASE("cli: output lost to a full device exits 2 and says so") {
  REQUIRE_MESSAGE(fs::exists("/dev/full"), "the test needs /dev/full");
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  // stderr into the captured pipe, stdout into /dev/full.
  const auto to_full = [](const std::string& args) {
    return tdfx::testing::run_command("'" + tdfx_bin() + "' " + args + " 2>&1 >/dev/full");
  };
  const std::string lost = "tdfx: standard output: cannot write";
  for (const std::string& args :
       {"show " + pt2, "show " + pt2 + " --graph", "show " + pt2 + " --code",
        "show " + pt2 + " --signature", "render " + pt2 + " -o " + quoted(demo_dir() / "full.svg"),
        "demo --out " + quoted(demo_dir() / "full"), std::string("--help"),
        std::string("show --help")}) {
    CAPTURE(args);
    const Run run = to_full(args);
    CHECK(run.status == 2);
    CHECK(run.out.rfind(lost, 0) == 0);
  }
  // The same commands succeed when their output has somewhere to go.
  CHECK(tdfx::testing::run_command("'" + tdfx_bin() + "' show " + pt2 + " >/dev/null").status == 0);
}

TEST_CASE("cli: render refuses a graph over --max-nodes and draws it when raised") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  const fs::path svg = demo_dir() / "budget.svg";
  const Run refused = run_tdfx("render " + pt2 + " -o " + quoted(svg) + " --max-nodes 3");
  CHECK(refused.status == 1);
  CHECK(refused.out.rfind("tdfx: viz: the graph has ", 0) == 0);
  CHECK(refused.out.find("more than the 3 a drawing may have") != std::string::npos);
  CHECK(refused.out.find("--max-nodes N") != std::string::npos);
  CHECK_FALSE(fs::exists(svg));
  const Run drawn = run_tdfx("render " + pt2 + " -o " + quoted(svg) + " --max-nodes 100");
  CHECK(drawn.status == 0);
  CHECK(drawn.out == "wrote " + svg.string() + "\n");
  CHECK(tdfx::testing::read_text(svg.string()).find("<svg") != std::string::npos);
  const Run negative = run_tdfx("render " + pt2 + " -o " + quoted(svg) + " --max-nodes -1");
  CHECK(negative.status == 1);
  CHECK(negative.out.find("--max-nodes: expected a whole number, got '-1'") != std::string::npos);
}

TEST_CASE("cli: render --view draws the archive's module view and op view, golden DOT") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  for (const char* view : {"modules", "ops"}) {
    CAPTURE(view);
    const fs::path dot = demo_dir() / (std::string(view) + ".dot");
    const Run run = run_tdfx("render " + pt2 + " -o " + quoted(dot) + " --view " + view);
    CHECK(run.status == 0);
    CHECK(run.out == "wrote " + dot.string() + "\n");
    tdfx::testing::check_golden("tests/cli/golden",
                                "trace_sequential." + std::string(view) + ".dot",
                                tdfx::testing::read_text(dot.string()));
  }
  // The default is the op view; LR turns it.
  const fs::path plain = demo_dir() / "plain.dot";
  REQUIRE(run_tdfx("render " + pt2 + " -o " + quoted(plain)).status == 0);
  CHECK(tdfx::testing::read_text(plain.string()) ==
        tdfx::testing::read_text((demo_dir() / "ops.dot").string()));
  const fs::path lr = demo_dir() / "lr.dot";
  REQUIRE(run_tdfx("render " + pt2 + " -o " + quoted(lr) + " --view modules --rankdir LR").status ==
          0);
  CHECK(tdfx::testing::read_text(lr.string()).find("rankdir=LR") != std::string::npos);
  const fs::path svg = demo_dir() / "modules.svg";
  const Run drawn = run_tdfx("render " + pt2 + " -o " + quoted(svg) + " --view modules");
  CHECK(drawn.status == 0);
  CHECK(tdfx::testing::read_text(svg.string()).find("module:module.1") != std::string::npos);
}

TEST_CASE("cli: render refuses an unknown --view or --rankdir as a usage error") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  const fs::path out = demo_dir() / "never.svg";
  const Run view = run_tdfx("render " + pt2 + " -o " + quoted(out) + " --view graph");
  CHECK(view.status == 1);
  CHECK(view.out.find("--view: graph not in {ops,modules}") != std::string::npos);
  const Run rankdir = run_tdfx("render " + pt2 + " -o " + quoted(out) + " --rankdir BT");
  CHECK(rankdir.status == 1);
  CHECK(rankdir.out.find("--rankdir") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("cli: cleanup") { fs::remove_all(demo_dir()); }
