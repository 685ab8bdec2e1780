// The IR: naming, editing, copying, dead code and lint.
#include <doctest/doctest.h>

#include <algorithm>
#include <list>
#include <random>
#include <set>
#include <sstream>

#include "tdfx/core/error.h"
#include "tdfx/graph/effects.h"
#include "tdfx/graph/graph.h"
#include "tdfx/graph/graph_module.h"
#include "tdfx/graph/namespace.h"
#include "tdfx/graph/passes.h"
#include "tests/graph/graphs.h"

using namespace tdfx;

namespace {
Target relu() { return Target::aten("aten::relu"); }
}  // namespace

TEST_CASE("graph: names follow torch.fx's rules") {
  Graph g;
  Node* x = g.placeholder("x");
  CHECK(g.call_function(relu(), {x})->name() == "relu");
  CHECK(g.call_function(relu(), {x})->name() == "relu_1");
  CHECK(g.call_module("0.module.fc1", {x})->name() == "_0_module_fc1");
  CHECK(g.placeholder("input")->name() == "input_1");
  CHECK(g.get_attr("linear.weight")->name() == "linear_weight");
  CHECK(g.create_node(OpCode::kCallFunction, relu(), {x}, {}, "relu_1")->name() == "relu_2");
  CHECK(g.create_node(OpCode::kCallFunction, relu(), {x}, {}, "sum")->name() == "sum_1");
  g.lint();
}

TEST_CASE("graph: op codes print their torch.fx spelling") {
  CHECK(to_string(OpCode::kPlaceholder) == "placeholder");
  CHECK(to_string(OpCode::kGetAttr) == "get_attr");
  CHECK(to_string(OpCode::kCallFunction) == "call_function");
  CHECK(to_string(OpCode::kCallMethod) == "call_method");
  CHECK(to_string(OpCode::kCallModule) == "call_module");
  CHECK(to_string(OpCode::kOutput) == "output");
}

TEST_CASE("graph: op codes, nodes and graphs print with << and fmt") {
  std::ostringstream os;
  os << OpCode::kCallModule << " " << OpCode::kOutput;
  CHECK(os.str() == "call_module output");
  CHECK(fmt::format("{}|{:>12}|{:<9}|", OpCode::kGetAttr, OpCode::kPlaceholder,
                    OpCode::kCallMethod) == "get_attr| placeholder|call_method|");
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(relu(), {x});
  g.output(r);
  const std::string line =
      "%relu : [#users=1] = call_function[target=torch.relu](args = (%x,), kwargs = {})";
  std::ostringstream node_os;
  node_os << *r;
  CHECK(node_os.str() == line);
  CHECK(fmt::format("{}", *r) == line);
  CHECK(fmt::format("{}", g) == to_string(g));
}

TEST_CASE("graph: users are kept up to date by edits") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(relu(), {x});
  Node* b = g.call_function(Target::aten("aten::mul.Tensor"), {a, a});
  CHECK(a->users().to_vector() == std::vector<Node*>{b});
  CHECK(x->users().to_vector() == std::vector<Node*>{a});
  b->replace_input_with(a, x);
  CHECK(a->users().empty());
  CHECK(x->users().to_vector() == std::vector<Node*>{a, b});
  b->set_args({a, x});
  CHECK(a->users().to_vector() == std::vector<Node*>{b});
  g.output(b);
  g.lint();
}

TEST_CASE("graph: users keep insertion order through removals, large and small") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* y = g.placeholder("y");
  std::vector<Node*> expected;
  for (int i = 0; i < 40; ++i) expected.push_back(g.call_function(relu(), {x}));
  CHECK(x->users().to_vector() == expected);
  // Remove every other user (past the indexed size, leaving holes and compacting),
  // then move the first one to the end: order is insertion order throughout.
  for (size_t i = 0; i < expected.size(); i += 2) expected[i]->set_args({y});
  std::vector<Node*> odd;
  for (size_t i = 1; i < expected.size(); i += 2) odd.push_back(expected[i]);
  CHECK(x->users().to_vector() == odd);
  CHECK(x->users().size() == 20);
  CHECK(x->users().front() == odd.front());
  odd.front()->set_args({y});
  odd.front()->set_args({x});
  std::rotate(odd.begin(), odd.begin() + 1, odd.end());
  CHECK(x->users().to_vector() == odd);
  for (size_t i = 0; i + 3 < odd.size(); ++i) odd[i]->set_args({y});
  CHECK(x->users().to_vector() == std::vector<Node*>(odd.end() - 3, odd.end()));
  CHECK(x->users().contains(odd.back()));
  CHECK(!x->users().contains(odd.front()));
  CHECK(y->users().size() == 37);
  g.lint();
}

