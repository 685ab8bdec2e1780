// The `tdfx` executable, run as a user would: exit codes, printed text, files written.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
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

TEST_CASE("cli: demo prints seed 002's graph and writes the SVG, the page and the .pt2") {
  const Run& run = demo_run();
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK(run.out.find(tdfx::testing::golden("seed_sequential.graph.txt")) != std::string::npos);
  CHECK(run.out.find("def forward(") != std::string::npos);
  CHECK(run.out.find("wrote " + demo_file("trace_sequential.svg").string()) != std::string::npos);
  CHECK(run.out.find("wrote " + demo_file("trace_sequential.html").string()) != std::string::npos);
  CHECK(run.out.find("wrote " + demo_file("trace_sequential.pt2").string()) != std::string::npos);
  const std::string html = tdfx::testing::read_text(demo_file("trace_sequential.html").string());
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
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
  const Run run_help = run_tdfx("run --help");
  CHECK(run_help.status == 0);
  CHECK(run_help.out.find("--input") != std::string::npos);
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

TEST_CASE("cli: run draws the inputs not given from the seed and summarises the outputs") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  const Run run = run_tdfx("run " + pt2 + " --seed 0");
  INFO(run.out);
  CHECK(run.status == 0);
  // The probabilities are a softmax over 10 classes: their mean is 0.1 whatever the seed.
  CHECK(run.out ==
        "input       dtype    shape      source\n"
        "input_x     float32  [32, 100]  random (seed 0)\n"
        "input_mask  float32  [32, 10]   random (seed 0)\n"
        "\n"
        "output                       dtype    shape         min     max     mean\n"
        "('intermediate', 'x')        float32  [32, 10]  -0.5082  0.7981  0.06959\n"
        "('output', 'probabilities')  float32  [32, 10]  0.03864   0.413      0.1\n");
  CHECK(run_tdfx("run " + pt2).out == run.out);
  CHECK(run_tdfx("run " + pt2 + " --seed 1").out != run.out);
}

TEST_CASE("cli: run reads an input from a file torch.save wrote") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  const fs::path mask = demo_dir() / "mask.pt";
  const fs::path ints = demo_dir() / "ints.pt";
  const Run saved = tdfx::testing::run_command(
      "/usr/bin/python3 -c \"import sys, torch; torch.save({'input_mask': torch.zeros(32, 10)}, "
      "sys.argv[1]); torch.save(torch.zeros(32, 10, dtype=torch.int64), sys.argv[2])\" " +
      quoted(mask) + " " + quoted(ints) + " 2>&1");
  REQUIRE_MESSAGE(saved.status == 0,
                  "Python's torch (Debian python3-torch) is required: " << saved.out);
  const Run run = run_tdfx("run " + pt2 + " --input input_mask=" + quoted(mask));
  INFO(run.out);
  CHECK(run.status == 0);
  // A zero mask makes every logit 0: each probability is exactly 1/10.
  CHECK(run.out ==
        "input       dtype    shape      source\n"
        "input_x     float32  [32, 100]  random (seed 0)\n"
        "input_mask  float32  [32, 10]   " +
            mask.string() +
            "\n"
            "\n"
            "output                       dtype    shape         min     max     mean\n"
            "('intermediate', 'x')        float32  [32, 10]  -0.5082  0.7981  0.06959\n"
            "('output', 'probabilities')  float32  [32, 10]      0.1     0.1      0.1\n");

  const Run wrong = run_tdfx("run " + pt2 + " --input input_mask=" + quoted(ints));
  CHECK(wrong.status == 1);
  CHECK(wrong.out == "tdfx: --input input_mask=" + ints.string() +
                         ": the file's tensor is int64 [32, 10]; the program expects float32 "
                         "[s0, 10] (s0: any batch size)\n");
  const Run missing_key = run_tdfx("run " + pt2 + " --input input_x=" + quoted(mask));
  CHECK(missing_key.status == 1);
  CHECK(missing_key.out == "tdfx: --input input_x=" + mask.string() +
                               ": the file holds a dict without the key 'input_x'; its keys: "
                               "'input_mask'\n");
}

TEST_CASE("cli: run refuses unknown inputs, malformed arguments and hostile files") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  const Run unknown = run_tdfx("run " + pt2 + " --input nope=x.pt");
  CHECK(unknown.status == 1);
  CHECK(unknown.out ==
        "tdfx: --input nope: the program has no input 'nope'; its inputs: input_x, input_mask\n");
  const Run malformed = run_tdfx("run " + pt2 + " --input input_x");
  CHECK(malformed.status == 1);
  CHECK(malformed.out.find("--input: expected NAME=FILE, got 'input_x'") != std::string::npos);
  CHECK(run_tdfx("run " + pt2 + " --seed -1").status == 1);
  const fs::path absent = demo_dir() / "absent.pt";
  const Run missing = run_tdfx("run " + pt2 + " --input input_x=" + quoted(absent));
  CHECK(missing.status == 2);
  CHECK(missing.out ==
        "tdfx: " + absent.string() + ": cannot open the file: No such file or directory\n");

  // A crafted .pt whose pickle would run a shell command in Python's torch.load.
  const fs::path hostile = demo_dir() / "hostile";
  const Run made = tdfx::testing::run_command("/usr/bin/python3 " + tdfx::testing::source_dir() +
                                              "/tests/export/hostile_tensor_files.py " +
                                              quoted(hostile) + " 2>&1");
  REQUIRE_MESSAGE(made.status == 0, made.out);
  const fs::path crafted = hostile / "os_system.pt";
  const Run refused = run_tdfx("run " + pt2 + " --input input_x=" + quoted(crafted));
  CHECK(refused.status == 2);
  CHECK(refused.out == "tdfx: " + crafted.string() +
                           ": 'archive/data.pkl': at byte 2: global os.system is not allowed (a "
                           "tensor file may name only torch._utils._rebuild_tensor_v2, "
                           "collections.OrderedDict and torch's storage types)\n");
  const Run not_archive = run_tdfx("run " + quoted(crafted));
  CHECK(not_archive.status == 2);
  CHECK(not_archive.out.find("not a tdfx archive (no record 'program.json')") != std::string::npos);
}

