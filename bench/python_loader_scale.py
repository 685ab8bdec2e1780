#!/usr/bin/python3
"""Loading long programs with both loaders, side by side in one run: python/tdfx_fx.py's
`read` and `graph_module`, and `tdfx show`, over relu chains of 1,000, 10,000 and 100,000
nodes spliced into the demo's archive. Prints seconds and microseconds per node; the
per-node cost staying flat from 10,000 to 100,000 nodes is what "linear" means here.

usage: python_loader_scale.py TDFX SCRATCH_DIR
"""

import copy
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "export"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import hostile_archives  # noqa: E402  (its Archive edits program.json and rewrites the zip)
import tdfx_fx  # noqa: E402


def relu_chain(base, n):
    """The demo's archive with `n` relu nodes between input_x and its first user."""
    archive = base.copy()
    nodes = archive.document["nodes"]
    x = next(node for node in nodes if node["name"] == "input_x")
    user = next(node for node in nodes if {"node": "input_x"} in node["args"])
    meta = dict(copy.deepcopy(user["meta"]), shape=x["meta"]["shape"], dtype=x["meta"]["dtype"])
    chain, previous = [], "input_x"
    for i in range(n):
        chain.append({"name": f"r{i}", "op": "call_function", "target": "aten::relu",
                      "args": [{"node": previous}], "kwargs": [], "meta": copy.deepcopy(meta)})
        previous = f"r{i}"
    user["args"] = [{"node": previous} if a == {"node": "input_x"} else a for a in user["args"]]
    at = nodes.index(user)
    nodes[at:at] = chain
    return archive


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tdfx, scratch = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    os.makedirs(scratch, exist_ok=True)
    subprocess.run([tdfx, "demo", "--out", scratch], check=True, stdout=subprocess.DEVNULL)
    base = hostile_archives.Archive(os.path.join(scratch, "trace_sequential.pt2"))
    print(f"{'nodes':>7}  {'read s':>7}  {'µs/node':>7}  {'graph_module s':>14}  {'µs/node':>7}"
          f"  {'tdfx show s':>11}  {'µs/node':>7}")
    for n in (1000, 10000, 100000):
        path = os.path.join(scratch, f"chain_{n}.pt2")
        with open(path, "wb") as out:
            out.write(relu_chain(base, n).bytes())
        program, read_s = timed(lambda: tdfx_fx.read(path))
        _, module_s = timed(lambda: tdfx_fx.graph_module(program))
        _, show_s = timed(lambda: subprocess.run([tdfx, "show", path], check=True,
                                                 stdout=subprocess.DEVNULL))
        per = 1e6 / n
        print(f"{n:>7}  {read_s:>7.2f}  {read_s * per:>7.1f}  {module_s:>14.2f}  "
              f"{module_s * per:>7.1f}  {show_s:>11.2f}  {show_s * per:>7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