TEST_CASE("graph: replace_all_uses_with moves every user") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(relu(), {x});
  Node* b = g.call_function(Target::aten("aten::neg"), {a});
  Node* out = g.output(tuple({a, b}));
  const auto changed = a->replace_all_uses_with(x);
  CHECK(changed == std::vector<Node*>{b, out});
  CHECK(a->users().empty());
  g.erase_node(a);
  g.lint();
  CHECK(g.size() == 3);
}

TEST_CASE("graph: set_target changes what a node calls, checked as create_node and lint check") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(relu(), {x});
  Node* m = g.call_method("view", {r, -1});
  g.output(m);
  const uint64_t before = g.generation();
  r->set_target(Target::aten("aten::sigmoid"));
  CHECK(g.generation() != before);
  CHECK(to_string(*r) ==
        "%relu : [#users=1] = call_function[target=torch.sigmoid](args = (%x,), kwargs = {})");
  g.lint();
  CHECK_THROWS_WITH_AS(m->set_target("not a method"),
                       "%view: call_method target 'not a method' is not a method name", GraphError);
  CHECK_THROWS_WITH_AS(x->set_target("in"), doctest::Contains("%x: placeholder target 'in'"),
                       GraphError);
  CHECK(m->target().str() == "view");
  r->set_target("torch.relu");  // a plain name: not an operator
  CHECK_THROWS_WITH_AS(g.lint(), doctest::Contains("lint: %relu calls 'torch.relu'"), GraphError);
}

TEST_CASE("graph: a call_method node runs the operator of its target, and an edit of it") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* m = g.call_method(Target::method(Target::aten("aten::neg")), {x});
  g.output(m);
  CHECK(to_string(*m) == "%neg : [#users=1] = call_method[target=neg](args = (%x,), kwargs = {})");
  const at::Tensor input = at::tensor({1.0F, -2.0F});
  CHECK(at::equal(GraphModule(nullptr, g.copy()).run({input})[0].toTensor(), -input));
  const uint64_t before = g.generation();
  m->set_target(Target::method(Target::aten("aten::abs")));
  CHECK(g.generation() != before);
  CHECK(at::equal(GraphModule(nullptr, g.copy()).run({input})[0].toTensor(), input.abs()));
  m->set_target("abs");  // a plain method name prints, but names no operator
  CHECK_THROWS_WITH_AS(GraphModule(nullptr, g.copy()),
                       "call_method %neg ('abs') cannot run: tdfx runs aten operators, and its "
                       "target names none (give it one with Target::method(Target::aten(...)))",
                       GraphError);
  CHECK(!(Target::method(Target::aten("aten::abs")) == Target("abs")));
}

