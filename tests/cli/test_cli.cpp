// The `tdfx` executable, run as a user would: exit codes, printed text, files written.
// Each case that writes files writes them into a ScratchDir of its own, so any case runs alone
// or in any order (`test_cli -tc="cli: show*"`).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/golden.h"
#include "tests/support/test_support.h"

namespace fs = std::filesystem;
using tdfx::testing::ScratchDir;

namespace {

using Run = tdfx::testing::CommandResult;

std::string tdfx_bin() { return tdfx::testing::bin_dir() + "/tdfx"; }

// Tables take the terminal's width from COLUMNS: the goldens are printed without it.
const bool kColumnsUnset = unsetenv("COLUMNS") == 0;

// Runs `tdfx ARGS` through the shell, stderr merged into the captured text.
Run run_tdfx(const std::string& args) {
  const std::string command = "'" + tdfx_bin() + "' " + args + " 2>&1";
  return tdfx::testing::run_command(command);
}

// `text` with every `dir` written as `$TMP`: what the command printed, without the temporary
// folder's random name, to compare whole.
std::string in_tmp(std::string text, const fs::path& dir) {
  const std::string from = dir.string();
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), "$TMP");
  }
  return text;
}

// Compares `actual` whole with tests/cli/golden/<file>, or writes it there when updating.
void check_golden(const std::string& file, const std::string& actual) {
  tdfx::testing::check_golden("tests/cli/golden", file, actual);
}

// The demo's output folder, made once for the whole binary (tracing and exporting is the slow
// part) by whichever case first needs it, and removed when the binary exits. Cases only read it.
struct Demo {
  ScratchDir dir{"tdfx_test_cli_demo"};
  Run run = run_tdfx("demo --out '" + (dir / "nested" / "out").string() + "'");

  fs::path file(const std::string& name) const { return dir.path() / "nested" / "out" / name; }
};

const Demo& demo() {
  static const Demo made;
  return made;
}

// The demo's archive, quoted for the shell; fails the case when the demo did not run.
std::string demo_pt2() {
  REQUIRE_MESSAGE(demo().run.status == 0, "tdfx demo failed: " << demo().run.out);
  return "'" + demo().file("trace_sequential.pt2").string() + "'";
}

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

}  // namespace

TEST_CASE("cli: demo prints seed 002's graph and writes the SVG, the page and the .pt2") {
  const Demo& made = demo();
  INFO(made.run.out);
  CHECK(made.run.status == 0);
  // The graph, the code and the files written, whole; the graph is seed 002's golden one.
  CHECK(made.run.out.find(tdfx::testing::golden("seed_sequential.graph.txt")) != std::string::npos);
  check_golden("demo.txt", in_tmp(made.run.out, made.dir.path()));
  // The page and the SVG hold Graphviz's layout (coordinates vary with its version): only
  // their kind is checked here; tests/viz checks the page's own parts.
  const std::string html = tdfx::testing::read_text(made.file("trace_sequential.html").string());
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  const std::string svg = tdfx::testing::read_text(made.file("trace_sequential.svg").string());
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(fs::file_size(made.file("trace_sequential.pt2")) > 0);
}

TEST_CASE("cli: show prints the signature, graph, code and readable module") {
  const std::string pt2 = demo_pt2();
  for (const std::string part : {"signature", "graph", "code", "readable"}) {
    CAPTURE(part);
    const Run run = run_tdfx("show " + pt2 + " --" + part);
    CHECK(run.status == 0);
    check_golden("show_" + part + ".txt", run.out);
  }
  CHECK(run_tdfx("show " + pt2).out == run_tdfx("show " + pt2 + " --readable").out);
}

TEST_CASE("cli: show rejects two of its options at once") {
  const Run run = run_tdfx("show " + demo_pt2() + " --graph --code");
  CHECK(run.status == 1);
  check_golden("show_two_options.txt", run.out);
}

TEST_CASE("cli: render draws a PNG and rejects an unknown extension before loading") {
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli");
  const fs::path png = dir / "out.png";
  const Run run = run_tdfx("render " + pt2 + " -o " + quoted(png));
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK(in_tmp(run.out, dir.path()) == "wrote $TMP/out.png\n");
  // Graphviz's PNG: only its signature is fixed.
  const std::string bytes = tdfx::testing::read_text(png.string());
  CHECK(bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0);

  const Run txt = run_tdfx("render " + pt2 + " -o " + quoted(dir / "out.txt"));
  CHECK(txt.status == 1);
  check_golden("render_unknown_extension.txt", in_tmp(txt.out, dir.path()));
  CHECK_FALSE(fs::exists(dir / "out.txt"));
  // The extension is checked first, so a missing input is still a usage error here.
  const Run missing = run_tdfx("render /nonexistent.pt2 -o " + quoted(dir / "out.txt"));
  CHECK(missing.status == 1);
  CHECK(in_tmp(missing.out, dir.path()) == in_tmp(txt.out, dir.path()));
}

