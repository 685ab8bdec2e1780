// The operator table (graph/op_table.h): one row per aten operator, and the effects
// (graph/effects.h) that read it.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "tdfx/graph/effects.h"
#include "tdfx/graph/graph.h"
#include "tdfx/graph/op_table.h"

using namespace tdfx;
using tdfx::detail::find_op;
using tdfx::detail::op_has;
using tdfx::detail::OpFact;

TEST_CASE("op table: names are sorted, unique, and bare operator names") {
  const tdfx::detail::OpRows rows = tdfx::detail::op_rows();
  REQUIRE(rows.size() > 300);
  for (const tdfx::detail::OpRow* row = rows.begin() + 1; row < rows.end(); ++row) {
    CHECK_MESSAGE((row - 1)->name < row->name, (row - 1)->name << " before " << row->name);
  }
  for (const tdfx::detail::OpRow& row : rows) {
    CHECK_FALSE(row.name.empty());
    // No namespace, no overload: the key every reader looks up.
    CHECK_MESSAGE(row.name.find_first_of(".:") == std::string_view::npos, row.name);
    CHECK_MESSAGE(find_op(row.name) == &row, row.name);
    // Only a dropout-like row has a training argument.
    CHECK_MESSAGE((row.training_arg != 0) == row.has(OpFact::kDropoutLike), row.name);
  }
  CHECK(find_op("") == nullptr);
  CHECK(find_op("aten::add") == nullptr);
  CHECK(find_op("add.Tensor") == nullptr);
}

TEST_CASE("op table: the facts the allowlist, method faces and effects read") {
  // The allowlist: `add` is loadable; `add_` has no row of its own, so only the in-place rule
  // (export/op_policy.h's is_allowed_operator) allows it. Strided views are never loadable.
  CHECK(op_has("add", OpFact::kLoadable));
  CHECK(find_op("add_") == nullptr);
  CHECK_FALSE(op_has("as_strided", OpFact::kLoadable));
  CHECK_FALSE(op_has("from_file", OpFact::kLoadable));
  CHECK(op_has("arange", OpFact::kCountedCreation));
  CHECK_FALSE(op_has("zeros", OpFact::kCountedCreation));
  REQUIRE(find_op("ctc_loss") != nullptr);
  CHECK_FALSE(find_op("ctc_loss")->has(OpFact::kLoadable));
  CHECK(std::string(find_op("ctc_loss")->refusal).find("log_probs") != std::string::npos);
  CHECK(find_op("add")->refusal == nullptr);

  // Method faces: `x.item()` has no torch.item; `torch._C._nn.elu_` is no Tensor method.
  CHECK(op_has("item", OpFact::kMethodOnly));
  CHECK(op_has("view", OpFact::kMethodOnly));
  CHECK_FALSE(op_has("relu", OpFact::kMethodOnly));
  CHECK(op_has("elu_", OpFact::kInPlaceFunction));
  CHECK_FALSE(op_has("elu", OpFact::kInPlaceFunction));

  // Effects.
  REQUIRE(find_op("dropout") != nullptr);
  CHECK(find_op("dropout")->has(OpFact::kDropoutLike));
  CHECK_FALSE(find_op("dropout")->has(OpFact::kRandom));
  CHECK(find_op("dropout")->training_arg == 2);
  CHECK(find_op("rrelu")->training_arg == 3);
  CHECK(op_has("randn", OpFact::kRandom));
  CHECK(op_has("empty_like", OpFact::kUninitialised));
  CHECK(op_has("batch_norm", OpFact::kRunningStats));
  CHECK(updates_running_stats("_batch_norm_impl_index"));
  CHECK_FALSE(updates_running_stats("layer_norm"));
}

TEST_CASE("op table: effects follow it: dropout is random only when training") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* eval = g.call_function(Target::aten("aten::dropout"), {x, 0.5, false});
  Node* train = g.call_function(Target::aten("aten::dropout"), {x, 0.5, true});
  Node* rrelu_eval = g.call_function(Target::aten("aten::rrelu"), {x, 0.1, 0.3, false});
  Node* rrelu_train = g.call_function(Target::aten("aten::rrelu"), {x, 0.1, 0.3, true});
  Node* randn = g.call_function(Target::aten("aten::randn_like"), {x});
  Node* empty = g.call_function(Target::aten("aten::empty_like"), {x});
  // A method given only its name is random when the table says its operator is.
  Node* bernoulli = g.call_method("bernoulli", {x});
  g.output(tuple({eval, train, rrelu_eval, rrelu_train, randn, empty, bernoulli}));
  CHECK(effect_of(*eval) == "");
  CHECK_FALSE(has_effect(*eval));
  CHECK(effect_of(*train) == "random");
  CHECK(effect_of(*rrelu_eval) == "");
  CHECK(effect_of(*rrelu_train) == "random");
  CHECK(effect_of(*randn) == "random");
  CHECK(effect_of(*empty) == "uninitialised");
  CHECK_FALSE(has_effect(*empty));
  CHECK(effect_of(*bernoulli) == "random");
}