TEST_CASE("graph: inline_call_modules binds the items of a body's nested tuple to its getitems") {
  // A recurrent layer's body returns (output, (h, c)); its users pick with getitem.
  auto body = std::make_shared<Graph>();
  Node* input = body->placeholder("input");
  Node* out = body->call_function(relu(), {input});
  Node* h = body->call_function(Target::aten("aten::neg"), {input});
  Node* c = body->call_function(Target::aten("aten::abs"), {input});
  body->output(tuple({out, tuple({h, c})}));
  Graph g;
  Node* x = g.placeholder("x");
  Node* call = g.call_module("rnn", {x});
  call->set_body(body);
  call->meta().module_path = "rnn";
  Node* state = g.call_function(Target::getitem(), {call, 1});
  Node* cell = g.call_function(Target::getitem(), {state, 1});
  Node* output = g.call_function(Target::getitem(), {call, 0});
  g.output(tuple({output, cell}));
  CHECK(inline_call_modules(g) == 1);
  std::ostringstream printed;
  printed << g;
  CHECK(printed.str() ==
        "graph():\n"
        "    %x : [#users=3] = placeholder[target=x]\n"
        "    %relu : [#users=1] = call_function[target=torch.relu](args = (%x,), kwargs = {})\n"
        "    %neg : [#users=0] = call_function[target=operator.neg](args = (%x,), kwargs = {})\n"
        "    %abs_1 : [#users=1] = call_function[target=torch.abs](args = (%x,), kwargs = {})\n"
        "    return (relu, abs_1)");
  for (const Node* node : g.nodes()) {
    if (node->op() == OpCode::kCallFunction) CHECK(node->meta().module_path == "rnn");
  }
}

TEST_CASE("graph: erase_node rejects a node with users") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(relu(), {x});
  g.output(a);
  CHECK_THROWS_WITH_AS(g.erase_node(a), doctest::Contains("%relu"), GraphError);
  CHECK_THROWS_WITH_AS(g.erase_node(a), doctest::Contains("%output"), GraphError);
  g.lint();
}

TEST_CASE("graph: insert points place new nodes and are restored") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* b = g.call_function(relu(), {x});
  g.output(b);
  {
    auto guard = g.inserting_before(b);
    Node* n1 = g.call_function(Target::aten("aten::neg"), {x});
    Node* n2 = g.call_function(Target::aten("aten::neg"), {n1});
    b->set_args({n2});
  }
  {
    auto guard = g.inserting_after(x);
    g.call_function(Target::aten("aten::sigmoid"), {x});
  }
  Node* tail = g.call_function(Target::aten("aten::tanh"), {x});
  std::vector<std::string> names;
  for (Node* n : g.nodes()) names.push_back(n->name());
  CHECK(names ==
        std::vector<std::string>{"x", "sigmoid", "neg", "neg_1", "relu", "tanh", "output"});
  (void)tail;
  g.lint();
}

TEST_CASE("graph: a second output node is rejected") {
  Graph g;
  Node* x = g.placeholder("x");
  g.output(x);
  CHECK_THROWS_WITH_AS(g.output(x), doctest::Contains("already has an output"), GraphError);
}

TEST_CASE("graph: unknown aten operators are rejected") {
  CHECK_THROWS_WITH_AS(Target::aten("aten::no_such_op"), doctest::Contains("aten::no_such_op"),
                       GraphError);
}

TEST_CASE("graph: eliminate_dead_code removes unused pure nodes and keeps mutations") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* unused_input = g.placeholder("y");
  Node* a = g.call_function(relu(), {x});
  Node* dead = g.call_function(Target::aten("aten::neg"), {a});
  g.call_function(Target::aten("aten::sigmoid"), {dead});
  g.call_function(Target::aten("aten::relu_"), {x});  // mutates x: kept
  g.output(a);
  CHECK(g.eliminate_dead_code() == 2);
  std::vector<std::string> names;
  for (Node* n : g.nodes()) names.push_back(n->name());
  CHECK(names == std::vector<std::string>{"x", "y", "relu", "relu_", "output"});
  (void)unused_input;
  g.lint();
}

TEST_CASE("graph: eliminate_dead_code keeps random draws and training-mode statistics") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* mean = g.get_attr("running_mean");
  Node* var = g.get_attr("running_var");
  g.call_function(Target::aten("aten::dropout"), {x, 0.5, true});   // draws: kept
  g.call_function(Target::aten("aten::dropout"), {x, 0.5, false});  // the identity: erased
  g.call_function(Target::aten("aten::rand_like"), {x, None{}, None{}, None{}, None{}, None{}});
  // batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)
  g.call_function(Target::aten("aten::batch_norm"),
                  {x, None{}, None{}, mean, var, true, 0.1, 1e-5, false});  // updates: kept
  g.call_function(Target::aten("aten::batch_norm"),
                  {x, None{}, None{}, mean, var, false, 0.1, 1e-5, false});  // eval: erased
  g.output(x);
  CHECK(g.eliminate_dead_code() == 2);
  std::vector<std::string> names;
  for (Node* n : g.nodes()) names.push_back(n->name());
  CHECK(names == std::vector<std::string>{"x", "running_mean", "running_var", "dropout",
                                          "rand_like", "batch_norm", "output"});
  g.lint();
}

