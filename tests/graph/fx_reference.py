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
                       "dtype": torch.float64, "dev": torch.device("cpu"),
                       "fmt": torch.channels_last, "layout": torch.sparse_coo})
    cl = g.call_function(torch.clamp_min, (c,), {"min": 1e-05})
    big = g.call_function(operator.add, (cl, 1e16))
    ch = g.call_function(torch.chunk, (big,), {"chunks": 2, "dim": -1})
    first = g.call_function(operator.getitem, (ch, 0))
    summed = g.call_function(torch.sum, (first,), {"dim": [1], "keepdim": True, "dtype": torch.float32})
    ones = g.call_function(torch.ones, (), {"size": [2, 3], "dtype": torch.float32,
                                            "device": torch.device("cpu")})
    cat = g.call_function(torch.cat, ([summed, ones],), {"dim": 1})
    cl = g.call_function(torch.clone, (first,), {"memory_format": torch.contiguous_format})
    zeros = g.call_function(torch.zeros_like, (cl,), {"layout": torch.strided,
                                                      "memory_format": torch.preserve_format})
    g.output((cat, first, zeros))
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


def enum_names():
    """Each memory format and layout torch names, as `kind int repr`: the int is the one
    TorchScript (and c10) has for it."""
    names = sorted(name for name, value in vars(torch).items()
                   if isinstance(value, (torch.memory_format, torch.layout)))
    source = "def f() -> List[int]:\n    return [" + ", ".join(f"torch.{n}" for n in names) + "]\n"
    ints = torch.jit.CompilationUnit(source).f()
    # legacy_contiguous_format is contiguous_format again: one row each.
    rows = {(type(getattr(torch, n)).__name__, i, repr(getattr(torch, n)))
            for n, i in zip(names, ints)}
    return "\n".join(f"{kind} {i} {text}" for kind, i, text in sorted(rows))


if __name__ == "__main__":  # tabular_reference.py imports the graphs
    for name, build in [("all_kinds", all_kinds), ("single_output", single_output),
                        ("one_tuple_output", one_tuple_output)]:
        graph = build()
        print(f"=== {name} graph")
        print(str(graph))
        print(f"=== {name} code")
        print(graph.python_code(root_module="self").src)
    print("=== enum names")
    print(enum_names())
    print("=== end")