TEST_CASE("cli: onnx writes the demo's program as a model ONNX's Python checker accepts") {
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli_onnx");
  const fs::path model = dir / "trace_sequential.onnx";
  const Run run = run_tdfx("onnx " + pt2 + " -o " + quoted(model));
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK(in_tmp(run.out, dir.path()) == "wrote $TMP/trace_sequential.onnx\n");
  // Debian's python3-onnx, apart from the C++ library tdfx links: the checker with full shape
  // inference, and the graph's input and output names (the demo's joined keys).
  const Run check = tdfx::testing::run_command(
      "/usr/bin/python3 -c \"import onnx, sys; m = onnx.load(sys.argv[1]); "
      "onnx.checker.check_model(m, full_check=True); "
      "print([i.name for i in m.graph.input], [o.name for o in m.graph.output])\" " +
      quoted(model) + " 2>&1");
  CHECK(check.status == 0);
  CHECK(check.out == "['input_x', 'input_mask'] ['intermediate_x', 'output_probabilities']\n");

  const Run txt = run_tdfx("onnx " + pt2 + " -o " + quoted(dir / "model.txt"));
  CHECK(txt.status == 1);
  check_golden("onnx_unknown_extension.txt", in_tmp(txt.out, dir.path()));
  CHECK_FALSE(fs::exists(dir / "model.txt"));
}

TEST_CASE("cli: a file that is not an archive exits 2 naming the file") {
  const ScratchDir dir("tdfx_test_cli");
  const fs::path junk = dir / "junk.pt2";
  {
    std::ofstream out(junk, std::ios::binary);
    std::mt19937 random(42);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(random() & 0xff));
  }
  const Run show = run_tdfx("show " + quoted(junk));
  CHECK(show.status == 2);
  check_golden("show_junk.txt", in_tmp(show.out, dir.path()));
  const Run render = run_tdfx("render " + quoted(junk) + " -o " + quoted(dir / "junk.svg"));
  CHECK(render.status == 2);
  CHECK(render.out == show.out);
  CHECK_FALSE(fs::exists(dir / "junk.svg"));
}

TEST_CASE("cli: a missing file exits 2 naming the file") {
  const ScratchDir dir("tdfx_test_cli");
  const fs::path missing = dir / "missing.pt2";
  const Run run = run_tdfx("show " + quoted(missing));
  CHECK(run.status == 2);
  CHECK(run.out ==
        "tdfx: " + missing.string() + ": cannot open the file: No such file or directory\n");
}

TEST_CASE("cli: usage errors exit 1 and --help exits 0") {
  // Each usage error's whole message, one after another in one golden file.
  std::string messages;
  for (const std::string args :
       {"", "--no-such-option", "demo --no-such-option", "frobnicate", "show"}) {
    CAPTURE(args);
    const Run run = run_tdfx(args);
    CHECK(run.status == 1);
    messages += "$ tdfx " + args + "\n" + run.out;
  }
  check_golden("usage_errors.txt", messages);
  const Run version = run_tdfx("--version");
  CHECK(version.status == 0);
  CHECK(version.out == "tdfx " TDFX_VERSION "\n");
  for (const std::string command : {"tdfx", "show", "demo", "render", "onnx", "run"}) {
    CAPTURE(command);
    const Run help = run_tdfx((command == "tdfx" ? "" : command + " ") + "--help");
    CHECK(help.status == 0);
    check_golden("help_" + command + ".txt", help.out);
  }
}

TEST_CASE("cli: output lost to a full device exits 2 and says so") {
  REQUIRE_MESSAGE(fs::exists("/dev/full"), "the test needs /dev/full");
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli");
  // stderr into the captured pipe, stdout into /dev/full.
  const auto to_full = [](const std::string& args) {
    return tdfx::testing::run_command("'" + tdfx_bin() + "' " + args + " 2>&1 >/dev/full");
  };
  for (const std::string& args :
       {"show " + pt2, "show " + pt2 + " --graph", "show " + pt2 + " --code",
        "show " + pt2 + " --signature", "render " + pt2 + " -o " + quoted(dir / "full.svg"),
        "demo --out " + quoted(dir / "full"), std::string("--help"), std::string("show --help")}) {
    CAPTURE(args);
    const Run run = to_full(args);
    CHECK(run.status == 2);
    CHECK(run.out == "tdfx: standard output: cannot write: No space left on device\n");
  }
  // The same commands succeed when their output has somewhere to go.
  CHECK(tdfx::testing::run_command("'" + tdfx_bin() + "' show " + pt2 + " >/dev/null").status == 0);
}