TEST_CASE("graph: eliminate_dead_code keeps in-place methods and effects passed by keyword") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* calls = g.get_attr("calls");
  // An in-place op as torch.fx shows it, a method: `calls.add_(1)`.
  g.call_method(Target::method(Target::aten("aten::add_.Scalar")), {calls, int64_t{1}});
  g.call_method(Target::method(Target::aten("aten::add.Scalar")), {x, int64_t{1}});  // erased
  // dropout(x, p=0.5, train=True), its flag by keyword.
  g.call_function(Target::aten("aten::dropout"), {x}, {{"p", 0.5}, {"train", true}});
  g.output(x);
  CHECK(g.eliminate_dead_code() == 1);
  std::vector<std::string> names;
  for (Node* n : g.nodes()) names.push_back(n->name());
  CHECK(names == std::vector<std::string>{"x", "calls", "add_", "dropout", "output"});
}

TEST_CASE("graph: inputs_written follows views, lists of views, out= and running statistics") {
  Graph g;
  Node* a = g.placeholder("a");  // written through a view
  Node* b = g.placeholder("b");  // only read
  Node* c = g.placeholder("c");  // written through an item of split
  Node* d = g.placeholder("d");  // an out= argument
  Node* e = g.placeholder("e");  // running mean of a training-mode batch norm
  Node* f = g.placeholder("f");  // running mean of an eval-mode one: read only
  Node* h = g.placeholder("h");  // in place as a method
  Node* v = g.call_method(Target::method(Target::aten("aten::view")), {a, list({int64_t{-1}})});
  g.call_method(Target::method(Target::aten("aten::zero_")), {v});
  Node* r = g.call_function(Target::aten("aten::relu"), {b});
  Node* parts = g.call_function(Target::aten("aten::split.Tensor"), {c, int64_t{1}});
  Node* part = g.call_function(Target::getitem(), {parts, int64_t{0}});
  g.call_function(Target::aten("aten::mul_.Scalar"), {part, 2.0});
  g.call_function(Target::aten("aten::mul.out"), {r, r}, {{"out", d}});
  g.call_function(Target::aten("aten::batch_norm"),
                  {r, None{}, None{}, e, None{}, true, 0.1, 1e-5, false});
  g.call_function(Target::aten("aten::batch_norm"),
                  {r, None{}, None{}, f, None{}, false, 0.1, 1e-5, false});
  g.call_method(Target::method(Target::aten("aten::add_.Scalar")), {h, int64_t{1}});
  // A result that does not alias its argument is no view of it: writing it writes no input.
  Node* copy = g.call_function(Target::aten("aten::mul.Scalar"), {b, 2.0});
  g.call_function(Target::aten("aten::add_.Scalar"), {copy, int64_t{1}});
  g.output(r);
  CHECK(inputs_written(g) == std::vector<bool>{true, false, true, true, true, false, true});
}

TEST_CASE("graph: rename_all names every node afresh, in order, from its hint") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(relu(), {x});                     // relu
  Node* b = g.call_function(Target::aten("aten::neg"), {a});  // neg
  Node* c = g.call_function(relu(), {b});                     // relu_1
  g.output(c);
  // Every op hinted "relu_1": the first keeps it, the others count on from it; the
  // placeholder and the output keep their own names (an empty hint is the default name).
  g.rename_all([](const Node& n) -> std::string {
    if (n.op() == OpCode::kPlaceholder) return n.name();
    return n.op() == OpCode::kOutput ? "" : "relu_1";
  });
  std::vector<std::string> names;
  for (Node* n : g.nodes()) names.push_back(n->name());
  CHECK(names == std::vector<std::string>{"x", "relu_1", "relu_2", "relu_3", "output"});
  g.lint();
  // The namespace is the new names': a new node does not take one of them.
  CHECK(g.call_function(relu(), {x})->name() == "relu");
  CHECK(g.call_function(relu(), {x})->name() == "relu_4");
}