TEST_CASE("cli: run --stats, --find-nonfinite and -o report what each node produced") {
  REQUIRE(demo_run().status == 0);
  const fs::path dir = demo_dir() / "debug";
  fs::create_directories(dir);
  fs::copy_file(demo_file("trace_sequential.pt2"), dir / "p.pt2",
                fs::copy_options::overwrite_existing);
  // One row of x at 3e38 overflows in the first Linear: 3 of its outputs are -inf.
  const Run saved = tdfx::testing::run_command(
      "/usr/bin/python3 -c \"import sys, torch; torch.manual_seed(0); x = torch.randn(32, 100); "
      "x[3] = 3e38; torch.save({'input_x': x}, sys.argv[1])\" " +
      quoted(dir / "x.pt") + " 2>&1");
  REQUIRE_MESSAGE(saved.status == 0,
                  "Python's torch (Debian python3-torch) is required: " << saved.out);
  const std::string in_dir = "cd " + quoted(dir) + " && '" + tdfx_bin() + "' ";

  const Run stats = tdfx::testing::run_command(in_dir + "run p.pt2 --seed 0 --stats 2>&1");
  CHECK(stats.status == 0);
  tdfx::testing::check_golden("tests/cli/golden", "run_stats.txt", stats.out);

  const Run found = tdfx::testing::run_command(
      in_dir + "run p.pt2 --input input_x=x.pt --find-nonfinite --stats -o overlay.dot 2>&1");
  CHECK(found.status == 0);
  tdfx::testing::check_golden("tests/cli/golden", "run_find_nonfinite.txt", found.out);
  tdfx::testing::check_golden("tests/cli/golden", "run_overlay.dot",
                              tdfx::testing::read_text((dir / "overlay.dot").string()));

  const Run finite = tdfx::testing::run_command(in_dir + "run p.pt2 --find-nonfinite 2>&1");
  CHECK(finite.status == 0);
  CHECK(finite.out.substr(finite.out.size() - 32) == "\nevery node's values are finite\n");
}

TEST_CASE("cli: run draws the inputs not given at the given inputs' batch size, and refuses two") {
  REQUIRE(demo_run().status == 0);
  const std::string pt2 = quoted(demo_file("trace_sequential.pt2"));
  const fs::path x1 = demo_dir() / "x1.pt";
  const fs::path mask32 = demo_dir() / "mask32.pt";
  const Run saved = tdfx::testing::run_command(
      "/usr/bin/python3 -c \"import sys, torch; torch.save(torch.ones(1, 100), sys.argv[1]); "
      "torch.save(torch.ones(32, 10), sys.argv[2])\" " +
      quoted(x1) + " " + quoted(mask32) + " 2>&1");
  REQUIRE_MESSAGE(saved.status == 0,
                  "Python's torch (Debian python3-torch) is required: " << saved.out);
  const Run one = run_tdfx("run " + pt2 + " --input input_x=" + quoted(x1));
  INFO(one.out);
  CHECK(one.status == 0);
  CHECK(one.out.find("input_mask  float32  [1, 10]   random (seed 0)\n") != std::string::npos);
  const Run two = run_tdfx("run " + pt2 + " --input input_x=" + quoted(x1) +
                           " --input input_mask=" + quoted(mask32));
  CHECK(two.status == 1);
  CHECK(two.out == "tdfx: --input input_mask=" + mask32.string() +
                       ": its batch size (s0) is 32, and input input_x's is 1; the inputs share "
                       "s0\n");
}

TEST_CASE("cli: run --profile times every node of the program, then every module") {
  REQUIRE(demo_run().status == 0);
  const Run run =
      run_tdfx("run " + quoted(demo_file("trace_sequential.pt2")) + " --profile --repeats 3");
  INFO(run.out);
  REQUIRE(run.status == 0);
  // Times vary; which nodes and modules are listed does not.
  const auto at = run.out.find("time per node (median of 3 runs; total ");
  REQUIRE(at != std::string::npos);
  std::set<std::string> nodes, modules;
  std::istringstream lines(run.out.substr(at));
  std::string line;
  std::getline(lines, line);  // the title
  std::getline(lines, line);  // the header
  REQUIRE(line.rfind("node ", 0) == 0);
  for (std::getline(lines, line); !line.empty(); std::getline(lines, line)) {
    nodes.insert(line.substr(0, line.find(' ')));
  }
  CHECK(nodes == std::set<std::string>{"input_mask", "input_x", "linear", "linear_1", "mul",
                                       "p_module_0_module_fc1_bias", "p_module_0_module_fc1_weight",
                                       "p_module_0_module_fc2_bias", "p_module_0_module_fc2_weight",
                                       "relu", "softmax"});
  std::getline(lines, line);
  CHECK(line == "time per module:");
  std::getline(lines, line);  // the header
  for (std::getline(lines, line); lines && !line.empty(); std::getline(lines, line)) {
    modules.insert(line.substr(0, line.find("  ")));
  }
  CHECK(modules == std::set<std::string>{"module.0", "module.1", "(outside modules)"});
  CHECK(run_tdfx("run " + quoted(demo_file("trace_sequential.pt2")) + " --repeats 0").status == 1);
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
