// The interactive page's data (viz/page.h): items per drawn element, escaping, determinism.
// What the page does in a browser is tests/viz/browser_page.py's job.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tdfx/core/error.h"
#include "tdfx/viz/module_view.h"
#include "tdfx/viz/page.h"
#include "tdfx/viz/render.h"
#include "tests/graph/graphs.h"
#include "tests/support/golden.h"
#include "tests/support/test_support.h"
#include "tests/viz/chain.h"
#include "tests/viz/xml_check.h"

using namespace tdfx;
using Json = nlohmann::json;

namespace {

const std::string kHostileKey = "</script><script>document.title='pwned'</script>";

/// Seed 002's sequential as a tracer annotates it: shapes, module paths, one box.
testing::Chain annotated_sequential() {
  testing::Chain c{testing::seed_sequential_graph(), {}};
  const TensorMeta f32{c10::ScalarType::Float, std::vector<int64_t>{32, 50}, std::nullopt,
                       c10::Device("cpu")};
  for (Node* node : c.graph.nodes()) {
    if (node->op() == OpCode::kPlaceholder || node->op() == OpCode::kOutput) continue;
    node->meta().tensor = f32;
    node->meta().td_module = "0";
    node->meta().module_path = "0.module";
    node->meta().module_type = "Net()";
  }
  c.options.modules = {
      {"0", "TensorDictModule(Net)", {{"input", "x"}, {"input", "mask"}}, {"hidden", "output"}}};
  c.options.output_keys = {"hidden", "output"};
  c.options.module_descriptions = {
      {"0.module.fc1", "Linear(in_features=100, out_features=50, bias=true)"}};
  c.options.module_parameters["0.module.fc1"] = {
      {"weight", {c10::ScalarType::Float, std::vector<int64_t>{50, 100}, std::nullopt}}};
  return c;
}

/// A pipeline whose keys, module paths and title are markup.
testing::Chain hostile_pipeline() {
  testing::Chain c;
  Graph& g = c.graph;
  Node* td = g.placeholder("tensordict");
  Node* x = g.call_function(Target::getitem(),
                            {td, NestedKey{"<img src=x onerror=alert(1)>", kHostileKey}});
  x->meta().td_module = "<b>m</b>";
  Node* relu = g.call_function(Target::aten("aten::relu"), {x});
  relu->meta().td_module = "<b>m</b>";
  relu->meta().module_path = "<b>m</b>.module";
  g.output(tuple({relu}));
  c.options.modules = {{"<b>m</b>", "M&<i>", {NestedKey(kHostileKey)}, {NestedKey("&amp;")}}};
  c.options.output_keys = {NestedKey("&amp;")};
  c.options.title = "<title>&";
  return c;
}

const Json& item_of(const Json& view, const std::string& id) {
  for (const Json& item : view["items"]) {
    if (item["id"] == id) return item;
  }
  FAIL("no item " << id);
  static const Json none;
  return none;
}

/// An item's fields as `label: text` lines, refs joined by spaces.
std::string fields_of(const Json& item) {
  std::string out;
  for (const Json& field : item["fields"]) {
    std::string text = field["text"];
    for (const Json& ref : field["refs"])
      text += (text.empty() ? "" : " ") + ref.get<std::string>();
    out += field["label"].get<std::string>() + ": " + text + "\n";
  }
  return out;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("page: a node's item holds op, target, args, meta, users, module and its line of code") {
  auto c = annotated_sequential();
  const Json data = Json::parse(page_data({op_view(c.graph, c.options)}, ""));
  const Json& view = data["views"][0];
  CHECK(view["name"] == "ops");
  CHECK(fields_of(item_of(view, "node:mul")) ==
        "op: call_function\n"
        "target: operator.mul\n"
        "args: (%_0_fc2, %getitem_1)\n"
        "kwargs: {}\n"
        "dtype: torch.float32\n"
        "shape: [32, 50]\n"
        "users: node:softmax\n"
        "module: 0.module (Net())\n"
        "TensorDictModule: 0\n"
        "code: mul = _0_fc2 * getitem_1;  getitem_1 = None\n");
  CHECK(fields_of(item_of(view, "node:_0_fc1")) ==
        "op: call_module\n"
        "target: 0.module.fc1\n"
        "args: (%getitem,)\n"
        "kwargs: {}\n"
        "description: Linear(in_features=100, out_features=50, bias=true)\n"
        "parameter weight: torch.float32 [50, 100]\n"
        "dtype: torch.float32\n"
        "shape: [32, 50]\n"
        "users: node:relu\n"
        "module: 0.module (Net())\n"
        "TensorDictModule: 0\n"
        "code: _0_fc1 = getattr(self, \"0\").module.fc1(getitem);  getitem = None\n");
  CHECK(fields_of(item_of(view, "node:getitem_1")) ==
        "op: call_function\n"
        "target: operator.getitem\n"
        "reads key: ('input', 'mask')\n"
        "args: (%tensordict, (input, mask))\n"
        "kwargs: {}\n"
        "dtype: torch.float32\n"
        "shape: [32, 50]\n"
        "users: node:mul\n"
        "module: 0.module (Net())\n"
        "TensorDictModule: 0\n"
        "code: getitem_1 = tensordict[('input', 'mask')];  tensordict = None\n");
  CHECK(fields_of(item_of(view, "node:softmax")) ==
        "op: call_function\n"
        "target: torch.softmax\n"
        "args: (%mul,)\n"
        "kwargs: {dim: 1}\n"
        "dtype: torch.float32\n"
        "shape: [32, 50]\n"
        "writes: ['output']\n"
        "users: node:output\n"
        "module: 0.module (Net())\n"
        "TensorDictModule: 0\n"
        "code: softmax = torch.softmax(mul, dim = 1);  mul = None\n");
  CHECK(fields_of(item_of(view, "node:tensordict")) ==
        "op: placeholder\n"
        "target: tensordict\n"
        "users: node:getitem node:getitem_1\n"
        "code: tensordict\n");
  // No note of its own: a written key is a row of the node that writes it.
  CHECK(std::none_of(view["items"].begin(), view["items"].end(),
                     [](const Json& item) { return item["kind"] == "key"; }));
  CHECK(fields_of(item_of(view, "cluster_0")) ==
        "module path: 0\n"
        "module: TensorDictModule(Net)\n"
        "in keys: [('input', 'x'), ('input', 'mask')]\n"
        "out keys: ['hidden', 'output']\n"
        "nodes: node:getitem node:_0_fc1 node:relu node:_0_fc2 node:getitem_1 node:mul "
        "node:softmax\n");
  CHECK(item_of(view, "cluster_0")["module"] == "0");
  const Json& search = item_of(view, "node:getitem_1")["search"];
  CHECK(std::find(search.begin(), search.end(), "('input', 'mask')") != search.end());
}

TEST_CASE("page: every item is an element of the drawing, by the Graphviz ID in its title") {
  auto c = annotated_sequential();
  const PageView view = op_view(c.graph, c.options);
  CHECK(view.svg.rfind("<svg", 0) == 0);
  const auto doc = testing::parse_xml(view.svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  // 9 nodes (a written key is a row of the node that writes it), 1 box.
  REQUIRE(view.items.size() == 10);
  for (const PageItem& item : view.items) {
    INFO(item.id);
    CHECK(std::find(doc.texts.begin(), doc.texts.end(), item.id) != doc.texts.end());
  }
}

TEST_CASE(
    "page: the module view has one item per TensorDictModule node and per border key of its "
    "drawing") {
  auto c = annotated_sequential();
  const PageView view = module_view(c.graph, c.options);
  CHECK(view.name == "modules");
  const auto doc = testing::parse_xml(view.svg);
  REQUIRE_MESSAGE(doc.error.empty(), doc.error);
  std::vector<std::string> expected;
  for (const ModuleBox& box : c.options.modules) {
    if (!box.sequential) expected.push_back(module_node_id(box.path));
  }
  const ModuleViewBorder border = module_view_border(c.options);
  for (size_t i = 0; i < border.inputs.size(); ++i) expected.push_back(fmt::format("input:{}", i));
  for (size_t i = 0; i < border.outputs.size(); ++i) {
    expected.push_back(fmt::format("output:{}", i));
  }
  CHECK(border.inputs == std::vector<NestedKey>{{"input", "x"}, {"input", "mask"}});
  CHECK(border.outputs == std::vector<NestedKey>{"hidden", "output"});
  std::vector<std::string> ids;
  for (const PageItem& item : view.items) {
    INFO(item.id);
    ids.push_back(item.id);
    CHECK(std::find(doc.texts.begin(), doc.texts.end(), item.id) != doc.texts.end());
  }
  CHECK(ids == expected);
  // The page of a graph with module boxes holds both views, the op view first.
  const std::string data = page_data({op_view(c.graph, c.options), view}, c.options.title);
  const auto parsed = nlohmann::json::parse(data);
  REQUIRE(parsed["views"].size() == 2);
  CHECK(parsed["views"][1]["name"] == "modules");
  // The page also holds Graphviz's SVG, whose coordinates vary with its version: the data is
  // found in it rather than the page compared whole.
  CHECK(page_html(c.graph, c.options).find(data) !=
        std::string::npos);  // Asked for the module view, the page opens on it, and its op view is
                             // still the op view.
  RenderOptions modules_first = c.options;
  modules_first.view = View::kModules;
  const std::string swapped = page_data({view, op_view(c.graph, c.options)}, c.options.title);
  CHECK(page_html(c.graph, modules_first).find(swapped) != std::string::npos);
  CHECK(op_view(c.graph, modules_first).svg == op_view(c.graph, c.options).svg);
  // A graph over the op view's budget still has its module view drawn, alone.
  modules_first.max_nodes = 3;
  CHECK(page_html(c.graph, modules_first).find(page_data({view}, c.options.title)) !=
        std::string::npos);
}

TEST_CASE("page: a hostile key is data inside the page, never markup") {
  auto c = hostile_pipeline();
  const std::string data = page_data({op_view(c.graph, c.options)}, c.options.title);
  for (const char special : {'<', '>', '&'}) {
    INFO(special);
    CHECK(data.find(special) == std::string::npos);
  }
  const Json parsed = Json::parse(data);
  CHECK(parsed["title"] == "<title>&");
  const Json& view = parsed["views"][0];
  const std::string key = NestedKey{"<img src=x onerror=alert(1)>", kHostileKey}.repr();
  CHECK(fields_of(item_of(view, "node:getitem")) ==
        "op: call_function\n"
        "target: operator.getitem\n"
        "reads key: " +
            key +
            "\n"
            "args: (%tensordict, (<img src=x onerror=alert(1)>, " +
            kHostileKey +
            "))\n"
            "kwargs: {}\n"
            "users: node:relu\n"
            "TensorDictModule: <b>m</b>\n"
            "code: getitem = tensordict[" +
            key + "];  tensordict = None\n");
  CHECK(fields_of(item_of(view, "node:relu")) ==
        "op: call_function\n"
        "target: torch.relu\n"
        "args: (%getitem,)\n"
        "kwargs: {}\n"
        "writes: ['&amp;']\n"
        "users: node:output\n"
        "module: <b>m</b>.module\n"
        "TensorDictModule: <b>m</b>\n"
        "code: relu = torch.relu(getitem);  getitem = None\n");
  CHECK(item_of(view, "cluster_0")["title"] == "<b>m</b>");

  // The page has exactly its own two script elements and one title, whatever the keys hold;
  // counted and searched, as the page holds Graphviz's SVG (coordinates vary with its version).
  const std::string html = page_html(c.graph, c.options);
  CHECK(count(html, "<script") == 2);
  CHECK(count(html, "</script") == 2);
  CHECK(count(html, "<title>") == 1);
  CHECK(html.find("<title>&lt;title&gt;&amp;</title>") != std::string::npos);
  CHECK(html.find("pwned") != std::string::npos);  // as data, escaped
  CHECK(html.find("<img") == std::string::npos);
}

TEST_CASE("page: bytes that are not UTF-8 reach the page as U+FFFD") {
  Graph g;
  Node* td = g.placeholder("tensordict");
  Node* x = g.call_function(Target::getitem(), {td, NestedKey(std::string("a\xff\xfe"
                                                                          "b"))});
  g.output(x);
  const Json parsed = Json::parse(page_data({op_view(g)}, "\xc3"));
  CHECK(parsed["title"] == "\xef\xbf\xbd");
  const std::string shown =
      "'a\xef\xbf\xbd\xef\xbf\xbd"
      "b'";
  CHECK(fields_of(item_of(parsed["views"][0], "node:getitem")) ==
        "op: call_function\n"
        "target: operator.getitem\n"
        "reads key: " +
            shown +
            "\n"
            "args: (%tensordict, a\xef\xbf\xbd\xef\xbf\xbd"
            "b)\n"
            "kwargs: {}\n"
            "users: node:output\n"
            "code: getitem = tensordict[" +
            shown + "];  tensordict = None\n");
}

TEST_CASE("page: the same graph gives the same page, which loads nothing") {
  auto c = annotated_sequential();
  const std::string html = page_html(c.graph, c.options);
  auto again = annotated_sequential();
  CHECK(html == page_html(again.graph, again.options));
  // Searched rather than compared whole: the page holds Graphviz's SVG, whose coordinates vary
  // with its version.
  CHECK(html.rfind("<!DOCTYPE html>\n", 0) == 0);
  CHECK(html.find("default-src 'none'") != std::string::npos);
  for (const char* external : {"<link", " src=", "@import", "url(", "fetch(", "XMLHttpRequest"}) {
    INFO(external);
    CHECK(html.find(external) == std::string::npos);
  }
}

TEST_CASE("page: views keep their order, names, bases and expanded modules") {
  auto c = annotated_sequential();
  PageView ops = op_view(c.graph, c.options);
  PageView expanded = ops;
  expanded.name = "ops+0";
  expanded.base = "ops";
  expanded.expanded = {"0"};
  const Json parsed = Json::parse(page_data({ops, expanded}, "t"));
  REQUIRE(parsed["views"].size() == 2);
  CHECK(parsed["views"][0]["name"] == "ops");
  CHECK(parsed["views"][0]["base"] == "");
  CHECK(parsed["views"][1]["base"] == "ops");
  CHECK(parsed["views"][1]["expanded"] == Json::array({"0"}));
}

TEST_CASE("page: write gives the page for .html, and render_dot refuses it") {
  auto c = annotated_sequential();
  const tdfx::testing::ScratchDir scratch("tdfx_page");
  const std::string dir = scratch.path().string();
  save_diagram(c.graph, dir + "/p.html", c.options);
  CHECK(tdfx::testing::read_text(dir + "/p.html") == page_html(c.graph, c.options));
  CHECK(render(c.graph, Format::kHtml, c.options) == page_html(c.graph, c.options));
  CHECK(format_from_extension("a/P.HTM") == Format::kHtml);
  CHECK_THROWS_WITH_AS(render_dot(to_dot(c.graph, c.options), Format::kHtml),
                       "viz: a page shows a graph's nodes, not DOT text: call render(graph, "
                       "Format::kHtml)",
                       tdfx::Error);
  c.options.max_nodes = 3;
  CHECK_THROWS_WITH_AS(save_diagram(c.graph, dir + "/big.html", c.options),
                       "viz: the graph has 9 nodes, more than the 3 a drawing may have; raise "
                       "RenderOptions::max_nodes (tdfx render --max-nodes N) to draw it anyway, "
                       "or write .dot text, which has no limit",
                       tdfx::Error);
  std::remove((dir + "/p.html").c_str());
  CHECK(std::filesystem::is_empty(dir));  // no temporary file left behind
}

TEST_CASE("page: a module overlay's rows are the module item's run fields") {
  auto c = annotated_sequential();
  c.options.module_overlay["0"] = {"#ffd0d0", {"output grad 2.4 (×1)", "exploding"}, true};
  c.options.module_overlay["no such module"] = {"#ffffff", {"ignored"}, false};
  const PageView view = module_view(c.graph, c.options);
  const auto item = std::find_if(view.items.begin(), view.items.end(),
                                 [](const PageItem& i) { return i.id == module_node_id("0"); });
  REQUIRE(item != view.items.end());
  std::vector<std::string> run;
  for (const PageField& field : item->fields) {
    if (field.label == "run") run.push_back(field.text);
  }
  CHECK(run == std::vector<std::string>{"output grad 2.4 (×1)", "exploding"});
  // The drawing fills the module and rings it.
  CHECK(view.svg.find("#ffd0d0") != std::string::npos);
  CHECK(view.svg.find("#d62728") != std::string::npos);
}

TEST_CASE("page: the pipeline view holds the module tree and the nodes, laid out by the page") {
  // Its tree, whole: each module's parent, type and keys; each node's module and inputs; a
  // small graph opens with every module open.
  auto c = annotated_sequential();
  const PageView view = pipeline_view(c.graph, c.options);
  CHECK(view.svg.empty());
  REQUIRE(view.tree);
  const Json parsed = Json::parse(page_data({view}, "t"));
  tdfx::testing::check_golden("tests/viz/golden", "seed_sequential.pipeline_tree.json",
                              parsed["views"][0]["tree"].dump(1) + "\n");
  // The op view's node items and one item per module (`box:PATH`), and no Graphviz boxes.
  size_t modules = 0;
  for (const PageItem& item : view.items) {
    CHECK(item.id.rfind("cluster_", 0) != 0);
    if (item.kind == "module") {
      ++modules;
      CHECK(item.id == "box:" + item.module);
    }
  }
  CHECK(modules == c.options.modules.size());
}

TEST_CASE("page: from kPageCollapseFrom nodes on, the page opens on the pipeline view, collapsed") {
  auto views_of = [](const std::string& html) {
    const std::string open = "<script id=\"tdfx-data\" type=\"application/json\">";
    const size_t from = html.find(open) + open.size();
    const Json data = Json::parse(html.substr(from, html.find("</script>", from) - from));
    std::vector<std::string> names;
    for (const auto& view : data["views"]) names.push_back(view["name"]);
    return std::make_pair(names, data["views"][0]);
  };
  // A chain of n modules has 2n + 3 nodes: 199 for 98, 201 for 99.
  const auto small = testing::module_chain(98);
  REQUIRE(small.graph.size() == kPageCollapseFrom - 1);
  CHECK(views_of(page_html(small.graph, small.options)).first ==
        std::vector<std::string>{"ops", "modules"});
  const auto large = testing::module_chain(99);
  REQUIRE(large.graph.size() == kPageCollapseFrom + 1);
  const auto [names, first] = views_of(page_html(large.graph, large.options));
  CHECK(names == std::vector<std::string>{"pipeline", "modules"});
  CHECK(first["tree"]["open"].empty());
  CHECK(first["tree"]["modules"].size() == large.options.modules.size());
  // Over the op view's budget, the pipeline view is refused as the op view is.
  RenderOptions tight = large.options;
  tight.max_nodes = 100;
  CHECK_THROWS_AS(page_html(large.graph, tight), Error);
}

TEST_CASE("page: the pipeline view shows the overlay's fills and marks, as the drawings do") {
  auto c = annotated_sequential();
  c.options.overlay["relu"] = {"#ff0000", {"added"}, true};
  c.options.module_overlay["0"] = {"#00ff00", {}, false};
  const PageView view = pipeline_view(c.graph, c.options);
  REQUIRE(view.tree);
  for (const PageTreeNode& node : view.tree->nodes) {
    CAPTURE(node.id);
    CHECK(node.fill == (node.id == "node:relu" ? "#ff0000" : ""));
    CHECK(node.marked == (node.id == "node:relu"));
  }
  REQUIRE(view.tree->modules.size() == 1);
  CHECK(view.tree->modules[0].fill == "#00ff00");
}

TEST_CASE("page: a layer's timelines reach the page's data, a value that is not finite as null") {
  OverlayLayer layer;
  layer.name = "training";
  layer.legend = "charts";
  layer.marked_step = 20;
  layer.timelines.push_back({"loss", {0, 10, 20}, {{"loss", {1.5, 0.25, INFINITY}}}});
  layer.module_timelines["module.0"].push_back(
      {"hidden", {0, 20}, {{"min", {-1, NAN}}, {"max", {2, 3}}}});
  const Json data = Json::parse(page_data({}, "t", {layer}));
  CHECK(data["layers"][0].dump() ==
        R"({"legend":"charts","marked_step":20,"module_timelines":{"module.0":[{"label":"hidden",)"
        R"("series":[{"name":"min","values":[-1.0,null]},{"name":"max","values":[2.0,3.0]}],)"
        R"("steps":[0,20]}]},"modules":{},"name":"training","nodes":{},"timelines":[{"label":)"
        R"("loss","series":[{"name":"loss","values":[1.5,0.25,null]}],"steps":[0,10,20]}]})");
  // A layer without timelines adds no keys for them.
  OverlayLayer time;
  time.name = "time";
  time.legend = "fill";
  const Json plain = Json::parse(page_data({}, "t", {time}));
  CHECK(plain["layers"][0].dump() == R"({"legend":"fill","modules":{},"name":"time","nodes":{}})");
  // A series of another length than its steps is a bug of the caller's.
  layer.timelines[0].series[0].second.pop_back();
  CHECK_THROWS_AS(page_data({}, "t", {layer}), InternalError);
}
