#!/usr/bin/python3
"""Python's torch.save and torch.load as the oracle for tdfx's tensor files.

usage: tensor_file_oracle.py write DIR
       tensor_file_oracle.py check DIR

`write` saves, with torch.save, one file per case into DIR (CASE.pt) and describes
every tensor in DIR/manifest.json: dtype, shape, stride, storage offset,
requires_grad, which tensors share a storage, and the bytes of its values
(hex of the contiguous copy), so that C++ compares bit for bit.

`check` loads, with torch.load, each DIR/CASE.copy.pt that C++ wrote back from
CASE.pt and compares it with CASE.pt bit for bit (dtype, shape, values, dict or
not, key order); then DIR/cpp.pt, written by C++ from tensors it made, against
DIR/cpp.json (C++'s description of them, as above). A tensor file written by
tdfx holds values: every tensor in it loads with requires_grad False, so that
`.numpy()` works on it, whatever the tensor it was written from required.
Prints `ok CASE` or `FAIL CASE: why` per file and exits 1 on any failure.
"""

import collections
import json
import os
import sys

import torch


def cases():
    torch.manual_seed(0)
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    shared = torch.arange(20, dtype=torch.float32)
    out = {
        "f32_matrix": base,
        "f64": torch.randn(5, dtype=torch.float64),
        "f16": torch.randn(4, 3).half(),
        "bf16": torch.randn(4, 3).bfloat16(),
        "i64": torch.tensor([-(2**62), 3, 2**40, -1]),
        "i32": torch.tensor([-(2**31), 7, 2**31 - 1], dtype=torch.int32),
        "i16": torch.tensor([-300, 300], dtype=torch.int16),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "complex64": torch.randn(3, dtype=torch.complex64),
        "zero_dim": torch.tensor(3.5),
        "empty": torch.zeros(0, 3),
        "transposed": torch.arange(12, dtype=torch.int64).reshape(3, 4).t(),
        "offset_step_view": shared[5:15:2],
        "expanded": torch.tensor([1.0, 2.0]).expand(3, 2),
        "nonfinite": torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]),
        "requires_grad": torch.randn(3, requires_grad=True),
        "long_sizes": torch.randn(70000).reshape(7, 10000)[:, 300:],
        "dict": {"x": base[:, 1:3], "mask": torch.tensor([True, False]),
                 "y": base[1], "h": torch.zeros(2, dtype=torch.float16),
                 "s": torch.tensor(3.0)},
        "ordered_dict": collections.OrderedDict([("b", torch.ones(2)), ("a", torch.zeros(1))]),
        "empty_dict": {},
        "dict_1200": {f"t{i}": torch.full((2,), float(i)) for i in range(1200)},
    }
    return out


def describe(tensor, storages):
    t = tensor.detach()
    flat = t.contiguous().reshape(-1).view(torch.uint8)
    ptr = t.storage().data_ptr()
    storages.setdefault(ptr, len(storages))
    return {
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "offset": t.storage_offset(),
        "requires_grad": tensor.requires_grad,
        "storage": storages[ptr],
        "hex": flat.numpy().tobytes().hex(),
    }


def entries(value):
    if isinstance(value, torch.Tensor):
        return False, [("", value)]
    return True, list(value.items())


def write(directory):
    os.makedirs(directory, exist_ok=True)
    manifest = {}
    for name, value in cases().items():
        torch.save(value, os.path.join(directory, name + ".pt"))
        is_dict, items = entries(value)
        storages = {}
        manifest[name] = {"is_dict": is_dict,
                          "entries": [dict(name=k, **describe(t, storages)) for k, t in items]}
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    print(f"wrote {len(manifest)} files")
    return 0


def same(got, want):
    """'' when `got` equals `want` bit for bit, else what differs."""
    is_dict_got, items_got = entries(got)
    is_dict_want, items_want = entries(want)
    if is_dict_got != is_dict_want:
        return f"dict {is_dict_got}, expected {is_dict_want}"
    if [k for k, _ in items_got] != [k for k, _ in items_want]:
        return f"keys {[k for k, _ in items_got]}, expected {[k for k, _ in items_want]}"
    for (key, a), (_, b) in zip(items_got, items_want):
        if a.dtype != b.dtype or a.shape != b.shape or a.requires_grad:
            return (f"{key!r}: {a.dtype} {tuple(a.shape)} grad={a.requires_grad}, expected "
                    f"{b.dtype} {tuple(b.shape)} grad=False")
        bytes_a = a.detach().contiguous().reshape(-1).view(torch.uint8)
        bytes_b = b.detach().contiguous().reshape(-1).view(torch.uint8)
        if not torch.equal(bytes_a, bytes_b):
            return f"{key!r}: values differ:\n{a}\nexpected:\n{b}"
    return ""


def check(directory):
    failed = 0
    with open(os.path.join(directory, "manifest.json")) as f:
        names = list(json.load(f))
    for name in names:
        try:
            problem = same(torch.load(os.path.join(directory, name + ".copy.pt")),
                           torch.load(os.path.join(directory, name + ".pt")))
        except Exception as error:  # a file Python cannot load is a failure, not a skip
            problem = f"torch.load failed: {error!r}"
        failed += bool(problem)
        print(f"FAIL {name}: {problem}" if problem else f"ok {name}")
    try:
        got = torch.load(os.path.join(directory, "cpp.pt"))
        with open(os.path.join(directory, "cpp.json")) as f:
            want = json.load(f)
        problem = ""
        is_dict, items = entries(got)
        if is_dict != want["is_dict"] or [k for k, _ in items] != [e["name"] for e in want["entries"]]:
            problem = f"holds {list(k for k, _ in items)}, expected {want}"
        for (key, t), expected in zip(items, want["entries"]):
            description = describe(t, {})
            for field in ("dtype", "shape", "requires_grad", "hex"):
                if description[field] != expected[field]:
                    problem = f"{key!r}: {field} {description[field]}, expected {expected[field]}"
    except Exception as error:
        problem = f"torch.load failed: {error!r}"
    failed += bool(problem)
    print(f"FAIL cpp: {problem}" if problem else "ok cpp")
    print("all ok" if not failed else f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(write(sys.argv[2]) if sys.argv[1] == "write" else check(sys.argv[2]))