TEST_CASE("graph: node_copy and graph_copy map arguments") {
  Graph src = tdfx::testing::seed_sequential_graph();
  Graph dst;
  Node* td = dst.placeholder("tensordict");
  std::unordered_map<const Node*, Node*> map{{*src.nodes().begin(), td}};
  Argument out = dst.graph_copy(src, map);
  dst.output(out);
  dst.lint();
  CHECK(to_string(dst) == to_string(src));
}

TEST_CASE("graph: a graph is movable and keeps its nodes") {
  Graph g = tdfx::testing::seed_module_graph();
  const std::string text = to_string(g);
  Graph moved = std::move(g);
  moved.lint();
  CHECK(to_string(moved) == text);
  moved.call_function(relu(), {*moved.nodes().begin()});
  moved.lint();
}

TEST_CASE("graph: a move hands the nodes to the new graph and leaves the old one usable") {
  Graph a = tdfx::testing::seed_module_graph();
  Node* first = *a.nodes().begin();
  Graph b;
  b.placeholder("y");
  b = std::move(a);  // b's own nodes are destroyed; a's nodes are b's now
  CHECK(&first->graph() == &b);
  CHECK_NOTHROW(b.inserting_before(first));  // throws for a node of another graph
  Graph c(std::move(b));
  CHECK(&first->graph() == &c);
  c.lint();
  // The emptied graphs take nodes of their own, which are not c's.
  Node* x = a.placeholder("x");
  Node* z = b.placeholder("z");
  CHECK(&x->graph() == &a);
  CHECK(&z->graph() == &b);
  CHECK_THROWS_WITH_AS(c.call_function(relu(), {x}), doctest::Contains("another graph"),
                       GraphError);
  a.lint();
  b.lint();
}

TEST_CASE("graph: nodes inserted anywhere and erased keep program order across storage blocks") {
  // Nodes live in blocks of 64, linked in program order: insert at the front, in the middle
  // and before the output, erase some, move the graph, and the order is what was asked for.
  Graph g;
  Node* x = g.placeholder("x");
  std::vector<Node*> chain;
  Node* last = x;
  for (int i = 0; i < 150; ++i) chain.push_back(last = g.call_function(relu(), {last}));
  g.output(last);
  Node* early;
  {
    auto guard = g.inserting_before(chain[0]);
    early = g.placeholder("early");  // before the first op, after x
  }
  Node* middle;
  {
    auto guard = g.inserting_after(chain[99]);
    middle = g.call_function(relu(), {chain[99]});
  }
  // Erase an op of the tail once its users read its input instead.
  chain[120]->replace_all_uses_with(chain[119]);
  g.erase_node(chain[120]);
  Graph moved = std::move(g);
  moved.lint();
  std::vector<Node*> order = moved.node_list();
  CHECK(order.size() == 1 + 1 + 150 + 1 + 1 - 1);
  CHECK(moved.size() == order.size());
  CHECK(order[0] == x);
  CHECK(order[1] == early);
  CHECK(order[2] == chain[0]);
  CHECK(order[2 + 100] == middle);
  CHECK(order.back() == moved.output_node());
  CHECK(std::find(order.begin(), order.end(), chain[120]) == order.end());
  CHECK(chain[120]->erased());
  CHECK(chain[119]->index() == 119 + 1);  // indices count creation, not position
}

