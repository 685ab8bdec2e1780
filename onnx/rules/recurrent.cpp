// ONNX rules of the recurrent layers: LSTM, GRU and RNN, each layer one ONNX node.

#include <string>
#include <vector>

#include "tdfx/onnx/rules/rules.h"

namespace tdfx::onnx_detail {
namespace {

// --- recurrent layers -------------------------------------------------------------------

/// The ONNX gate order of a torch gate-stacked weight or bias, as chunk indices.
std::string reorder_gates(Converter& c, const std::string& w, int64_t hidden,
                          const std::vector<int64_t>& order) {
  const int64_t gates = static_cast<int64_t>(order.size());
  NodeProto* split =
      c.emit("Split", {w, c.const_ints(std::vector<int64_t>(static_cast<size_t>(gates), hidden))},
             static_cast<int>(gates));
  set_attr(split, "axis", int64_t{0});
  std::vector<std::string> parts;
  for (int64_t g : order) parts.push_back(split->output(static_cast<int>(g)));
  NodeProto* cat = c.emit("Concat", parts);
  set_attr(cat, "axis", int64_t{0});
  return cat->output(0);
}

/// lstm.input / gru.input / rnn_{tanh,relu}.input: each layer an ONNX LSTM/GRU/RNN.
/// Torch's gates are (i, f, g, o) for LSTM and (r, z, n) for GRU; ONNX's (i, o, f, c) and
/// (z, r, h). The state tensors are [layers * directions, batch, hidden] in both.
Value recurrent_rule(Converter& c, const std::string& kind) {
  const bool lstm = kind == "LSTM";
  // lstm(input, hx[], params[], has_biases, num_layers, dropout, train, bidirectional,
  // batch_first); gru/rnn(input, hx, params[], has_biases, num_layers, dropout, train,
  // bidirectional, batch_first).
  std::string x = c.tensor(0);
  std::vector<std::string> hx = lstm ? c.tensors(1) : std::vector<std::string>{c.tensor(1)};
  std::vector<std::string> params = c.tensors(2);
  const bool has_biases = c.bool_arg(3);
  const int64_t layers = c.int_arg(4);
  const bool train = c.bool_arg(6);
  const bool bidirectional = c.bool_arg(7);
  const bool batch_first = c.bool_arg(8);
  if (train && c.double_arg(5) != 0.0 && layers > 1)
    c.refuse("dropout between layers in training mode");
  const int64_t dirs = bidirectional ? 2 : 1;
  const size_t per_dir = has_biases ? 4 : 2;
  if (params.size() != per_dir * static_cast<size_t>(dirs * layers)) {
    c.refuse("a recurrent layer with projections or an unexpected weight list");
  }
  const int64_t gates = lstm ? 4 : (kind == "GRU" ? 3 : 1);
  const Node* w0 =
      c.arg(2).is<ArgumentList>() ? c.arg(2).as<ArgumentList>().items[0].node() : nullptr;
  if (!w0 || !w0->meta().tensor.shape) c.refuse("a recurrent weight of unknown shape");
  const int64_t hidden = (*w0->meta().tensor.shape)[0] / gates;
  const std::vector<int64_t> order =
      lstm ? std::vector<int64_t>{0, 3, 1, 2}
           : (gates == 3 ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0});
  if (batch_first) {
    NodeProto* t = c.emit("Transpose", {x});
    set_attr(t, "perm", std::vector<int64_t>{1, 0, 2});
    x = t->output(0);
  }
  std::vector<std::string> h_out, c_out;
  for (int64_t layer = 0; layer < layers; ++layer) {
    std::vector<std::string> w, r, b;
    for (int64_t d = 0; d < dirs; ++d) {
      const size_t base = per_dir * static_cast<size_t>(layer * dirs + d);
      auto gated = [&](const std::string& v) {
        return c.op("Unsqueeze", {reorder_gates(c, v, hidden, order), c.const_ints({0})});
      };
      w.push_back(gated(params[base]));
      r.push_back(gated(params[base + 1]));
      if (has_biases) {
        NodeProto* cat = c.emit("Concat", {reorder_gates(c, params[base + 2], hidden, order),
                                           reorder_gates(c, params[base + 3], hidden, order)});
        set_attr(cat, "axis", int64_t{0});
        b.push_back(c.op("Unsqueeze", {cat->output(0), c.const_ints({0})}));
      }
    }
    auto stack = [&](const std::vector<std::string>& parts) {
      if (parts.size() == 1) return parts[0];
      NodeProto* cat = c.emit("Concat", parts);
      set_attr(cat, "axis", int64_t{0});
      return cat->output(0);
    };
    auto state_slice = [&](const std::string& s) {
      return c.op("Slice", {s, c.const_ints({layer * dirs}), c.const_ints({(layer + 1) * dirs}),
                            c.const_ints({0})});
    };
    std::vector<std::string> inputs{x,  stack(w),          stack(r), has_biases ? stack(b) : "",
                                    "", state_slice(hx[0])};
    if (lstm) inputs.push_back(state_slice(hx[1]));
    NodeProto* cell = c.emit(kind, inputs, lstm ? 3 : 2);
    set_attr(cell, "hidden_size", hidden);
    if (bidirectional) set_attr(cell, "direction", std::string("bidirectional"));
    if (kind == "GRU") set_attr(cell, "linear_before_reset", int64_t{1});
    if (kind == "RNN_RELU") {
      cell->set_op_type("RNN");
      set_attr(cell, "activations", std::vector<std::string>(static_cast<size_t>(dirs), "Relu"));
    }
    // Y [T, dirs, B, H] → [T, B, dirs * H].
    NodeProto* t = c.emit("Transpose", {cell->output(0)});
    set_attr(t, "perm", std::vector<int64_t>{0, 2, 1, 3});
    x = c.op("Reshape", {t->output(0), c.const_ints({0, 0, -1})});
    h_out.push_back(cell->output(1));
    if (lstm) c_out.push_back(cell->output(2));
  }
  if (batch_first) {
    NodeProto* t = c.emit("Transpose", {x});
    set_attr(t, "perm", std::vector<int64_t>{1, 0, 2});
    x = t->output(0);
  }
  auto stack_states = [&](const std::vector<std::string>& parts) {
    if (parts.size() == 1) return c.op("Identity", {parts[0]});
    NodeProto* cat = c.emit("Concat", parts);
    set_attr(cat, "axis", int64_t{0});
    return cat->output(0);
  };
  Value out{"", {tensor_value(x), tensor_value(stack_states(h_out))}};
  if (lstm) out.items.push_back(tensor_value(stack_states(c_out)));
  return out;
}

}  // namespace

void add_recurrent_rules(RuleTable& table) {
  const RuleList entries = {
      {"lstm.input",
       {"LSTM per layer (gates reordered by Split, Concat)",
        [](Converter& c) { return recurrent_rule(c, "LSTM"); }}},
      {"gru.input",
       {"GRU per layer (gates reordered by Split, Concat)",
        [](Converter& c) { return recurrent_rule(c, "GRU"); }}},
      {"rnn_tanh.input", {"RNN per layer", [](Converter& c) { return recurrent_rule(c, "RNN"); }}},
      {"rnn_relu.input",
       {"RNN per layer (Relu)", [](Converter& c) { return recurrent_rule(c, "RNN_RELU"); }}},
  };
  add_rules(table, entries);
}

}  // namespace tdfx::onnx_detail
