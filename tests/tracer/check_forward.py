"""Checks a forward printed by tdfx as Python: compiles it, and with a shape, runs it on a
TensorDict stand-in ({"x": randn(shape)}) and prints the output shapes.

    check_forward.py FILE [2,3,4]
"""
import sys

import torch

source = open(sys.argv[1]).read()
code = compile(source, "forward.py", "exec")
print("compiled")
if len(sys.argv) > 2:
    namespace = {"torch": torch, "device": torch.device}
    exec(code, namespace)
    shape = [int(size) for size in sys.argv[2].split(",")]
    outputs = namespace["forward"](None, {"x": torch.randn(shape)})
    print("ran", [list(output.shape) for output in outputs])
