#pragma once
// A hand-built graph of a traced TensorDict pipeline with the options a tracer would supply, for
// the drawing tests and benchmarks: the drawings of a long chain without tracing one.

#include <string>

#include "tdfx/graph/graph.h"
#include "tdfx/viz/render.h"

namespace tdfx::samples {

/// A graph to draw and the options to draw it with.
struct DrawnGraph {
  Graph graph;
  RenderOptions options;
};

/// A traced chain of `n` TensorDictModules, each `relu(Linear(64, 64))` from
/// key `h{i}` to `h{i+1}`, with the options a tracer would supply.
inline DrawnGraph module_chain(size_t n) {
  DrawnGraph chain;
  Graph& g = chain.graph;
  TensorMeta f32_16x64{c10::ScalarType::Float,
                       std::vector<int64_t>{16, 64},
                       std::nullopt,
                       c10::Device("cpu"),
                       {},
                       {}};
  Node* td = g.placeholder("tensordict");
  Node* x = g.call_function(Target::getitem(), {td, NestedKey("h0")});
  x->meta().tensor = f32_16x64;
  x->meta().td_module = "0";
  const Target relu = Target::aten("aten::relu");
  std::vector<Argument> outputs;
  for (size_t i = 0; i < n; ++i) {
    const std::string path = std::to_string(i);
    const std::string target = path + ".module.0";
    Node* linear = g.create_node(OpCode::kCallModule, Target(target), {x}, {}, "_" + path + "_0");
    linear->meta().tensor = f32_16x64;
    linear->meta().td_module = path;
    x = g.call_function(relu, {linear});
    x->meta().tensor = f32_16x64;
    x->meta().td_module = path;
    outputs.emplace_back(x);
    const NestedKey in("h" + std::to_string(i)), out("h" + std::to_string(i + 1));
    // As pipeline_modules describes a TensorDictModule of samples/chain.h's ChainLink.
    chain.options.modules.push_back({path, "ChainLink", {in}, {out}, "ChainLink", false, 4160});
    chain.options.output_keys.push_back(out);
    chain.options.module_descriptions[target] =
        "Linear(in_features=64, out_features=64, bias=true)";
    chain.options.module_parameters[target] = {{"weight",
                                                {c10::ScalarType::Float,
                                                 std::vector<int64_t>{64, 64},
                                                 std::nullopt,
                                                 c10::Device("cpu"),
                                                 {},
                                                 {}}},
                                               {"bias",
                                                {c10::ScalarType::Float,
                                                 std::vector<int64_t>{64},
                                                 std::nullopt,
                                                 c10::Device("cpu"),
                                                 {},
                                                 {}}}};
  }
  g.output(tuple(std::move(outputs)));
  return chain;
}

}  // namespace tdfx::samples