TEST_CASE("graph: random inserts and erases keep the order a plain list of the same edits keeps") {
  // A model check of the node list: the same random edits on the graph and on a std::list of
  // the nodes, compared after each, across several storage blocks and a move.
  std::mt19937 random(20261205);
  Graph g;
  std::list<Node*> model;
  Node* x = g.placeholder("x");
  model.push_back(x);
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(random); };
  for (int step = 0; step < 600; ++step) {
    const size_t choice = pick(10);
    if (choice < 6 || model.size() < 3) {
      // A relu of x, before a random node (or at the end).
      const size_t at = pick(model.size() + 1);
      if (at == 0) continue;  // nothing goes before the placeholder that it reads
      auto where = std::next(model.begin(), static_cast<std::ptrdiff_t>(at));
      Node* before = where == model.end() ? nullptr : *where;
      auto guard = before ? g.inserting_before(before) : Graph::InsertGuard(g, nullptr);
      model.insert(where, g.call_function(relu(), {x}));
    } else {
      // Erase a random op (none reads another).
      auto it = std::next(model.begin(), static_cast<std::ptrdiff_t>(1 + pick(model.size() - 1)));
      g.erase_node(*it);
      model.erase(it);
    }
    REQUIRE(g.size() == model.size());
    REQUIRE(g.node_list() == std::vector<Node*>(model.begin(), model.end()));
  }
  Graph moved = std::move(g);
  moved.output(*moved.node_list().rbegin());
  model.push_back(moved.output_node());
  CHECK(moved.node_list() == std::vector<Node*>(model.begin(), model.end()));
  moved.lint();
}

TEST_CASE("graph: rename checks the name") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(relu(), {x});
  g.rename(a, "_0_fc");
  CHECK(a->name() == "_0_fc");
  CHECK_THROWS_WITH_AS(g.rename(a, "x"), doctest::Contains("taken"), GraphError);
  CHECK_THROWS_WITH_AS(g.rename(a, "0bad"), doctest::Contains("legal"), GraphError);
  CHECK_THROWS_AS(g.rename(a, "list"), GraphError);
}

TEST_CASE("graph: rename_fresh and lift_to_placeholder rewrite a node in place") {
  Graph g;
  Node* w = g.get_attr("fc.weight");
  Node* x = g.placeholder("x");
  Node* b = g.get_attr("fc.bias");
  Node* a = g.call_function(relu(), {x});
  Node* s = g.call_function(Target::aten("aten::add.Tensor"), {a, w});
  Node* t = g.call_function(Target::aten("aten::add.Tensor"), {s, b});
  g.output(t);
  // A name made unique as a new node's is: `relu` is taken.
  g.rename_fresh(s, "relu");
  CHECK(s->name() == "relu_1");
  // Each lifted read goes before `x`, in the order lifted; its readers keep reading it.
  g.lift_to_placeholder(b, "p_fc_bias", x);
  CHECK_THROWS_WITH_AS(g.lift_to_placeholder(w, "p_fc.weight", x),
                       doctest::Contains("not an identifier"), GraphError);
  g.lift_to_placeholder(w, "p_fc_weight", x);
  std::vector<std::string> names;
  for (Node* n : g.nodes()) names.push_back(n->name());
  CHECK(names == std::vector<std::string>{"p_fc_bias", "p_fc_weight", "x", "relu", "relu_1",
                                          "add_1", "output"});
  CHECK(w->op() == OpCode::kPlaceholder);
  CHECK(w->target().str() == "p_fc_weight");
  CHECK(s->args()[1].node() == w);
  CHECK(t->args()[1].node() == b);
  g.lint();
  CHECK_THROWS_WITH_AS(g.lift_to_placeholder(a, "p", nullptr), doctest::Contains("not a get_attr"),
                       GraphError);
}

TEST_CASE("graph: lint rejects a node that reads a node from another graph") {
  Graph a;
  Graph b;
  Node* x = a.placeholder("x");
  CHECK_THROWS_WITH_AS(b.call_function(relu(), {x}), doctest::Contains("another graph"),
                       GraphError);
}

TEST_CASE("graph: lint rejects a read before the definition") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* a = g.call_function(relu(), {x});
  Node* b = g.call_function(Target::aten("aten::neg"), {x});
  a->set_args({b});  // %relu now reads %neg, defined after it
  CHECK_THROWS_WITH_AS(g.lint(), doctest::Contains("%relu reads %neg"), GraphError);
}

