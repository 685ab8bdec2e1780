#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "tests/graph/graphs.h"
#include "tests/viz/chain.h"
#include "tests/viz/xml_check.h"
#include "viz/html.h"
#include "viz/render.h"

using namespace tdfx;
using tdfx::testing::parse_xml;

namespace {

/// Seed 002's sequential, with what a tracer knows about it.
testing::Chain seed_sequential() {
  testing::Chain c{testing::seed_sequential_graph(), {}};
  const TensorMeta f32{c10::ScalarType::Float, std::vector<int64_t>{32, 50}, c10::Device("cpu")};
  for (Node* node : c.graph.nodes()) {
    if (node->op() != OpCode::kPlaceholder && node->op() != OpCode::kOutput) {
      node->meta().tensor = f32;
      node->meta().td_module = "0";
    }
  }
  c.options.modules = {
      {"0", "TensorDictModule(Net)", {{"input", "x"}, {"input", "mask"}}, {"hidden", "output"}}};
  c.options.output_keys = {"hidden", "output"};
  c.options.module_descriptions = {
      {"0.module.fc1", "Linear(in_features=100, out_features=50, bias=true)"},
      {"0.module.fc2", "Linear(in_features=50, out_features=50, bias=true)"}};
  c.options.module_parameters["0.module.fc1"] = {
      {"weight", {c10::ScalarType::Float, std::vector<int64_t>{50, 100}, std::nullopt}},
      {"bias", {c10::ScalarType::Float, std::vector<int64_t>{50}, std::nullopt}}};
  c.options.title = "seed 002";
  return c;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

std::string temp_dir() {
  std::string dir = "/tmp/tdfx_viz_XXXXXX";
  REQUIRE(mkdtemp(dir.data()) != nullptr);
  return dir;
}

/// A graph whose keys, arguments and descriptions hold every character
/// that could break a DOT, HTML or XML label.
testing::Chain hostile() {
  testing::Chain c;
  Graph& g = c.graph;
  Node* td = g.placeholder("tensordict");
  Node* a = g.call_function(Target::getitem(), {td, NestedKey{"a|b", "<c>"}});
  Node* b = g.call_function(Target::getitem(), {td, NestedKey{"{d}", "e&\"f"}});
  Node* div = g.call_function(Target::aten("aten::div.Tensor_mode"), {a, b},
                              {{"rounding_mode", "&\"{x}|<y>"}});
  div->meta().td_module = "m<1>";
  Node* mod = g.call_module("m<1>", {div});
  mod->meta().td_module = "m<1>";
  g.output(tuple({div, mod}));
  c.options.modules = {{"m<1>", "Mod{x|y}", {NestedKey{"a|b", "<c>"}}, {"out&", "q\"}"}}};
  c.options.output_keys = {"out&", "q\"}"};
  c.options.module_descriptions["m<1>"] = "Weird(a=<b>, c=\"{|}\")";
  c.options.title = "t<&>\"";
  return c;
}

}  // namespace

TEST_CASE("viz: escape_html makes every special character an entity") {
  CHECK(escape_html("a|<b>&\"{}'") == "a&#124;&lt;b&gt;&amp;&quot;&#123;&#125;&#39;");
  CHECK(escape_html("plain_text 1.0") == "plain_text 1.0");
  CHECK(dot_quote("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(truncate_text("abcdef", 3) == "abc...");
  CHECK(truncate_text("abc", 3) == "abc");
}

TEST_CASE("viz: to_dot gives identical bytes for the same graph") {
  auto c = seed_sequential();
  const std::string first = to_dot(c.graph, c.options);
  CHECK(first == to_dot(c.graph, c.options));
  auto again = seed_sequential();
  CHECK(first == to_dot(again.graph, again.options));
  CHECK(render(c.graph, Format::kSvg, c.options) ==
        render(again.graph, Format::kSvg, again.options));
}

TEST_CASE("viz: each node shows what FxGraphDrawer shows, and the pipeline's keys") {
  auto c = seed_sequential();
  const std::string dot = to_dot(c.graph, c.options);
  for (const char* text : {"%tensordict",
                           "%getitem",
                           "%_0_fc1",
                           "%relu",
                           "%_0_fc2",
                           "%getitem_1",
                           "%mul",
                           "%softmax",
                           "%output",
                           "op: placeholder",
                           "op: call_function",
                           "op: call_module",
                           "op: output",
                           "target: operator.getitem",
                           "target: torch.softmax",
                           "target: 0.module.fc1",
                           "target: operator.mul",
                           "kwargs: &#123;dim: 1&#125;",
                           "args: (%mul,)",
                           "#users: 2",
                           "#users: 0",
                           "Linear(in_features=100, out_features=50, bias=true)",
                           "weight: f32[50, 100]",
                           "bias: f32[50]",
                           "reads key: (&#39;input&#39;, &#39;x&#39;)",
                           "writes <b>&#39;hidden&#39;",
                           "writes <b>&#39;output&#39;",
                           "subgraph cluster_0",
                           "TensorDictModule(Net)",
                           "xlabel=<f32[32, 50]>",
                           "shape=box3d",
                           "shape=tab",
                           "shape=component",
                           "peripheries=2"}) {
    INFO(text);
    CHECK(dot.find(text) != std::string::npos);
  }
  c.options.show_parameters = false;
  const std::string hidden = to_dot(c.graph, c.options);
  CHECK(hidden.find("weight: f32") == std::string::npos);
  CHECK(hidden.find("Linear(in_features=100") != std::string::npos);
}

TEST_CASE("viz: the SVG is well-formed XML naming every node and key") {
  auto c = seed_sequential();
  const std::string svg = render(c.graph, Format::kSvg, c.options);
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  const std::string text = doc.all_text();
  for (Node* node : c.graph.nodes()) {
    INFO(node->name());
    CHECK(text.find("%" + node->name()) != std::string::npos);
  }
  for (const char* key :
       {"'hidden'", "'output'", "('input', 'x')", "('input', 'mask')", "seed 002"}) {
    INFO(key);
    CHECK(text.find(key) != std::string::npos);
  }
}

TEST_CASE("viz: keys, arguments and descriptions with DOT and HTML characters are escaped") {
  auto c = hostile();
  const std::string dot = to_dot(c.graph, c.options);
  CHECK(dot.find("a|b") == std::string::npos);
  CHECK(dot.find("<c>") == std::string::npos);
  const std::string svg = render(c.graph, Format::kSvg, c.options);
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  const std::string text = doc.all_text();
  for (const char* shown : {"('a|b', '<c>')", "('{d}', 'e&\"f')", "&\"{x}|<y>", "'out&'", "'q\"}'",
                            "Weird(a=<b>, c=\"{|}\")", "m<1>", "Mod{x|y}", "t<&>\""}) {
    INFO(shown);
    CHECK(text.find(shown) != std::string::npos);
  }
}

TEST_CASE("viz: PNG and PDF render in process") {
  auto c = seed_sequential();
  const std::string png = render(c.graph, Format::kPng, c.options);
  REQUIRE(png.size() > 8);
  CHECK(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  const std::string pdf = render(c.graph, Format::kPdf, c.options);
  CHECK(pdf.compare(0, 4, "%PDF") == 0);
  CHECK(render(c.graph, Format::kDot, c.options) == to_dot(c.graph, c.options));
}

TEST_CASE("viz: write chooses the format from the extension") {
  auto c = seed_sequential();
  const std::string dir = temp_dir();
  write(c.graph, dir + "/g.svg", c.options);
  write(c.graph, dir + "/g.DOT", c.options);
  write(c.graph, dir + "/g.png", c.options);
  write(c.graph, dir + "/g.pdf", c.options);
  CHECK(read_file(dir + "/g.svg").find("<svg") != std::string::npos);
  CHECK(read_file(dir + "/g.DOT") == to_dot(c.graph, c.options));
  CHECK(read_file(dir + "/g.png").compare(0, 4, "\x89PNG") == 0);
  CHECK(read_file(dir + "/g.pdf").compare(0, 4, "%PDF") == 0);
  CHECK(format_from_extension("a/b.c/x.Svg") == Format::kSvg);
  CHECK(format_from_extension("x.gv") == Format::kDot);
  for (const char* f : {"g.svg", "g.DOT", "g.png", "g.pdf"}) std::remove((dir + "/" + f).c_str());
  rmdir(dir.c_str());
}

TEST_CASE("viz: write rejects an unknown extension and leaves no file") {
  auto c = seed_sequential();
  const std::string dir = temp_dir();
  CHECK_THROWS_WITH_AS(write(c.graph, dir + "/g.jpg", c.options), doctest::Contains("g.jpg"),
                       tdfx::Error);
  CHECK_THROWS_WITH_AS(write(c.graph, dir + "/g.jpg", c.options),
                       doctest::Contains(".svg, .png, .pdf, .dot"), tdfx::Error);
  CHECK_THROWS_AS(format_from_extension("no_extension"), tdfx::Error);
  CHECK_THROWS_AS(format_from_extension("dir.svg/file"), tdfx::Error);
  CHECK_FALSE(exists(dir + "/g.jpg"));
  CHECK(rmdir(dir.c_str()) == 0);  // empty: no temporary file left either
  CHECK_THROWS_WITH_AS(write(c.graph, dir + "/missing/g.svg", c.options),
                       doctest::Contains("missing/g.svg"), tdfx::Error);
}

TEST_CASE("viz: write replaces an existing file atomically") {
  auto c = seed_sequential();
  const std::string dir = temp_dir();
  const std::string path = dir + "/g.dot";
  std::ofstream(path) << "old";
  write(c.graph, path, c.options);
  CHECK(read_file(path) == to_dot(c.graph, c.options));
  std::remove(path.c_str());
  CHECK(rmdir(dir.c_str()) == 0);
}

TEST_CASE("viz: several threads render at once") {
  auto c = seed_sequential();
  auto chain = testing::module_chain(5);
  const std::string expected = render(c.graph, Format::kSvg, c.options);
  const std::string expected_chain = render(chain.graph, Format::kSvg, chain.options);
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        results[t] = t % 2 ? render(chain.graph, Format::kSvg, chain.options)
                           : render(c.graph, Format::kSvg, c.options);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < results.size(); ++t) {
    CHECK(results[t] == (t % 2 ? expected_chain : expected));
  }
}

TEST_CASE("viz: a long pipeline writes keys beside their producers, not into the output") {
  auto chain = testing::module_chain(kMaxOutputEdges + 4);
  const std::string dot = to_dot(chain.graph, chain.options);
  size_t into_output = 0;
  for (size_t at = dot.find("-> \"output\""); at != std::string::npos;
       at = dot.find("-> \"output\"", at + 1)) {
    ++into_output;
  }
  CHECK(into_output == 1);  // the invisible edge that keeps the output at the bottom
  CHECK(dot.find("\"relu_19\" -> \"key_19\"") != std::string::npos);
  auto small = testing::module_chain(3);
  const std::string small_dot = to_dot(small.graph, small.options);
  CHECK(small_dot.find("\"key_2\" -> \"output\" [style=dashed]") != std::string::npos);
}

// Its speed is measured in bench/bench_viz.cpp, not asserted here.
TEST_CASE("viz: a chain of 100 TensorDictModules renders to SVG with every node and key") {
  auto chain = testing::module_chain(100);
  const std::string svg = render(chain.graph, Format::kSvg, chain.options);
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  const std::string text = doc.all_text();
  for (Node* node : chain.graph.nodes()) {
    CHECK(text.find("%" + node->name() + "\n") != std::string::npos);
  }
  for (const auto& key : chain.options.output_keys) {
    CHECK(text.find("'" + key.str() + "'\n") != std::string::npos);
  }
}
