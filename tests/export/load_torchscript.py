"""Loads a TorchScript module saved by tdfx and checks it in Python's torch.

usage: load_torchscript.py model.pt inputs.pt expected.pt

inputs.pt and expected.pt hold lists of tensors written by C++'s
torch::pickle_save. Prints "ok" when the module's outputs equal the expected
ones bit for bit and it also runs at batch size 5; "skip: ..." when torch is
not installed; otherwise what differs.
"""

import sys

try:
    import torch
except ImportError as error:
    print(f"skip: {error}")
    sys.exit(0)


def main(model_path, inputs_path, expected_path):
    model = torch.jit.load(model_path)
    inputs = list(torch.load(inputs_path))
    expected = list(torch.load(expected_path))
    outputs = model(*inputs)
    if not isinstance(outputs, tuple):
        return f"forward returned {type(outputs).__name__}, not a tuple"
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    for i, (got, want) in enumerate(zip(outputs, expected)):
        if not torch.equal(got, want):
            return f"output {i} differs:\n{got}\nexpected:\n{want}"
    batch = [torch.randn((5,) + tuple(x.shape[1:]), dtype=x.dtype) for x in inputs]
    resized = model(*batch)
    if any(out.shape[0] != 5 for out in resized):
        return f"batch 5 gave shapes {[tuple(out.shape) for out in resized]}"
    return "ok"


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    print(main(*sys.argv[1:]))