TEST_CASE("cli: render refuses a graph over --max-nodes and draws it when raised") {
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli");
  const fs::path svg = dir / "budget.svg";
  const Run refused = run_tdfx("render " + pt2 + " -o " + quoted(svg) + " --max-nodes 3");
  CHECK(refused.status == 1);
  check_golden("render_max_nodes.txt", refused.out);
  CHECK_FALSE(fs::exists(svg));
  const Run drawn = run_tdfx("render " + pt2 + " -o " + quoted(svg) + " --max-nodes 100");
  CHECK(drawn.status == 0);
  CHECK(drawn.out == "wrote " + svg.string() + "\n");
  // Graphviz's SVG: coordinates vary with its version.
  CHECK(tdfx::testing::read_text(svg.string()).find("<svg") != std::string::npos);
  const Run negative = run_tdfx("render " + pt2 + " -o " + quoted(svg) + " --max-nodes -1");
  CHECK(negative.status == 1);
  check_golden("render_max_nodes_negative.txt", negative.out);
}

TEST_CASE("cli: run draws the inputs not given from the seed and summarises the outputs") {
  const std::string pt2 = demo_pt2();
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
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli");
  const fs::path mask = dir / "mask.pt";
  const fs::path ints = dir / "ints.pt";
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
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli");
  const Run unknown = run_tdfx("run " + pt2 + " --input nope=x.pt");
  CHECK(unknown.status == 1);
  CHECK(unknown.out ==
        "tdfx: --input nope: the program has no input 'nope'; its inputs: input_x, input_mask\n");
  const Run malformed = run_tdfx("run " + pt2 + " --input input_x");
  CHECK(malformed.status == 1);
  check_golden("run_malformed_input.txt", malformed.out);
  const Run negative_seed = run_tdfx("run " + pt2 + " --seed -1");
  CHECK(negative_seed.status == 1);
  check_golden("run_negative_seed.txt", negative_seed.out);
  const fs::path absent = dir / "absent.pt";
  const Run missing = run_tdfx("run " + pt2 + " --input input_x=" + quoted(absent));
  CHECK(missing.status == 2);
  CHECK(missing.out ==
        "tdfx: " + absent.string() + ": cannot open the file: No such file or directory\n");

  // A crafted .pt whose pickle would run a shell command in Python's torch.load.
  const fs::path hostile = dir / "hostile";
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
  check_golden("run_not_archive.txt", in_tmp(not_archive.out, dir.path()));
}

