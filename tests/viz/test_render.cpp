#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tdfx/core/error.h"
#include "tdfx/viz/html.h"
#include "tdfx/viz/render.h"
#include "tests/graph/graphs.h"
#include "tests/support/golden.h"
#include "tests/viz/chain.h"
#include "tests/viz/xml_check.h"

using namespace tdfx;
using tdfx::testing::parse_xml;

namespace {

constexpr const char* kGolden = "tests/viz/golden";

/// Seed 002's sequential, with what a tracer knows about it.
testing::Chain seed_sequential() {
  testing::Chain c{testing::seed_sequential_graph(), {}};
  const TensorMeta f32{c10::ScalarType::Float, std::vector<int64_t>{32, 50}, std::nullopt,
                       c10::Device("cpu")};
  for (Node* node : c.graph.nodes()) {
    if (node->op() != OpCode::kPlaceholder && node->op() != OpCode::kOutput) {
      node->meta().tensor = f32;
      node->meta().td_module = "0";
    }
  }
  c.options.modules = {
      {"0", "Net()", {{"input", "x"}, {"input", "mask"}}, {"hidden", "output"}, "Net"}};
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

bool exists(const std::string& path) { return std::ifstream(path).good(); }

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
  c.options.modules = {
      {"m<1>", "Mod{x|y}", {NestedKey{"a|b", "<c>"}}, {"out&", "q\"}"}, "Mod{x|y}"}};
  c.options.output_keys = {"out&", "q\"}"};
  c.options.module_descriptions["m<1>"] = "Weird(a=<b>, c=\"{|}\")";
  c.options.title = "t<&>\"";
  return c;
}

/// Sets the process umask for its lifetime.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(umask(mask)) {}
  ~ScopedUmask() { umask(previous_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t previous_;
};

/// The permission bits of the file at `path`.
mode_t mode_of(const std::string& path) {
  struct stat info {};
  REQUIRE(stat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

/// How many times `needle` occurs in `text`.
size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

/// A chain of `n` relu nodes between a placeholder and the output: `n + 2` nodes.
Graph relu_chain(size_t n) {
  Graph g;
  Node* x = g.placeholder("x");
  for (size_t i = 0; i < n; ++i) x = g.call_function(Target::aten("aten::relu"), {x});
  g.output(x);
  return g;
}

}  // namespace

TEST_CASE("viz: escape_html makes every special character an entity") {
  CHECK(escape_html("a|<b>&\"{}'") == "a&#124;&lt;b&gt;&amp;&quot;&#123;&#125;&#39;");
  CHECK(escape_html("plain_text 1.0") == "plain_text 1.0");
  CHECK(escape_html("a\x01"
                    "b\nc\td\re\x1f\x7f") == "a\\\\x01b\\\\nc\\\\td\\\\re\\\\x1f\\\\x7f");
  CHECK(escape_markup("a\x01"
                      "b\nc\\d") == "a\\x01b\\nc\\d");
  // Graphviz reads `\\` in a label as one backslash, and `\N` as the node's name.
  CHECK(escape_html("obs\\N") == "obs\\\\N");
  const std::string svg =
      render_dot("digraph { a [label=<" + escape_html("obs\\N \\ \\\\x") + ">]; }", Format::kSvg);
  CHECK(svg.find(">obs\\N \\ \\\\x</text>") != std::string::npos);
  // Well-formed UTF-8 passes; stray bytes, overlong forms and surrogates are escaped.
  CHECK(escape_html("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") ==
        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  CHECK(escape_html("a\xff"
                    "b\xc3") == "a\\\\xffb\\\\xc3");
  CHECK(escape_markup("\xc0\xaf\xed\xa0\x80") == "\\xc0\\xaf\\xed\\xa0\\x80");
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
                           "Linear(in_features=100, out_features=50, <br/>bias=true)",
                           "weight: f32[50, 100]",
                           "bias: f32[50]",
                           "reads key: (&#39;input&#39;, &#39;x&#39;)",
                           "writes <b>&#39;hidden&#39;",
                           "writes <b>&#39;output&#39;",
                           "subgraph cluster_0",
                           "<b>0</b>  Net",
                           "value: f32[32, 50]",
                           "shape=box3d",
                           "shape=tab",
                           "shape=component",
                           "peripheries=2"}) {
    INFO(text);
    CHECK(dot.find(text) != std::string::npos);
  }
  // The DOT text whole; the list above says what it must show, so that a golden file
  // rewritten by a run cannot silently lose one of them.
  testing::check_golden(kGolden, "seed_sequential.ops.dot", dot);
  c.options.show_parameters = false;
  const std::string hidden = to_dot(c.graph, c.options);
  testing::check_golden(kGolden, "seed_sequential.ops_no_parameters.dot", hidden);
  CHECK(hidden.find("weight: f32") == std::string::npos);
  CHECK(hidden.find("Linear(in_features=100") != std::string::npos);
}

TEST_CASE("viz: the SVG is well-formed XML naming every node and key") {
  auto c = seed_sequential();
  const std::string svg = render(c.graph, Format::kSvg, c.options);
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  // The SVG's texts, whole and in order (its coordinates vary with Graphviz's version).
  const std::string text = doc.all_text();
  testing::check_golden(kGolden, "seed_sequential.ops.texts.txt", text);
  for (Node* node : c.graph.nodes()) {
    INFO(node->name());
    CHECK(text.find("%" + node->name() + "\n") != std::string::npos);
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
  testing::check_golden(kGolden, "hostile.ops.dot", dot);
  CHECK(dot.find("a|b") == std::string::npos);
  CHECK(dot.find("<c>") == std::string::npos);
  const std::string svg = render(c.graph, Format::kSvg, c.options);
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  // The SVG's texts whole (not its coordinates, which vary with Graphviz's version).
  const std::string text = doc.all_text();
  testing::check_golden(kGolden, "hostile.ops.texts.txt", text);
  for (const char* shown : {"('a|b', '<c>')", "('{d}', 'e&\"f')", "&\"{x}|<y>", "'out&'", "'q\"}'",
                            "Weird(a=<b>, c=\"{|}\")", "m<1>", "Mod{x|y}", "t<&>\""}) {
    INFO(shown);
    CHECK(text.find(shown) != std::string::npos);
  }
}

TEST_CASE("viz: PNG and PDF render through Graphviz's library") {
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
  const tdfx::testing::ScratchDir scratch("tdfx_viz");
  const std::string dir = scratch.path().string();
  save_diagram(c.graph, dir + "/g.svg", c.options);
  save_diagram(c.graph, dir + "/g.DOT", c.options);
  save_diagram(c.graph, dir + "/g.png", c.options);
  save_diagram(c.graph, dir + "/g.pdf", c.options);
  CHECK(tdfx::testing::read_text(dir + "/g.svg") == render(c.graph, Format::kSvg, c.options));
  CHECK(tdfx::testing::read_text(dir + "/g.DOT") == to_dot(c.graph, c.options));
  CHECK(tdfx::testing::read_text(dir + "/g.png") == render(c.graph, Format::kPng, c.options));
  CHECK(tdfx::testing::read_text(dir + "/g.pdf").compare(0, 4, "%PDF") == 0);
  CHECK(format_from_extension("a/b.c/x.Svg") == Format::kSvg);
  CHECK(format_from_extension("x.gv") == Format::kDot);
  for (const char* f : {"g.svg", "g.DOT", "g.png", "g.pdf"}) std::remove((dir + "/" + f).c_str());
}

TEST_CASE("viz: write rejects an unknown extension and leaves no file") {
  auto c = seed_sequential();
  const tdfx::testing::ScratchDir scratch("tdfx_viz");
  const std::string dir = scratch.path().string();
  CHECK_THROWS_WITH_AS(save_diagram(c.graph, dir + "/g.jpg", c.options),
                       ("cannot draw a graph to '" + dir +
                        "/g.jpg': unknown extension; expected one of .svg, .png, .pdf, .dot, .gv, "
                        ".html")
                           .c_str(),
                       tdfx::Error);
  CHECK_THROWS_AS(format_from_extension("no_extension"), tdfx::Error);
  CHECK_THROWS_AS(format_from_extension("dir.svg/file"), tdfx::Error);
  CHECK_FALSE(exists(dir + "/g.jpg"));
  CHECK(std::filesystem::is_empty(dir));  // empty: no temporary file left either
  CHECK_THROWS_WITH_AS(
      save_diagram(c.graph, dir + "/missing/g.svg", c.options),
      (dir + "/missing/g.svg: cannot write the file: No such file or directory").c_str(),
      tdfx::Error);
}

TEST_CASE("viz: write replaces an existing file atomically") {
  auto c = seed_sequential();
  const tdfx::testing::ScratchDir scratch("tdfx_viz");
  const std::string dir = scratch.path().string();
  const std::string path = dir + "/g.dot";
  std::ofstream(path) << "old";
  save_diagram(c.graph, path, c.options);
  CHECK(tdfx::testing::read_text(path) == to_dot(c.graph, c.options));
  std::remove(path.c_str());
  CHECK(std::filesystem::is_empty(dir));
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

TEST_CASE("viz: a long pipeline writes keys in their producers, not into the output") {
  auto chain = testing::module_chain(kMaxOutputEdges + 4);
  const std::string dot = to_dot(chain.graph, chain.options);
  testing::check_golden(kGolden, "chain_20.ops.dot", dot);
  CHECK(count(dot, "-> \"node:output\"") == 1);  // the invisible edge that keeps it at the bottom
  CHECK(count(dot, "\"node:relu_19\" -> \"node:output\" [style=invis];") == 1);
  // The key is a row of the node that wrote it: it cannot be drawn beside another one.
  const std::string relu_19 = dot.substr(dot.find("\"node:relu_19\" ["));
  CHECK(relu_19.substr(0, relu_19.find('\n')).find("writes <b>&#39;h20&#39;</b>") !=
        std::string::npos);
  auto small = testing::module_chain(3);
  const std::string small_dot = to_dot(small.graph, small.options);
  testing::check_golden(kGolden, "chain_3.ops.dot", small_dot);
  CHECK(count(small_dot, "  \"node:relu_2\" -> \"node:output\";\n") == 1);
}

// Its speed is measured in bench/bench_viz.cpp, not asserted here.
TEST_CASE("viz: a chain of 100 TensorDictModules renders to SVG with every node and key") {
  auto chain = testing::module_chain(100);
  const std::string svg = render(chain.graph, Format::kSvg, chain.options);
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  // The SVG's texts whole (its coordinates vary with Graphviz's version).
  const std::string text = doc.all_text();
  testing::check_golden(kGolden, "chain_100.ops.texts.txt", text);
  for (Node* node : chain.graph.nodes()) {
    CHECK(text.find("%" + node->name() + "\n") != std::string::npos);
  }
  for (const auto& key : chain.options.output_keys) {
    CHECK(text.find("'" + key.str() + "'\n") != std::string::npos);
  }
}

TEST_CASE("viz: write gives a drawing the mode the umask allows") {
  auto c = seed_sequential();
  const tdfx::testing::ScratchDir scratch("tdfx_viz");
  const std::string dir = scratch.path().string();
  {
    ScopedUmask mask(027);
    save_diagram(c.graph, dir + "/g.svg", c.options);
    save_diagram(c.graph, dir + "/g.dot", c.options);
  }
  CHECK(mode_of(dir + "/g.svg") == 0640);
  CHECK(mode_of(dir + "/g.dot") == 0640);
  {
    ScopedUmask mask(0);
    save_diagram(c.graph, dir + "/g.svg", c.options);
  }
  CHECK(mode_of(dir + "/g.svg") == 0666);
  for (const char* f : {"g.svg", "g.dot"}) std::remove((dir + "/" + f).c_str());
  CHECK(std::filesystem::is_empty(dir));  // no temporary file left
}

TEST_CASE("viz: a graph over the node budget is refused at once, naming how to raise it") {
  const Graph big = relu_chain(100000);
  CHECK_THROWS_WITH_AS(
      render(big, Format::kSvg),
      "viz: the graph has 100002 nodes, more than the 10000 a drawing may have; raise "
      "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, or write .dot "
      "text, which has no limit",
      tdfx::Error);
  const tdfx::testing::ScratchDir scratch("tdfx_viz");
  const std::string dir = scratch.path().string();
  CHECK_THROWS_WITH_AS(
      save_diagram(big, dir + "/big.png"),
      "viz: the graph has 100002 nodes, more than the 10000 a drawing may have; raise "
      "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, or "
      "write .dot text, which has no limit",
      tdfx::Error);
  CHECK(std::filesystem::is_empty(dir));  // nothing written

  const Graph small = relu_chain(kDefaultMaxNodes);  // two nodes over the default
  RenderOptions options;
  CHECK_THROWS_WITH_AS(render(small, Format::kSvg, options),
                       "viz: the graph has 10002 nodes, more than the 10000 a drawing may have; "
                       "raise RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it "
                       "anyway, or write .dot text, which has no limit",
                       tdfx::Error);
  options.max_nodes = 10001;
  CHECK_THROWS_WITH_AS(render(small, Format::kPdf, options),
                       "viz: the graph has 10002 nodes, more than the 10001 a drawing may have; "
                       "raise RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it "
                       "anyway, or write .dot text, which has no limit",
                       tdfx::Error);
  // A page asked for the module view of a graph without modules opens on its op view, which
  // must fit.
  options.view = View::kModules;
  CHECK_THROWS_WITH_AS(render(small, Format::kHtml, options),
                       "viz: the graph has 10002 nodes, more than the 10001 a drawing may have; "
                       "raise RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it "
                       "anyway, or write .dot text, which has no limit",
                       tdfx::Error);
  options.view = View::kOps;
  // DOT text is linear in the graph and has no budget.
  CHECK(render(small, Format::kDot, options) == to_dot(small, options));

  auto chain = testing::module_chain(5);  // 13 nodes
  chain.options.max_nodes = 12;
  CHECK_THROWS_WITH_AS(render(chain.graph, Format::kSvg, chain.options),
                       "viz: the graph has 13 nodes, more than the 12 a drawing may have; raise "
                       "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, "
                       "or write .dot text, which has no limit",
                       tdfx::Error);
  chain.options.max_nodes = 13;
  const auto doc = parse_xml(render(chain.graph, Format::kSvg, chain.options));
  CHECK_MESSAGE(doc.error.empty(), doc.error);
}

TEST_CASE("viz: nodes named like the notes of written keys stay apart from them") {
  // The notes "writes 'a'" and "writes 'b'" had the IDs key_0 and key_1, the names of these
  // nodes (a key ("key", "0") read in export style becomes the placeholder %key_0): each
  // note merged with a node, and the drawing had a cycle.
  Graph g;
  Node* key_0 = g.placeholder("key_0");
  Node* key_1 =
      g.create_node(OpCode::kCallFunction, Target::aten("aten::relu"), {key_0}, {}, "key_1");
  Node* neg = g.call_function(Target::aten("aten::neg"), {key_1});
  g.output(tuple({key_1, neg}));
  REQUIRE(key_1->name() == "key_1");
  RenderOptions options;
  options.output_keys = {"a", "b"};
  // Nodes are "node:NAME", and the keys rows of the nodes that wrote them: four distinct
  // objects, no cycle.
  testing::check_golden(kGolden, "key_named_nodes.ops.dot", to_dot(g, options));
  const std::string svg = render(g, Format::kSvg, options);
  REQUIRE_MESSAGE(parse_xml(svg).error.empty(), parse_xml(svg).error);
  CHECK(count(svg, "class=\"node\"") == 4);
  CHECK(count(svg, "class=\"edge\"") == 4);
}

TEST_CASE("viz: control characters in a string argument are shown escaped in the label") {
  Graph g;
  Node* a = g.placeholder("a");
  Node* b = g.placeholder("b");
  Node* div = g.call_function(Target::aten("aten::div.Tensor_mode"), {a, b},
                              {{"rounding_mode", std::string("x\x01y\nz\t\x7f\xff\0", 9)}});
  g.output(div);
  const std::string svg = render(g, Format::kSvg);
  const auto doc = parse_xml(svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  const std::vector<std::string> expected{"G",
                                          "node:a",
                                          "%a",
                                          "op: placeholder",
                                          "target: a",
                                          "#users: 1",
                                          "node:div",
                                          "%div",
                                          "op: call_function",
                                          "target: torch.div",
                                          "args: (%a, %b)",
                                          "kwargs: {rounding_mode: x\\x01y\\nz\\t\\x7f\\xff\\x00}",
                                          "#users: 1",
                                          "node:a->node:div",
                                          "node:b",
                                          "%b",
                                          "op: placeholder",
                                          "target: b",
                                          "#users: 1",
                                          "node:b->node:div",
                                          "node:output",
                                          "%output",
                                          "op: output",
                                          "args: (%div,)",
                                          "#users: 0",
                                          "node:div->node:output"};
  CHECK(doc.texts == expected);
}

TEST_CASE("viz: an error Graphviz recovers from is reported, with Graphviz's message") {
  // A label Graphviz cannot parse: it would draw the node's ID in its place and carry on.
  CHECK_THROWS_WITH_AS(render_dot("digraph G { a [label=<<b>x</i>>]; }", Format::kSvg),
                       "viz: Graphviz could not lay out the graph: Error: mismatched tag in line "
                       "1 \n... x</i> ...\nin label of node a",
                       tdfx::Error);
  CHECK_THROWS_WITH_AS(render_dot("digraph G { a -> }", Format::kSvg),
                       "viz: Graphviz could not parse the DOT text: Error: syntax error in line 1 "
                       "near '}'",
                       tdfx::Error);
  // The next drawing is not blamed for the earlier error.
  auto c = seed_sequential();
  CHECK(parse_xml(render(c.graph, Format::kSvg, c.options)).error.empty());
}

namespace {

/// Module boxes of a pipeline with nested sequentials and shared keys, as pipeline_modules
/// gives them: an encoder sequential writing "hidden" three times, an actor sequential and
/// a critic both reading it, and a masked action reading a pipeline input.
std::vector<ModuleBox> actor_critic_boxes() {
  auto box = [](std::string path, std::string type, std::string label, std::vector<NestedKey> in,
                std::vector<NestedKey> out, int64_t parameters, int64_t buffers = 0) {
    ModuleBox b{std::move(path), std::move(label), std::move(in), std::move(out)};
    b.type = std::move(type);
    b.parameters = parameters;
    b.buffers = buffers;
    return b;
  };
  auto seq = [](std::string path, std::vector<NestedKey> in, std::vector<NestedKey> out,
                int64_t parameters) {
    ModuleBox b{std::move(path), "", std::move(in), std::move(out)};
    b.type = "TensorDictSequential";
    b.sequential = true;
    b.parameters = parameters;
    return b;
  };
  const NestedKey loc{"agent", "loc"}, scale{"agent", "scale"}, logits{"agent", "logits"};
  return {seq("0", {"observation"}, {"hidden"}, 352),
          box("0.module.0", "Linear", "Linear(in_features=8, out_features=32, bias=true)",
              {"observation"}, {"hidden"}, 288),
          box("0.module.1", "ReLU", "ReLU()", {"hidden"}, {"hidden"}, 0),
          box("0.module.2", "BatchNorm1d",
              "BatchNorm1d(32, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)",
              {"hidden"}, {"hidden"}, 64, 65),
          seq("1", {"hidden"}, {logits, loc, scale}, 132),
          box("1.module.0", "Linear", "Linear(in_features=32, out_features=4, bias=true)",
              {"hidden"}, {logits}, 132),
          box("1.module.1", "NormalParamExtractor", "NormalParamExtractor()", {logits},
              {loc, scale}, 0),
          box("2", "Linear", "Linear(in_features=32, out_features=1, bias=true)", {"hidden"},
              {{"critic", "value"}}, 33),
          box("3", "Function", "", {loc, {"agent", "mask"}}, {{"agent", "action"}}, 0)};
}

RenderOptions actor_critic_options() {
  RenderOptions options;
  options.view = View::kModules;
  options.modules = actor_critic_boxes();
  options.output_keys = {"hidden",           {"agent", "logits"}, {"agent", "loc"},
                         {"agent", "scale"}, {"critic", "value"}, {"agent", "action"}};
  return options;
}

/// A call_module with parameters and buffers, and a description too long for one row.
testing::Chain batch_norm_graph() {
  testing::Chain c;
  Graph& g = c.graph;
  Node* td = g.placeholder("tensordict");
  Node* x = g.call_function(Target::getitem(), {td, NestedKey("hidden")});
  x->meta().td_module = "0";
  Node* bn = g.call_module("0.module", {x});
  bn->meta().td_module = "0";
  g.output(tuple({bn}));
  const TensorMeta f32_32{c10::ScalarType::Float, std::vector<int64_t>{32}, std::nullopt};
  const TensorMeta i64{c10::ScalarType::Long, std::vector<int64_t>{}, std::nullopt};
  ModuleBox box{"0", "", {"hidden"}, {"hidden"}};
  box.type = "BatchNorm1d";
  c.options.modules = {box};
  c.options.output_keys = {"hidden"};
  c.options.module_descriptions["0.module"] =
      "BatchNorm1d(32, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)";
  c.options.module_parameters["0.module"] = {{"weight", f32_32}, {"bias", f32_32}};
  c.options.module_buffers["0.module"] = {
      {"running_mean", f32_32}, {"running_var", f32_32}, {"num_batches_tracked", i64}};
  return c;
}

}  // namespace

TEST_CASE("viz: wrap_text breaks after spaces and cuts only words wider than a line") {
  CHECK(wrap_text("Linear(in_features=100, out_features=50)", 24) ==
        std::vector<std::string>{"Linear(in_features=100, ", "out_features=50)"});
  CHECK(wrap_text("abcdefgh", 3) == std::vector<std::string>{"abc", "def", "gh"});
  CHECK(wrap_text("", 10) == std::vector<std::string>{""});
  CHECK(wrap_text("short", 10) == std::vector<std::string>{"short"});
  // Never inside a UTF-8 character: "é" is two bytes.
  CHECK(wrap_text("\xc3\xa9\xc3\xa9", 3) == std::vector<std::string>{"\xc3\xa9", "\xc3\xa9"});
  CHECK(wrapped_html("a<b c>d", 4) == "a&lt;b <br/>c&gt;d");
}

TEST_CASE("viz: the op view of seed 002's sequential is the golden DOT, and so is its LR") {
  auto c = seed_sequential();
  testing::check_golden(kGolden, "seed_sequential.ops.dot", to_dot(c.graph, c.options));
  c.options.rankdir = Rankdir::kLeftRight;
  testing::check_golden(kGolden, "seed_sequential.ops_lr.dot", to_dot(c.graph, c.options));
}

TEST_CASE("viz: the op view shows buffers like parameters, and hides either") {
  auto c = batch_norm_graph();
  testing::check_golden(kGolden, "batch_norm.ops.dot", to_dot(c.graph, c.options));
  c.options.show_buffers = false;
  c.options.show_parameters = false;
  testing::check_golden(kGolden, "batch_norm.ops_hidden.dot", to_dot(c.graph, c.options));
}

TEST_CASE("viz: the op view of a 30-module chain is the golden DOT") {
  auto chain = testing::module_chain(30);
  testing::check_golden(kGolden, "chain_30.ops.dot", to_dot(chain.graph, chain.options));
}

TEST_CASE("viz: the module view of nested sequentials and shared keys is the golden DOT") {
  const RenderOptions options = actor_critic_options();
  const std::string dot = to_dot(Graph(), options);
  CHECK(dot == module_view_dot(options));
  testing::check_golden(kGolden, "actor_critic.modules.dot", dot);
  RenderOptions lr = options;
  lr.rankdir = Rankdir::kLeftRight;
  testing::check_golden(kGolden, "actor_critic.modules_lr.dot", module_view_dot(lr));
  const auto doc = parse_xml(render(Graph(), Format::kSvg, options));
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
}

namespace {

/// The top of each module's drawing in an SVG (its first point's y; SVG's y grows downwards),
/// by module path.
std::map<std::string, double> module_tops(const std::string& svg) {
  std::map<std::string, double> tops;
  const std::string open = "<title>module:";
  for (size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    const size_t name_end = svg.find("</title>", at);
    const std::string path = svg.substr(at + open.size(), name_end - at - open.size());
    if (path.find("&#45;&gt;") != std::string::npos) continue;  // an edge's title
    const size_t points = svg.find("points=\"", name_end) + 8;
    const size_t comma = svg.find(',', points);
    tops[path] = std::stod(svg.substr(comma + 1, svg.find(' ', comma) - comma - 1));
  }
  return tops;
}

}  // namespace

TEST_CASE("viz: left to right, the modules of a sequential read top to bottom, as in run order") {
  RenderOptions lr = actor_critic_options();
  lr.rankdir = Rankdir::kLeftRight;
  const auto tops = module_tops(render(Graph(), Format::kSvg, lr));
  REQUIRE(tops.size() == 7);
  CHECK(tops.at("0.module.0") < tops.at("0.module.1"));
  CHECK(tops.at("0.module.1") < tops.at("0.module.2"));
  CHECK(tops.at("1.module.0") < tops.at("1.module.1"));
  CHECK(tops.at("2") < tops.at("3"));
}

TEST_CASE("viz: the module view of a 30-module chain is rows of four, the golden DOT") {
  auto chain = testing::module_chain(30);
  chain.options.view = View::kModules;
  testing::check_golden(kGolden, "chain_30.modules.dot", to_dot(chain.graph, chain.options));
  const auto doc = parse_xml(render(chain.graph, Format::kSvg, chain.options));
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  // Eight rows of at most four: the page is wider than a strip would be.
  const std::string svg = render(chain.graph, Format::kSvg, chain.options);
  const auto width_at = svg.find("width=\"");
  const auto height_at = svg.find("height=\"");
  REQUIRE(width_at != std::string::npos);
  const double width = std::stod(svg.substr(width_at + 7));
  const double height = std::stod(svg.substr(height_at + 8));
  CHECK(height < 2 * width);
}

TEST_CASE("viz: the module view escapes keys, paths and types") {
  auto c = hostile();
  c.options.view = View::kModules;
  c.options.modules[0].type = "T<&>";
  testing::check_golden(kGolden, "hostile.modules.dot", to_dot(c.graph, c.options));
  const auto doc = parse_xml(render(c.graph, Format::kSvg, c.options));
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  // The SVG's texts whole (its coordinates vary with Graphviz's version).
  const std::string text = doc.all_text();
  testing::check_golden(kGolden, "hostile.modules.texts.txt", text);
  for (const char* shown : {"('a|b', '<c>')", "'out&'", "'q\"}'", "m<1>", "T<&>", "Mod{x|y}"}) {
    INFO(shown);
    CHECK(text.find(shown) != std::string::npos);
  }
}

TEST_CASE("viz: the module view refuses more modules than its budget, naming it") {
  auto chain = testing::module_chain(30);
  chain.options.view = View::kModules;
  chain.options.max_nodes = 29;
  CHECK_THROWS_WITH_AS(
      render(chain.graph, Format::kSvg, chain.options),
      "viz: the pipeline has 30 modules, more than the 29 a drawing may have; raise "
      "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, or write .dot "
      "text, which has no limit",
      tdfx::Error);
  CHECK(render(chain.graph, Format::kDot, chain.options) == to_dot(chain.graph, chain.options));
  chain.options.max_nodes = 30;
  CHECK(budget_refusal(chain.graph, chain.options, View::kModules).empty());
}

// The attacks of a module table that costs more than its module count: each refused at once
// (before any layout, so these tests take milliseconds), by the budget named.
TEST_CASE("viz: 20,004 modules reading one key are refused by the module budget") {
  testing::Chain c = testing::module_chain(1);
  for (int i = 0; i < 20003; ++i) {
    c.options.modules.push_back({"1." + std::to_string(i), "M", {NestedKey("h0")}, {}, "M"});
  }
  c.options.view = View::kModules;
  const std::string expected =
      "viz: the pipeline has 20004 modules, more than the 10000 a drawing may have; raise "
      "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, or write .dot "
      "text, which has no limit";
  CHECK(budget_refusal(c.graph, c.options, View::kModules) == expected);
  CHECK_THROWS_WITH_AS(render(c.graph, Format::kHtml, c.options), expected.c_str(), tdfx::Error);
  // The op view draws them too (as clusters, and as items of its page).
  c.options.view = View::kOps;
  CHECK_THROWS_WITH_AS(render(c.graph, Format::kHtml, c.options), expected.c_str(), tdfx::Error);
  // As many sequentials, each a box of both views.
  for (ModuleBox& box : c.options.modules) box.sequential = box.path != "0";
  CHECK(budget_refusal(c.graph, c.options, View::kOps) ==
        "viz: the pipeline has 20003 sequentials, more than the 10000 a drawing may have; raise "
        "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, or write .dot "
        "text, which has no limit");
}

TEST_CASE("viz: a module of 50,000 in-keys is refused by the key-cell budget") {
  testing::Chain c = testing::module_chain(1);
  for (int i = 0; i < 50000; ++i)
    c.options.modules[0].in_keys.emplace_back("k" + std::to_string(i));
  c.options.view = View::kModules;
  const std::string expected =
      "viz: the module view has 50002 key cells (in and out keys), more than the 30000 a "
      "drawing may have; raise RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it "
      "anyway, or write .dot text, which has no limit";
  CHECK_THROWS_WITH_AS(render(c.graph, Format::kSvg, c.options), expected.c_str(), tdfx::Error);
  // The op view of the same graph fits; its page leaves out the module view it cannot draw.
  c.options.view = View::kOps;
  CHECK(budget_refusal(c.graph, c.options, View::kOps).empty());
  CHECK(budget_refusal(c.graph, c.options, View::kModules) == expected);
}

TEST_CASE("viz: module boxes nested 7,000 deep are refused by the nesting budget") {
  testing::Chain c = testing::module_chain(1);
  std::string path = "1";
  for (int depth = 0; depth < 7000; ++depth) {
    c.options.modules.push_back({path, "TensorDictSequential", {}, {}, "Seq", true});
    path += ".0";
  }
  c.options.modules.push_back({path, "M", {NestedKey("h0")}, {NestedKey("z")}, "M"});
  const std::string expected =
      "viz: the pipeline's module boxes nest 7001 deep, more than the 64 levels a drawing may "
      "have; write .dot text, which has no limit";
  for (const View view : {View::kOps, View::kModules}) {
    c.options.view = view;
    CHECK_THROWS_WITH_AS(render(c.graph, Format::kHtml, c.options), expected.c_str(), tdfx::Error);
  }
  c.options.modules.resize(kMaxNesting);  // 63 sequentials and one module in the last
  c.options.modules.back().sequential = false;
  CHECK(budget_refusal(c.graph, c.options, View::kModules).empty());
}

TEST_CASE("viz: an op view of many edges per node is refused by the edge budget") {
  Graph g;
  std::vector<Argument> inputs;
  for (int i = 0; i < 300; ++i) inputs.emplace_back(g.placeholder("x" + std::to_string(i)));
  std::vector<Argument> outputs;
  for (int i = 0; i < 100; ++i) {
    outputs.emplace_back(g.call_function(Target::aten("aten::cat"), {ArgumentList{inputs}}));
  }
  g.output(ArgumentList{outputs, true});
  RenderOptions options;
  options.max_nodes = 401;  // 401 nodes fit; 30,100 edges are more than 1,604
  CHECK(budget_refusal(g, options, View::kOps) ==
        "viz: the graph has 30100 edges, more than the 1604 a drawing may have; raise "
        "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, or write .dot "
        "text, which has no limit");
  options.max_nodes = 30100 / kEdgesPerNode + 1;
  CHECK(budget_refusal(g, options, View::kOps).empty());
}

TEST_CASE("viz: a drawing that takes Graphviz past its time budget is stopped, saying so") {
  // 3,000 nodes, each reading two earlier ones at random: inside the node and edge limits,
  // and far more than a second of layout.
  Graph g;
  std::vector<Node*> nodes{g.placeholder("x")};
  uint64_t state = 12345;
  auto pick = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return nodes[(state >> 33) % nodes.size()];
  };
  for (int i = 0; i < 3000; ++i) {
    nodes.push_back(g.call_function(Target::aten("aten::add.Tensor"), {pick(), pick()}));
  }
  g.output(nodes.back());
  RenderOptions options;
  options.time_budget = 1;
  CHECK(budget_refusal(g, options, View::kOps).empty());
  CHECK_THROWS_WITH_AS(render(g, Format::kSvg, options),
                       "viz: Graphviz failed: its process took longer than 1 s, the drawing's "
                       "time budget (RenderOptions::time_budget, tdfx render --time-budget), and "
                       "was stopped",
                       Error);
}

TEST_CASE("viz: views are named ops and modules") {
  CHECK(to_string(View::kOps) == "ops");
  CHECK(to_string(View::kModules) == "modules");
  CHECK(view_from_string("modules") == View::kModules);
  CHECK(view_from_string("ops") == View::kOps);
  CHECK_FALSE(view_from_string("Modules").has_value());
  CHECK(module_node_id("0.module.1") == "module:0.module.1");
}

TEST_CASE("viz: a PNG larger than cairo's bitmaps is refused, not shrunk to a strip") {
  auto chain = testing::module_chain(300);
  CHECK_THROWS_WITH_AS(render(chain.graph, Format::kPng, chain.options),
                       doctest::Contains("pixels, more than a PNG holds (32767 a side), and "
                                         "Graphviz would shrink it to fit; write .svg or .pdf, "
                                         "or draw the module view"),
                       Error);
  // Scaled to a `size` of the DOT's own, the same drawing fits.
  std::string sized = to_dot(chain.graph, chain.options);
  sized.replace(sized.find("graph ["), 7, "graph [size=\"10,10\", ");
  CHECK(render_dot(sized, Format::kPng).substr(1, 3) == "PNG");
  chain.options.view = View::kModules;
  CHECK(render(chain.graph, Format::kPng, chain.options).substr(1, 3) == "PNG");
}
