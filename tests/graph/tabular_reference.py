"""Prints torch.fx 1.13's Graph.print_tabular() (Debian's python3-tabulate) for the graphs
tests/graph/test_tabular.cpp builds, one section per graph after a `=== name` line.

One change to what Python prints: a callable target (torch.relu) is shown by the name
str(graph) gives it (`torch.relu`), not as its object (`<built-in method relu of type
object at 0x7f...>`, whose address differs in every run). Everything else is FX's own
print_tabular and tabulate's own layout."""
import contextlib
import io
import operator
import sys

import tabulate  # fails loudly when python3-tabulate is missing: the C++ test then fails
import torch
import torch.fx

from fx_reference import all_kinds, single_output

_tabulate = tabulate.tabulate


def _named_targets(rows, *args, **kwargs):
    rows = [[torch.fx.Node._pretty_print_target(None, cell) if callable(cell) else cell
             for cell in row] for row in rows]
    return _tabulate(rows, *args, **kwargs)


tabulate.tabulate = _named_targets  # print_tabular imports it when called


def seed_module():
    g = torch.fx.Graph()
    td = g.placeholder("tensordict")
    inp = g.call_function(operator.getitem, (td, "input"))
    linear = g.call_module("linear", (inp,))
    sigmoid = g.call_function(torch.sigmoid, (linear,))
    g.output((linear, sigmoid))
    return g


def seed_sequential():
    g = torch.fx.Graph()
    td = g.placeholder("tensordict")
    x = g.call_function(operator.getitem, (td, ("input", "x")))
    fc1 = g.create_node("call_module", "0.module.fc1", (x,), {}, name="_0_fc1")
    relu = g.call_function(torch.relu, (fc1,))
    fc2 = g.create_node("call_module", "0.module.fc2", (relu,), {}, name="_0_fc2")
    mask = g.call_function(operator.getitem, (td, ("input", "mask")))
    mul = g.call_function(operator.mul, (fc2, mask))
    softmax = g.call_function(torch.softmax, (mul,), {"dim": 1})
    g.output((fc2, softmax))
    return g


def nested_sequential():
    g = torch.fx.Graph()
    td = g.placeholder("tensordict")
    inp = g.call_function(operator.getitem, (td, "input"))
    fc0 = g.create_node("call_module", "0.module.0.module.fc", (inp,), {}, name="_0__0_fc")
    relu = g.call_function(torch.relu, (fc0,))
    fc1 = g.create_node("call_module", "0.module.1.module.fc", (relu,), {}, name="_0__1_fc_1")
    relu1 = g.call_function(torch.relu, (fc1,))
    fc = g.create_node("call_module", "1.module.fc", (relu1,), {}, name="_1_fc")
    softmax = g.call_function(torch.softmax, (fc,), {"dim": 1})
    g.output((relu1, softmax))
    return g


def long_names():
    g = torch.fx.Graph()
    x = g.placeholder("a_rather_long_placeholder_name_that_widens_its_column")
    w = g.get_attr("encoder.layers.11.self_attention.output_projection.weight")
    p = g.call_module("encoder.layers.11.self_attention.output_projection", (x,),
                      {"note": "a long keyword argument, with 'quotes' and \"both\""})
    v = g.call_method("view", (p, [-1, 128]))
    t = g.call_method("transpose", (v, 0, 1))
    mm = g.call_function(operator.matmul, (t, w))
    g.output([mm, v])
    return g


def empty():
    return torch.fx.Graph()


for name, build in [("seed_module", seed_module), ("seed_sequential", seed_sequential),
                    ("nested_sequential", nested_sequential), ("all_kinds", all_kinds),
                    ("single_output", single_output), ("long_names", long_names),
                    ("empty", empty)]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        build().print_tabular()
    print(f"=== {name}")
    sys.stdout.write(out.getvalue())
print("=== end")