TEST_CASE("cli: run --stats, --find-nonfinite and -o report what each node produced") {
  const ScratchDir dir("tdfx_test_cli");
  demo_pt2();  // fails the case when the demo did not run
  fs::copy_file(demo().file("trace_sequential.pt2"), dir / "p.pt2");
  // One row of x at 3e38 overflows in the first Linear: 3 of its outputs are -inf.
  const Run saved = tdfx::testing::run_command(
      "/usr/bin/python3 -c \"import sys, torch; torch.manual_seed(0); x = torch.randn(32, 100); "
      "x[3] = 3e38; torch.save({'input_x': x}, sys.argv[1])\" " +
      quoted(dir / "x.pt") + " 2>&1");
  REQUIRE_MESSAGE(saved.status == 0,
                  "Python's torch (Debian python3-torch) is required: " << saved.out);
  const std::string in_dir = "cd " + quoted(dir.path()) + " && '" + tdfx_bin() + "' ";

  const Run stats = tdfx::testing::run_command(in_dir + "run p.pt2 --seed 0 --stats 2>&1");
  CHECK(stats.status == 0);
  check_golden("run_stats.txt", stats.out);

  const Run found = tdfx::testing::run_command(
      in_dir + "run p.pt2 --input input_x=x.pt --find-nonfinite --stats -o overlay.dot 2>&1");
  CHECK(found.status == 3);  // found: a status scripts can test
  check_golden("run_find_nonfinite.txt", found.out);
  check_golden("run_overlay.dot", tdfx::testing::read_text((dir / "overlay.dot").string()));

  const Run finite = tdfx::testing::run_command(in_dir + "run p.pt2 --find-nonfinite 2>&1");
  CHECK(finite.status == 0);
  check_golden("run_finite.txt", finite.out);

  // Backward: gradient tables, and the non-finite loss of the overflowing input said first.
  // From ('intermediate', 'x') alone: the gradient of the probabilities' sum is zero, and what
  // a machine prints for it is its rounding noise, which differs between CPUs.
  const Run grads = tdfx::testing::run_command(
      in_dir +
      "run p.pt2 --seed 0 --backward --loss linear_1 --grad-stats --find-nonfinite-grad 2>&1");
  CHECK(grads.status == 0);
  check_golden("run_backward.txt", grads.out);
  // The gradients drawn: each node on the op view, each TensorDictModule on the module view;
  // narrower tables with --width, and from COLUMNS.
  const Run drawn = tdfx::testing::run_command(
      in_dir + "run p.pt2 --seed 0 --backward --loss linear_1 -o grad.dot && '" + tdfx_bin() +
      "' run p.pt2 --seed 0 --backward --loss linear_1 --view modules -o grad_modules.dot 2>&1");
  CHECK(drawn.status == 0);
  check_golden("run_backward_overlay.dot", tdfx::testing::read_text((dir / "grad.dot").string()));
  check_golden("run_backward_modules.dot",
               tdfx::testing::read_text((dir / "grad_modules.dot").string()));
  const Run narrow = tdfx::testing::run_command(
      in_dir + "run p.pt2 --seed 0 --backward --loss linear_1 --grad-stats --width 60 2>&1");
  CHECK(narrow.status == 0);
  check_golden("run_backward_width60.txt", narrow.out);
  const Run columns = tdfx::testing::run_command(
      "cd " + quoted(dir.path()) + " && COLUMNS=60 '" + tdfx_bin() +
      "' run p.pt2 --seed 0 --backward --loss linear_1 --grad-stats 2>&1");
  CHECK(columns.out == narrow.out);
  const Run nan_saved = tdfx::testing::run_command(
      "/usr/bin/python3 -c \"import sys, torch; torch.manual_seed(0); x = torch.randn(32, 100); "
      "x[5, 7] = float('nan'); torch.save({'input_x': x}, sys.argv[1])\" " +
      quoted(dir / "nan.pt") + " 2>&1");
  REQUIRE(nan_saved.status == 0);
  const Run bad_grad = tdfx::testing::run_command(
      in_dir +
      "run p.pt2 --input input_x=nan.pt --backward --loss output_probabilities "
      "--find-nonfinite-grad 2>&1");
  CHECK(bad_grad.status == 3);
  check_golden("run_backward_nonfinite.txt", bad_grad.out);
  const Run no_backward = tdfx::testing::run_command(in_dir + "run p.pt2 --grad-stats 2>&1");
  CHECK(no_backward.status == 1);
}

TEST_CASE("cli: run draws the inputs not given at the given inputs' batch size, and refuses two") {
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli");
  const fs::path x1 = dir / "x1.pt";
  const fs::path mask32 = dir / "mask32.pt";
  const Run saved = tdfx::testing::run_command(
      "/usr/bin/python3 -c \"import sys, torch; torch.save(torch.ones(1, 100), sys.argv[1]); "
      "torch.save(torch.ones(32, 10), sys.argv[2])\" " +
      quoted(x1) + " " + quoted(mask32) + " 2>&1");
  REQUIRE_MESSAGE(saved.status == 0,
                  "Python's torch (Debian python3-torch) is required: " << saved.out);
  const Run one = run_tdfx("run " + pt2 + " --input input_x=" + quoted(x1));
  INFO(one.out);
  CHECK(one.status == 0);
  check_golden("run_batch_of_one.txt", in_tmp(one.out, dir.path()));
  const Run two = run_tdfx("run " + pt2 + " --input input_x=" + quoted(x1) +
                           " --input input_mask=" + quoted(mask32));
  CHECK(two.status == 1);
  CHECK(two.out == "tdfx: --input input_mask=" + mask32.string() +
                       ": its batch size (s0) is 32, and input input_x's is 1; the inputs share "
                       "s0\n");
}

