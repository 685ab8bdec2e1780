// print_readable and the export style, against the program seed 000 prints.
#include <doctest/doctest.h>

#include "tdfx/codegen/python_code.h"

using namespace tdfx;

namespace {

Node* with_meta(Node* node, std::vector<int64_t> shape) {
  node->meta().tensor.dtype = c10::ScalarType::Float;
  node->meta().tensor.shape = std::move(shape);
  return node;
}

// Seed 000's exported program, built by hand with its names and shapes.
Graph seed_000_program() {
  Graph g;
  Node* w0 = with_meta(g.placeholder("p_module_0_module_weight"), {4, 3});
  Node* b0 = with_meta(g.placeholder("p_module_0_module_bias"), {4});
  Node* w2 = with_meta(g.placeholder("p_module_2_module_weight"), {4, 4});
  Node* b2 = with_meta(g.placeholder("p_module_2_module_bias"), {4});
  Node* x = with_meta(g.placeholder("x"), {1, 3});
  Node* linear = with_meta(g.call_function(Target::aten("aten::linear"), {x, w0, b0}), {1, 4});
  linear->meta().module_path = "module.0.module";
  linear->meta().module_type = "Linear(in_features=3, out_features=4, bias=true)";
  Node* relu = with_meta(g.call_function(Target::aten("aten::relu"), {linear}), {1, 4});
  relu->meta().module_path = "module.1.module";
  relu->meta().module_type = "ReLU()";
  Node* linear_1 = with_meta(g.call_function(Target::aten("aten::linear"), {relu, w2, b2}), {1, 4});
  linear_1->meta().module_path = "module.2.module";
  linear_1->meta().module_type = "Linear(in_features=4, out_features=4, bias=true)";
  Node* chunk = g.call_function(Target::aten("aten::chunk"), {linear_1, 2, -1});
  Node* loc = with_meta(g.call_function(Target::getitem(), {chunk, 0}), {1, 2});
  Node* scale = with_meta(g.call_function(Target::getitem(), {chunk, 1}), {1, 2});
  Node* add = with_meta(
      g.call_function(Target::aten("aten::add.Tensor"), {scale, 0.5254586935043335}), {1, 2});
  Node* softplus = with_meta(g.call_function(Target::aten("aten::softplus"), {add, 1, 20}), {1, 2});
  Node* add_1 =
      with_meta(g.call_function(Target::aten("aten::add.Tensor"), {softplus, 0.01}), {1, 2});
  Node* clamp =
      with_meta(g.call_function(Target::aten("aten::clamp_min"), {add_1, 0.0001}), {1, 2});
  for (Node* n : {chunk, loc, scale, add, softplus, add_1, clamp}) {
    n->meta().module_path = "module.3.module";
    n->meta().module_type = "NormalParamExtractor()";
  }
  g.output(tuple({relu, linear_1, loc, clamp}));
  return g;
}

}  // namespace

TEST_CASE("readable: the export-style program prints seed 000's lines byte for byte") {
  // Seed 000's print_readable output without its `# File:` comment lines.
  const std::string expected =
      "class GraphModule(torch.nn.Module):\n"
      "    def forward(self, p_module_0_module_weight: \"f32[4, 3]\", p_module_0_module_bias: "
      "\"f32[4]\", p_module_2_module_weight: \"f32[4, 4]\", p_module_2_module_bias: \"f32[4]\", "
      "x: \"f32[1, 3]\"):\n"
      "        linear: \"f32[1, 4]\" = torch.ops.aten.linear.default(x, p_module_0_module_weight, "
      "p_module_0_module_bias);  x = p_module_0_module_weight = p_module_0_module_bias = None\n"
      "        relu: \"f32[1, 4]\" = torch.ops.aten.relu.default(linear);  linear = None\n"
      "        linear_1: \"f32[1, 4]\" = torch.ops.aten.linear.default(relu, "
      "p_module_2_module_weight, p_module_2_module_bias);  p_module_2_module_weight = "
      "p_module_2_module_bias = None\n"
      "        chunk = torch.ops.aten.chunk.default(linear_1, 2, -1)\n"
      "        getitem: \"f32[1, 2]\" = chunk[0]\n"
      "        getitem_1: \"f32[1, 2]\" = chunk[1];  chunk = None\n"
      "        add: \"f32[1, 2]\" = torch.ops.aten.add.Tensor(getitem_1, 0.5254586935043335);  "
      "getitem_1 = None\n"
      "        softplus: \"f32[1, 2]\" = torch.ops.aten.softplus.default(add);  add = None\n"
      "        add_1: \"f32[1, 2]\" = torch.ops.aten.add.Tensor(softplus, 0.01);  softplus = None\n"
      "        clamp_min: \"f32[1, 2]\" = torch.ops.aten.clamp_min.default(add_1, 0.0001);  "
      "add_1 = None\n"
      "        return (relu, linear_1, getitem, clamp_min)\n"
      "        ";
  CodeOptions options;
  options.style = CodeStyle::kExport;
  options.annotations = true;
  const Graph g = seed_000_program();
  g.lint();
  CHECK(print_readable(g, options) == expected);
}

TEST_CASE("readable: module comments name the module each run of lines came from") {
  CodeOptions options = readable_defaults();
  options.style = CodeStyle::kExport;
  const std::string text = print_readable(seed_000_program(), options);
  CHECK(text.find("    def forward(self, p_module_0_module_weight: \"f32[4, 3]\"") !=
        std::string::npos);
  CHECK(text.find("):\n        # Module: module.0.module (Linear(in_features=3, out_features=4, "
                  "bias=true))\n        linear: ") != std::string::npos);
  CHECK(text.find(
            "\n\n        # Module: module.3.module (NormalParamExtractor())\n        chunk = ") !=
        std::string::npos);
}

