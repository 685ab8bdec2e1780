// The TorchScript printer on hand-built graphs: the forward's source, compared whole, the
// overloads it expects, the dict of outputs and its refusals, and TorchScript string literals.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tdfx/codegen/torchscript_code.h"
#include "tdfx/core/error.h"

using namespace tdfx;

namespace {

// relu(linear(x)) and relu + 1.5, with the linear's weight and bias as module attributes.
Graph two_output_graph() {
  Graph g;
  Node* weight = g.placeholder("p_fc_weight");
  Node* bias = g.placeholder("p_fc_bias");
  Node* x = g.placeholder("x");
  Node* linear = g.call_function(Target::aten("aten::linear"), {x, weight, bias});
  Node* relu = g.call_function(Target::aten("aten::relu"), {linear});
  Node* add = g.call_function(Target::aten("aten::add.Tensor"), {relu, 1.5});
  g.output(tuple({relu, add}));
  return g;
}

TorchScriptSignature two_output_signature(std::vector<NestedKey> keys) {
  TorchScriptSignature signature;
  signature.inputs = {"x"};
  signature.attributes = {"p_fc_weight", "p_fc_bias"};
  signature.output_keys = std::move(keys);
  return signature;
}

std::vector<std::string> overload_names(const TorchScriptForward& forward) {
  std::vector<std::string> out;
  for (const auto& name : forward.overloads) {
    out.push_back(name.overload_name.empty() ? name.name : name.name + "." + name.overload_name);
  }
  return out;
}

}  // namespace

TEST_CASE("torchscript_forward: a tuple by default, attributes read through self") {
  const Graph g = two_output_graph();
  const TorchScriptForward forward =
      torchscript_forward(g, two_output_signature({NestedKey{"action", "logits"}, "loc"}));
  CHECK(forward.source ==
        "def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:\n"
        "    linear = torch.linear(x, self.p_fc_weight, self.p_fc_bias)\n"
        "    relu = torch.relu(linear)\n"
        "    add = torch.add(relu, 1.5, 1)\n"
        "    return (relu, add)\n");
  // The number added to a tensor goes to add.Scalar, which wraps it as the graph runner does.
  CHECK(overload_names(forward) ==
        std::vector<std::string>{"aten::linear", "aten::relu", "aten::add.Scalar"});
}

TEST_CASE("torchscript_forward: kDict returns the outputs by their keys joined with '.'") {
  const Graph g = two_output_graph();
  const TorchScriptForward forward = torchscript_forward(
      g, two_output_signature({NestedKey{"action", "logits"}, "loc"}), TorchScriptOutputs::kDict);
  CHECK(forward.source ==
        "def forward(self, x: Tensor) -> Dict[str, Tensor]:\n"
        "    linear = torch.linear(x, self.p_fc_weight, self.p_fc_bias)\n"
        "    relu = torch.relu(linear)\n"
        "    add = torch.add(relu, 1.5, 1)\n"
        "    return {'action.logits': relu, 'loc': add}\n");
}

TEST_CASE("torchscript_forward: kDict refuses two keys that join to the same string") {
  const Graph g = two_output_graph();
  CHECK_THROWS_WITH_AS(
      torchscript_forward(g, two_output_signature({NestedKey{"a", "b"}, NestedKey("a.b")}),
                          TorchScriptOutputs::kDict),
      "to_torchscript: outputs ('a', 'b') and 'a.b' both join to the dict key 'a.b'; a dict of "
      "outputs needs keys that stay distinct when joined with '.'",
      Error);
}

TEST_CASE("torchscript_forward: kDict refuses a signature without one key per output") {
  const Graph g = two_output_graph();
  CHECK_THROWS_WITH_AS(
      torchscript_forward(g, two_output_signature({"loc"}), TorchScriptOutputs::kDict),
      "to_torchscript: the graph returns 2 values but the signature has 1 "
      "output keys; a dict of outputs needs one key per value",
      Error);
}

TEST_CASE("torchscript_forward: a call_module node is refused by name") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* fc = g.call_module("fc", {x});
  g.output(tuple({fc}));
  TorchScriptSignature signature;
  signature.inputs = {"x"};
  CHECK_THROWS_WITH_AS(torchscript_forward(g, signature),
                       "to_torchscript: %fc is a call_module (fc); TorchScript export supports "
                       "aten calls, getitem and size arithmetic only",
                       Error);
}

TEST_CASE("torchscript_string: Python's repr where TorchScript reads it, octal otherwise") {
  CHECK(torchscript_string("loc") == "'loc'");
  CHECK(torchscript_string("it's") == "\"it's\"");
  CHECK(torchscript_string("'\"") == "'\\'\"'");
  CHECK(torchscript_string("a\\b\n\t") == "'a\\\\b\\n\\t'");
  CHECK(torchscript_string("a\rb\x01\x7f") == "'a\\015b\\001\\177'");
}

TEST_CASE("torchscript_forward: kDict refuses a key with a carriage return") {
  const Graph g = two_output_graph();
  CHECK_THROWS_WITH_AS(
      torchscript_forward(g, two_output_signature({NestedKey{"a\rb", "c"}, "loc"}),
                          TorchScriptOutputs::kDict),
      "to_torchscript: output key ('a\\rb', 'c') holds a carriage return, which a dict key "
      "cannot: TorchScript saves it as '\\r' and its loader refuses that escape",
      Error);
}