TEST_CASE("cli: run --backward takes a loss on every output of seed 000's model") {
  const ScratchDir dir("tdfx_test_cli_seed_000");
  const Run exported = tdfx::testing::run_command("cd " + quoted(dir.path()) + " && '" +
                                                  tdfx::testing::bin_dir() + "/export_module'");
  REQUIRE_MESSAGE(exported.status == 0, exported.out);
  const std::string in_dir = "cd " + quoted(dir.path()) + " && '" + tdfx_bin() + "' ";
  // A node the loss does not reach (the other half of the NormalParamExtractor's chunk) reads
  // "no gradient"; every tool goes on, the page with them.
  for (const std::string loss : {"sum", "hidden", "latent", "loc", "scale"}) {
    CAPTURE(loss);
    const Run run =
        tdfx::testing::run_command(in_dir + "run model.pt2 --seed 0 --backward --loss " + loss +
                                   " --grad-stats --find-nonfinite-grad -o page.html 2>&1");
    INFO(run.out);
    CHECK(run.status == 0);
    CHECK(run.out.find("every node's and parameter's gradient is finite") != std::string::npos);
    // export_module's weights are random (it seeds after making the model, as seed 000
    // does): which nodes, parameters and modules have no gradient is what does not vary.
    std::string without;
    std::istringstream lines(run.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("no gradient") != std::string::npos) {
        without += (without.empty() ? "" : " ") + line.substr(0, line.find(' '));
      }
    }
    const std::map<std::string, std::string> expected = {
        {"sum", ""},
        {"hidden",
         "linear_1 getitem getitem_1 add softplus add_1 clamp_min module.2.module.weight "
         "module.2.module.bias module.2 module.3"},
        {"latent", "getitem getitem_1 add softplus add_1 clamp_min module.3"},
        {"loc", "getitem_1 add softplus add_1 clamp_min"},
        {"scale", "getitem"}};
    CHECK(without == expected.at(loss));
  }
  // --save: outputs by key, as values Python's .numpy() takes.
  const Run saved = tdfx::testing::run_command(in_dir + "run model.pt2 --seed 0 --save run.pt");
  REQUIRE(saved.status == 0);
  const Run read = tdfx::testing::run_command(
      "cd " + quoted(dir.path()) +
      " && /usr/bin/python3 -c \"import torch; d = torch.load('run.pt'); "
      "print(sorted(d), all(t.numpy() is not None for t in d.values()))\" 2>&1");
  CHECK(read.out ==
        "['input:x', 'output:hidden', 'output:latent', 'output:loc', 'output:scale'] True\n");
}

TEST_CASE("cli: run --profile times every node of the program, then every module") {
  const std::string pt2 = demo_pt2();
  const Run run = run_tdfx("run " + pt2 + " --profile --repeats 3");
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
  const Run no_repeats = run_tdfx("run " + pt2 + " --repeats 0");
  CHECK(no_repeats.status == 1);
  check_golden("run_repeats_zero.txt", no_repeats.out);
}

TEST_CASE("cli: render --view draws the archive's module view and op view, golden DOT") {
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli");
  for (const std::string view : {"modules", "ops"}) {
    CAPTURE(view);
    const fs::path dot = dir / (view + ".dot");
    const Run run = run_tdfx("render " + pt2 + " -o " + quoted(dot) + " --view " + view);
    CHECK(run.status == 0);
    CHECK(run.out == "wrote " + dot.string() + "\n");
    check_golden("trace_sequential." + view + ".dot", tdfx::testing::read_text(dot.string()));
  }
  // The default is the op view; LR turns it.
  const fs::path plain = dir / "plain.dot";
  REQUIRE(run_tdfx("render " + pt2 + " -o " + quoted(plain)).status == 0);
  CHECK(tdfx::testing::read_text(plain.string()) ==
        tdfx::testing::read_text((dir / "ops.dot").string()));
  const fs::path lr = dir / "lr.dot";
  REQUIRE(run_tdfx("render " + pt2 + " -o " + quoted(lr) + " --view modules --rankdir LR").status ==
          0);
  check_golden("trace_sequential.modules_lr.dot", tdfx::testing::read_text(lr.string()));
  const fs::path svg = dir / "modules.svg";
  const Run drawn = run_tdfx("render " + pt2 + " -o " + quoted(svg) + " --view modules");
  CHECK(drawn.status == 0);
  // Graphviz's SVG: coordinates vary with its version; the module cluster's id does not.
  CHECK(tdfx::testing::read_text(svg.string()).find("module:module.1") != std::string::npos);
}

TEST_CASE("cli: render refuses an unknown --view or --rankdir as a usage error") {
  const std::string pt2 = demo_pt2();
  const ScratchDir dir("tdfx_test_cli");
  const fs::path out = dir / "never.svg";
  const Run view = run_tdfx("render " + pt2 + " -o " + quoted(out) + " --view graph");
  CHECK(view.status == 1);
  check_golden("render_unknown_view.txt", view.out);
  const Run rankdir = run_tdfx("render " + pt2 + " -o " + quoted(out) + " --rankdir BT");
  CHECK(rankdir.status == 1);
  check_golden("render_unknown_rankdir.txt", rankdir.out);
  CHECK_FALSE(fs::exists(out));
}