TEST_CASE("readable: the FX style annotates and keeps torch.fx's call syntax") {
  Graph g;
  Node* x = with_meta(g.placeholder("x"), {2, 3});
  Node* s = with_meta(g.call_function(Target::aten("aten::softmax.int"), {x, 1}), {2, 3});
  g.output(s);
  CHECK(print_readable(g) ==
        "class GraphModule(torch.nn.Module):\n"
        "    def forward(self, x: \"f32[2, 3]\"):\n"
        "        softmax: \"f32[2, 3]\" = torch.softmax(x, dim = 1);  x = None\n"
        "        return softmax\n"
        "        ");
  CHECK(type_annotation(*x) == "f32[2, 3]");
}

TEST_CASE("readable: forward code in export style names aten overloads") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(Target::aten("aten::add.Tensor"), {x, 1});
  Node* b = g.call_function(Target::aten("aten::sub.Tensor"), {a, 1});
  g.output(tuple({b}));
  CodeOptions options;
  options.style = CodeStyle::kExport;
  // The nested-key model of seed 000: add 1, subtract 1.
  CHECK(python_code(g, options) ==
        "\n\n\ndef forward(self, x):\n"
        "    add = torch.ops.aten.add.Tensor(x, 1);  x = None\n"
        "    sub = torch.ops.aten.sub.Tensor(add, 1);  add = None\n"
        "    return (sub,)\n"
        "    ");
}

TEST_CASE("readable: memory formats and layouts print as torch's names in both styles") {
  Graph g;
  Node* x = with_meta(g.placeholder("x"), {2, 3, 4, 5});
  Node* clone = with_meta(g.call_function(Target::aten("aten::clone"), {x},
                                          {{"memory_format", c10::MemoryFormat::ChannelsLast}}),
                          {2, 3, 4, 5});
  Node* zeros = with_meta(g.call_function(Target::aten("aten::zeros_like"), {clone},
                                          {{"layout", c10::Layout::Strided},
                                           {"memory_format", c10::MemoryFormat::Contiguous}}),
                          {2, 3, 4, 5});
  g.output(tuple({clone, zeros}));
  CHECK(print_readable(g) ==
        "class GraphModule(torch.nn.Module):\n"
        "    def forward(self, x: \"f32[2, 3, 4, 5]\"):\n"
        "        clone: \"f32[2, 3, 4, 5]\" = torch.clone(x, memory_format = "
        "torch.channels_last);  x = None\n"
        "        zeros_like: \"f32[2, 3, 4, 5]\" = torch.zeros_like(clone, layout = torch.strided, "
        "memory_format = torch.contiguous_format)\n"
        "        return (clone, zeros_like)\n"
        "        ");
  CodeOptions options = readable_defaults();
  options.style = CodeStyle::kExport;
  CHECK(print_readable(g, options) ==
        "class GraphModule(torch.nn.Module):\n"
        "    def forward(self, x: \"f32[2, 3, 4, 5]\"):\n"
        "        clone: \"f32[2, 3, 4, 5]\" = torch.ops.aten.clone.default(x, memory_format = "
        "torch.channels_last);  x = None\n"
        "        zeros_like: \"f32[2, 3, 4, 5]\" = torch.ops.aten.zeros_like.default(clone, "
        "layout = torch.strided, memory_format = torch.contiguous_format)\n"
        "        return (clone, zeros_like)\n"
        "        ");
}

TEST_CASE("codegen: every name lands in printed code as valid, inert Python") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* m = g.call_module("blocks.my-layer.0.\"); import os; (\"", {x});
  m->meta().module_path = "blocks.my-layer";
  m->meta().module_type = "Block\nimport os";
  Node* d =
      g.call_function(Target::aten("aten::div.Tensor_mode"), {x, m}, {{"rounding_mode", "floor"}});
  g.output(tuple({d}));
  CHECK(python_code(g) ==
        "\n\n\n"
        "def forward(self, x):\n"
        "    blocks_my_layer_0_import_os_ = getattr(getattr(getattr(self.blocks, \"my-layer\"), "
        "\"0\"), '\"); import os; (\"')(x)\n"
        "    div = torch.div(x, blocks_my_layer_0_import_os_, rounding_mode = 'floor');  x = "
        "blocks_my_layer_0_import_os_ = None\n"
        "    return (div,)\n"
        "    ");
  CodeOptions options = readable_defaults();
  options.style = CodeStyle::kExport;
  const std::string readable = print_readable(g, options);
  CHECK(readable.find("        # Module: blocks.my-layer (Block\\nimport os)\n") !=
        std::string::npos);
  CHECK(readable.find("torch.ops.aten.div.Tensor_mode(x, blocks_my_layer_0_import_os_, "
                      "rounding_mode = 'floor')") != std::string::npos);
}

TEST_CASE("codegen: node_lines gives each node its own line of the printed code") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* renamed = g.placeholder("input_y");
  g.rename(renamed, "y");
  Node* relu = g.call_function(Target::aten("aten::relu"), {x});
  Node* mul = g.call_function(Target::aten("aten::mul.Tensor"), {relu, renamed});
  g.output(tuple({relu, mul}));
  const std::vector<std::string> expected{
      "x",
      "y = input_y",
      "relu = torch.relu(x);  x = None",
      "mul = relu * y;  y = None",
      "return (relu, mul)",
  };
  CHECK(node_lines(g) == expected);
  const std::string code = python_code(g);
  for (const std::string& line : expected) {
    INFO(line);
    CHECK(code.find(line) != std::string::npos);
  }
}