TEST_CASE("graph: lint rejects a call_function that is not an operator") {
  Graph g;
  Node* x = g.placeholder("x");
  g.create_node(OpCode::kCallFunction, Target("my_function"), {x});
  CHECK_THROWS_WITH_AS(g.lint(), doctest::Contains("my_function"), GraphError);
}

TEST_CASE("graph: schema arguments are checked when printed") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* bad = g.call_function(relu(), {x}, {{"nope", 1}});
  g.output(bad);
  CHECK_THROWS_WITH_AS(to_string(g), doctest::Contains("'nope'"), GraphError);
}

TEST_CASE("graph: memory formats and layouts print as torch's names; defaults are left out") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* contiguous = g.call_function(Target::aten("aten::contiguous"), {x},
                                     {{"memory_format", c10::MemoryFormat::Contiguous}});
  Node* clone = g.call_function(Target::aten("aten::clone"), {contiguous},
                                {{"memory_format", c10::MemoryFormat::ChannelsLast3d}});
  Node* empty = g.call_function(
      Target::aten("aten::empty_like"), {clone},
      {{"layout", c10::Layout::SparseCsr}, {"memory_format", c10::MemoryFormat::Preserve}});
  Node* to = g.call_function(Target::aten("aten::to.dtype_layout"), {x},
                             {{"dtype", c10::ScalarType::Double}, {"layout", c10::Layout::Mkldnn}});
  g.output(tuple({empty, to}));
  g.lint();
  CHECK(to_string(g) ==
        "graph():\n"
        "    %x : [#users=2] = placeholder[target=x]\n"
        "    %contiguous : [#users=1] = call_function[target=torch.contiguous](args = (%x,), "
        "kwargs = {})\n"
        "    %clone : [#users=1] = call_function[target=torch.clone](args = (%contiguous,), kwargs "
        "= {memory_format: torch.channels_last_3d})\n"
        "    %empty_like : [#users=1] = call_function[target=torch.empty_like](args = (%clone,), "
        "kwargs = {layout: torch.sparse_csr, memory_format: torch.preserve_format})\n"
        "    %to : [#users=1] = call_function[target=torch.to](args = (%x,), kwargs = {dtype: "
        "torch.float64, layout: torch._mkldnn})\n"
        "    return (empty_like, to)");
  CHECK(describe(*empty) ==
        "%empty_like = torch.empty_like(%clone, layout=torch.sparse_csr, "
        "memory_format=torch.preserve_format)");
}

TEST_CASE("graph: a 100000-node chain is built, printed, copied and destroyed without recursion") {
  Graph g;
  Node* v = g.placeholder("x");
  for (int i = 0; i < 100000; ++i) v = g.call_function(relu(), {v});
  g.output(v);
  g.lint();
  const std::string text = to_string(g);
  CHECK(text.find("%relu_99999") != std::string::npos);
  Graph copy = g.copy();
  CHECK(copy.size() == g.size());
  CHECK(g.eliminate_dead_code() == 0);
}

TEST_CASE("graph: a null Node* argument is refused wherever arguments enter a graph") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* r = g.call_function(relu(), {x});
  Node* null = nullptr;
  CHECK_THROWS_WITH_AS(g.call_function(relu(), {null}),
                       "cannot create %relu: an argument is a null Node*", GraphError);
  CHECK_THROWS_WITH_AS(g.call_function(relu(), {list({x, null})}),
                       "cannot create %relu: an argument is a null Node*", GraphError);
  CHECK_THROWS_WITH_AS(r->set_args({null}), "%relu: an argument is a null Node*", GraphError);
  CHECK_THROWS_WITH_AS(r->set_arg(0, null), "%relu: an argument is a null Node*", GraphError);
  CHECK_THROWS_WITH_AS(r->set_kwargs({{"self", null}}), "%relu: an argument is a null Node*",
                       GraphError);
  CHECK_THROWS_WITH_AS(x->replace_all_uses_with(nullptr), "cannot replace %x with a null Node*",
                       GraphError);
  CHECK_THROWS_WITH_AS(r->replace_input_with(x, nullptr),
                       "%relu: the replacement input is null or belongs to another graph",
                       GraphError);
  g.output(r);
  g.lint();
  CHECK(to_string(g) ==
        "graph():\n"
        "    %x : [#users=1] = placeholder[target=x]\n"
        "    %relu : [#users=1] = call_function[target=torch.relu](args = (%x,), kwargs = {})\n"
        "    return relu");
}

