"""Builds, with Python's torch.fx 1.13, the same graphs as tests/graph/test_python_oracle.cpp
and prints str(graph) and the generated forward code of each, separated by marker lines.
The C++ test runs this script and compares its output with tdfx's printers byte for byte."""
import operator

import torch
import torch.fx


def all_kinds():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    inp = g.placeholder("input")  # a builtin: the node is renamed input_1
    td = g.placeholder("tensordict")
    w = g.get_attr("0.module.fc1.weight")
    key = g.call_function(operator.getitem, (td, ("input", "x")))
    quoted = g.call_function(operator.getitem, (td, "it's"))
    m = g.call_function(operator.mul, (x, inp))
    a = g.call_function(operator.add, (m, 0.5))
    s = g.call_function(torch.softmax, (a,), {"dim": 1})
    mm = g.call_function(operator.matmul, (s, w))
    n = g.call_function(operator.neg, (mm,))
    sub = g.call_function(operator.sub, (n, key))
    c = g.call_module("0.module.fc1", (sub, quoted),
                      {"scale": None, "flag": False, "name": "it's", "dims": (1, 2),
                       "dtype": torch.float64, "dev": torch.device("cpu")})
    cl = g.call_function(torch.clamp_min, (c,), {"min": 1e-05})
    big = g.call_function(operator.add, (cl, 1e16))
    ch = g.call_function(torch.chunk, (big,), {"chunks": 2, "dim": -1})
    first = g.call_function(operator.getitem, (ch, 0))
    summed = g.call_function(torch.sum, (first,), {"dim": [1], "keepdim": True, "dtype": torch.float32})
    ones = g.call_function(torch.ones, (), {"size": [2, 3], "dtype": torch.float32,
                                            "device": torch.device("cpu")})
    cat = g.call_function(torch.cat, ([summed, ones],), {"dim": 1})
    g.output((cat, first))
    return g


def single_output():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(torch.relu, (x,))
    r1 = g.call_function(torch.relu, (r,))
    g.output(r1)
    return g


def one_tuple_output():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    t = g.call_function(torch.sigmoid, (x,))
    g.output((t,))
    return g


for name, build in [("all_kinds", all_kinds), ("single_output", single_output),
                    ("one_tuple_output", one_tuple_output)]:
    graph = build()
    print(f"=== {name} graph")
    print(str(graph))
    print(f"=== {name} code")
    print(graph.python_code(root_module="self").src)
print("=== end")
