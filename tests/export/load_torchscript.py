"""Loads a TorchScript module saved by tdfx and checks it in Python's torch.

usage: load_torchscript.py model.pt inputs.pt expected.pt

inputs.pt holds a list of tensors and expected.pt a list of tensors (a module
whose forward returns a tuple) or a dict of str to tensor (one that returns a
dict), written by C++'s torch::pickle_save. Prints "ok" when the module's
outputs equal the expected ones bit for bit (a dict's keys too, in order) and
it also runs at batch size 5; otherwise what differs. torch is a required
dependency (python3-torch; scripts/bootstrap.sh installs it): without it the
script says so and exits with status 1.
"""

import sys

try:
    import torch
except ImportError as error:
    print(f"Python's torch is required (python3-torch; scripts/bootstrap.sh installs it): "
          f"{error}")
    sys.exit(1)


def compare(outputs, expected):
    """What differs between the forward's outputs and the expected ones, or None."""
    if isinstance(expected, dict):
        if not isinstance(outputs, dict):
            return f"forward returned {type(outputs).__name__}, not a dict"
        if list(outputs) != list(expected):
            return f"keys {list(outputs)}, expected {list(expected)}"
        pairs = [(repr(key), outputs[key], expected[key]) for key in expected]
    else:
        if not isinstance(outputs, tuple):
            return f"forward returned {type(outputs).__name__}, not a tuple"
        if len(outputs) != len(expected):
            return f"{len(outputs)} outputs, expected {len(expected)}"
        pairs = [(str(i), got, want) for i, (got, want) in enumerate(zip(outputs, expected))]
    for name, got, want in pairs:
        if got.dtype != want.dtype or not torch.equal(got, want):
            return f"output {name} differs:\n{got}\nexpected:\n{want}"
    return None


def main(model_path, inputs_path, expected_path):
    model = torch.jit.load(model_path)
    inputs = list(torch.load(inputs_path))
    expected = torch.load(expected_path)
    if not isinstance(expected, dict):
        expected = list(expected)
    problem = compare(model(*inputs), expected)
    if problem:
        return problem
    batch = [torch.randn((5,) + tuple(x.shape[1:]), dtype=x.dtype) for x in inputs]
    resized = model(*batch)
    values = resized.values() if isinstance(resized, dict) else resized
    if any(out.shape[0] != 5 for out in values):
        return f"batch 5 gave shapes {[tuple(out.shape) for out in values]}"
    return "ok"


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    print(main(*sys.argv[1:]))