TEST_CASE("graph: names that reach printed code must be identifiers") {
  Graph g;
  Node* x = g.placeholder("x");
  CHECK_THROWS_WITH_AS(g.placeholder("a\nb"),
                       "placeholder target 'a\\nb' is not an identifier (or is a Python keyword)",
                       GraphError);
  CHECK_THROWS_WITH_AS(g.placeholder("in"),
                       "placeholder target 'in' is not an identifier (or is a Python keyword)",
                       GraphError);
  CHECK(g.placeholder("input")->name() == "input_1");  // a builtin: a legal parameter, renamed node
  CHECK_THROWS_WITH_AS(g.call_method("view(); import os; x.view", {x}),
                       "call_method target 'view(); import os; x.view' is not a method name",
                       GraphError);
  CHECK_THROWS_WITH_AS(g.call_function(relu(), {x}, {{"a b", 1}}),
                       "cannot create %relu: keyword argument 'a b' is not an identifier",
                       GraphError);
  CHECK_THROWS_WITH_AS(g.call_function(relu(), {x}, {{"k", 1}, {"k", 2}}),
                       "cannot create %relu: keyword argument 'k' repeats", GraphError);
}

TEST_CASE("graph: control characters in targets and strings never start a printed line") {
  Graph g;
  Node* x = g.placeholder("x");
  Node* m = g.call_module("layers.a\nimport os", {x});
  Node* d = g.call_function(Target::aten("aten::div.Tensor_mode"), {x, m},
                            {{"rounding_mode", "fl\noor"}});
  g.output(d);
  CHECK(to_string(g) ==
        "graph():\n"
        "    %x : [#users=2] = placeholder[target=x]\n"
        "    %layers_a_import_os : [#users=1] = call_module[target=layers.a\\nimport os](args = "
        "(%x,), kwargs = {})\n"
        "    %div : [#users=1] = call_function[target=torch.div](args = (%x, %layers_a_import_os), "
        "kwargs = {rounding_mode: fl\\noor})\n"
        "    return div");
}

TEST_CASE("namespace: names are made unique as torch.fx's _Namespace makes them") {
  Namespace ns;
  CHECK(ns.create_name("add") == "add");
  CHECK(ns.create_name("add") == "add_1");
  CHECK(ns.create_name("add") == "add_2");
  CHECK(ns.create_name("add_1") == "add_3");  // a counter taken continues from itself
  CHECK(ns.create_name("x_03") == "x_3");     // a leading zero is not kept
  CHECK(ns.create_name("0.fc") == "_0_fc");
  CHECK(ns.create_name("input") == "input_1");  // a builtin is never handed out
  CHECK(ns.create_name("obs-1") == "obs_1");
  CHECK(ns.create_name("obs_1") == "obs_2");
  ns.reserve("relu");
  CHECK(ns.contains("relu"));
  CHECK_FALSE(ns.contains("rel"));
  CHECK(ns.create_name("relu") == "relu_1");
  // A copy names on its own.
  Namespace copy = ns;
  CHECK(copy.create_name("relu") == "relu_2");
  CHECK(ns.create_name("relu") == "relu_2");
}

TEST_CASE("namespace: thousands of names stay unique and found") {
  Namespace ns;
  std::set<std::string> made;
  for (int i = 0; i < 5000; ++i) {
    made.insert(ns.create_name("linear"));
    made.insert(ns.create_name("node_" + std::to_string(i % 700)));
  }
  CHECK(made.size() == 10000);
  for (const std::string& name : made) CHECK(ns.contains(name));
  CHECK(ns.create_name("linear") == "linear_5000");
  CHECK_FALSE(ns.contains("linear_5001"));
}
