#!/usr/bin/python3
"""The code `tdfx show` prints for an exported program is Python that runs, and computes
what the program's JSON says, bit for bit.

usage: check_printed_code.py TDFX SCRATCH_DIR [ARCHIVE.pt2 ...]

Without archives it checks the demo's (`TDFX demo --out SCRATCH_DIR/demo`) and, when
`export_module` is beside TDFX, seed 000's model.pt2 (run in SCRATCH_DIR/export_module).
For each archive:

  - `show --code` and `show --readable` exit 0 and print Python that compile()s;
  - the `--code` forward (torch.ops.aten.X.overload calls, operator.getitem) and the
    `--readable` module's forward run on the archive's weights and seeded random user
    inputs of the placeholders' dtype and shape;
  - both give bit-identical outputs, with the same strides, to an independent interpreter
    of program.json, node by node with torch.ops.aten: the printed code and the JSON say
    the same;
  - when a TorchScript module written by tdfx's C++ sits beside the archive (X.pt for
    X.pt2, as export_module writes), it gives bit-identical outputs too.

The C++ runner itself is compared elsewhere: with the saved program by
tests/export/test_archive.cpp, and with Python by tests/python/test_loader.py (`tdfx run --save`).

program.json and the weights are read, and checked, by python/tdfx_fx.py's read(); the
interpreter here decodes the nodes on its own. Prints one line per check and ends with
`N passed, M failed`; exits 1 when any check failed.
"""

import builtins
import math
import operator
import os
import shutil
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tdfx_fx  # noqa: E402

SEED = 0


# --- the archive -------------------------------------------------------------------


dtype_of = tdfx_fx.dtype_of


def enum_of(name, kind):
    """torch.channels_last for ("channels_last", torch.memory_format); names stored without
    the module, as dtypes are."""
    value = getattr(torch, name, None)
    if not isinstance(value, kind):
        raise ValueError(f"unknown {kind.__name__} {name!r}")
    return value


def read_archive(path):
    """program.json (as parsed) and the weights, by placeholder name."""
    program = tdfx_fx.read(path)
    return program.document, program.weights


def random_input(meta, generator):
    if "dtype" not in meta or "shape" not in meta:
        raise ValueError(f"no dtype and shape in its meta: {meta}")
    dtype, shape = dtype_of(meta["dtype"]), meta["shape"]
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=generator, dtype=dtype)
    low = 0 if dtype == torch.uint8 else -5
    return torch.randint(low, 10, shape, generator=generator, dtype=dtype)


def forward_arguments(program, weights):
    """The forward's arguments in placeholder order: weights, then seeded user inputs."""
    kinds = {i["name"]: i["kind"] for i in program["signature"]["inputs"]}
    generator = torch.Generator().manual_seed(SEED)
    values = []
    for node in program["nodes"]:
        if node["op"] != "placeholder":
            continue
        name = node["name"]
        if kinds.get(name) == "user_input":
            values.append(random_input(node["meta"], generator))
        elif name in weights:
            values.append(weights[name])
        else:
            raise ValueError(f"placeholder {name} is neither a user input nor a weight")
    return values


# --- an interpreter of program.json --------------------------------------------------


def aten_op(target):
    """torch.ops.aten.name.overload for "aten::name.overload" ("default" when none)."""
    namespace, _, qualified = target.partition("::")
    if namespace != "aten":
        raise ValueError(f"not an aten operator: {target!r}")
    name, _, overload = qualified.partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def argument(arg, env):
    kind = next(k for k in arg if k != "is_tuple")
    value = arg[kind]
    if kind == "none":
        return None
    if kind in ("bool", "int", "str"):
        return value
    if kind == "float":
        return float(value)  # a number, or "inf", "-inf", "nan"
    if kind == "key":
        return tuple(value) if arg.get("is_tuple") or len(value) > 1 else value[0]
    if kind == "dtype":
        return dtype_of(value)
    if kind == "memory_format":
        return enum_of(value, torch.memory_format)
    if kind == "layout":
        return enum_of(value, torch.layout)
    if kind == "device":
        return torch.device(value)
    if kind == "node":
        return env[value]
    if kind == "list":
        return [argument(item, env) for item in value]
    if kind == "tuple":
        return tuple(argument(item, env) for item in value)
    raise ValueError(f"unknown argument kind {kind!r}")


# Python's int arithmetic on sizes, by the target program.json names it with.
SIZE_ARITHMETIC = {"operator.add": operator.add, "operator.sub": operator.sub,
                   "operator.mul": operator.mul, "operator.floordiv": operator.floordiv}


def interpret(nodes, inputs):
    """Runs a node list (a program's or a call_module's body) on `inputs`, one per
    placeholder in order; returns what its output node returns."""
    env = {}
    inputs = iter(inputs)
    for node in nodes:
        op, target = node["op"], node["target"]
        args = [argument(a, env) for a in node["args"]]
        kwargs = {name: argument(a, env) for name, a in node["kwargs"]}
        if op == "placeholder":
            env[node["name"]] = next(inputs)
        elif op == "call_function" and target == "operator.getitem":
            env[node["name"]] = operator.getitem(*args)
        elif op == "call_function" and target in SIZE_ARITHMETIC:
            env[node["name"]] = SIZE_ARITHMETIC[target](*args)
        elif op == "call_function":
            function = aten_op(target)
            # program.json lists arguments in schema order, keyword-only ones
            # (add.Tensor's alpha) included: Python passes those by name.
            formals = function._schema.arguments
            keyword = [i for i in range(len(args)) if i < len(formals) and formals[i].kwarg_only]
            kwargs.update((formals[i].name, args[i]) for i in keyword)
            args = [a for i, a in enumerate(args) if i not in keyword]
            env[node["name"]] = function(*args, **kwargs)
        elif op == "call_module":
            if kwargs:
                raise ValueError(f"call_module %{node['name']} has keyword arguments")
            env[node["name"]] = interpret(node["body"], args)
        elif op == "output":
            return args[0]
        else:
            raise ValueError(f"op {op!r} in a loaded program")
    raise ValueError("no output node")


class Modules:
    """`self` for printed code: `self.a.b(x)` or `getattr(self, "0").b(x)` runs the
    body of the call_module node whose target is `a.b`, with the interpreter."""

    def __init__(self, bodies, path=""):
        self._bodies = bodies
        self._path = path

    def __getattr__(self, name):
        return Modules(self._bodies, f"{self._path}.{name}" if self._path else name)

    def __call__(self, *args):
        return interpret(self._bodies[self._path], args)


def module_bodies(nodes, bodies=None):
    bodies = {} if bodies is None else bodies
    for node in nodes:
        if node["op"] == "call_module":
            bodies.setdefault(node["target"], node["body"])
            module_bodies(node["body"], bodies)
    return bodies


# --- running printed code ------------------------------------------------------------


def code_globals():
    # What torch.fx's generated code may name besides torch and operator.
    return {"__builtins__": builtins, "torch": torch, "operator": operator,
            "inf": math.inf, "nan": math.nan, "device": torch.device}


def run_code(text, filename, values, modules):
    scope = code_globals()
    exec(compile(text, filename, "exec"), scope)
    return scope["forward"](modules, *values)


def run_readable(text, filename, values, modules):
    scope = code_globals()
    exec(compile(text, filename, "exec"), scope)
    module_class = scope["GraphModule"]
    if not issubclass(module_class, torch.nn.Module):
        raise ValueError("GraphModule is not a torch.nn.Module")
    return module_class.forward(modules, *values)


def raw_bytes(tensor):
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8)


def difference(got, want, where="output"):
    """"" when `got` and `want` are bit-identical, otherwise what differs."""
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{where} is a {type(got).__name__}, not a tensor"
        if got.dtype != want.dtype or got.shape != want.shape:
            return (f"{where} is {got.dtype}{list(got.shape)}, "
                    f"expected {want.dtype}{list(want.shape)}")
        if got.stride() != want.stride():  # a memory format lost on the way
            return f"{where} has strides {got.stride()}, expected {want.stride()}"
        if not torch.equal(raw_bytes(got), raw_bytes(want)):
            return f"{where} differs (max abs difference {(got - want).abs().max().item()})"
        return ""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"{where} is {got!r:.200}, expected {len(want)} items"
        for i, (g, w) in enumerate(zip(got, want)):
            problem = difference(g, w, f"{where}[{i}]")
            if problem:
                return problem
        return ""
    return "" if got == want else f"{where} is {got!r}, expected {want!r}"


def tdfx_show(tdfx, flag, path):
    process = subprocess.run([tdfx, "show", flag, path], capture_output=True, timeout=120)
    if process.returncode != 0 or process.stderr:
        raise RuntimeError(f"tdfx show {flag} exited {process.returncode}: "
                           f"{process.stderr.decode(errors='replace').strip()}")
    return process.stdout.decode()


# --- the checks ----------------------------------------------------------------------


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, fn):
        """Runs fn(); a returned string or a raised exception is a failure."""
        try:
            problem = fn()
        except Exception as error:  # noqa: BLE001 - any error is this check's failure
            problem = f"{type(error).__name__}: {error}"
        if problem:
            self.failed += 1
            print(f"FAIL {name}: {problem}", flush=True)
        else:
            self.passed += 1
            print(f"ok   {name}", flush=True)
        return not problem


def check_archive(checks, tdfx, path):
    label = os.path.basename(path)
    state = {}

    def load():
        state["program"], state["weights"] = read_archive(path)
        state["values"] = forward_arguments(state["program"], state["weights"])
        state["modules"] = Modules(module_bodies(state["program"]["nodes"]))
        torch.manual_seed(SEED)
        state["expected"] = interpret(state["program"]["nodes"], state["values"])
        outputs = state["program"]["signature"]["outputs"]
        if not isinstance(state["expected"], tuple) or len(state["expected"]) != len(outputs):
            return f"the program returns {state['expected']!r:.200}, not {len(outputs)} outputs"
        return ""
    if not checks.check(f"{label}: program.json and the weights interpret", load):
        return

    for flag, runner in (("--code", run_code), ("--readable", run_readable)):
        def compiles(flag=flag):
            state[flag] = tdfx_show(tdfx, flag, path)
            compile(state[flag], f"<tdfx show {flag} {label}>", "exec")
            return ""
        if not checks.check(f"{label}: show {flag} compiles", compiles):
            continue

        def agrees(flag=flag, runner=runner):
            torch.manual_seed(SEED)
            got = runner(state[flag], f"<tdfx show {flag} {label}>", state["values"],
                         state["modules"])
            return difference(got, state["expected"])
        checks.check(f"{label}: show {flag} runs bit-identically to program.json", agrees)

    script = os.path.splitext(path)[0] + ".pt"
    if os.path.exists(script):
        def torchscript_agrees():
            module = torch.jit.load(script)
            kinds = {i["name"]: i["kind"] for i in state["program"]["signature"]["inputs"]}
            placeholders = [n["name"] for n in state["program"]["nodes"]
                            if n["op"] == "placeholder"]
            user = [v for n, v in zip(placeholders, state["values"]) if kinds[n] == "user_input"]
            torch.manual_seed(SEED)
            got = module(*user)
            return difference(tuple(got) if isinstance(got, list) else got, state["expected"])
        checks.check(f"{label}: the TorchScript {os.path.basename(script)} beside it agrees "
                     f"bit for bit", torchscript_agrees)


def default_archives(checks, tdfx, scratch):
    archives = []
    demo_dir = os.path.join(scratch, "demo")

    def demo():
        process = subprocess.run([tdfx, "demo", "--out", demo_dir], capture_output=True,
                                 timeout=300)
        if process.returncode != 0:
            return f"tdfx demo exited {process.returncode}: {process.stderr.decode()[-2000:]}"
        archives.append(os.path.join(demo_dir, "trace_sequential.pt2"))
        return ""
    checks.check("tdfx demo writes trace_sequential.pt2", demo)

    export_module = os.path.join(os.path.dirname(tdfx), "export_module")
    if os.access(export_module, os.X_OK):
        work = os.path.join(scratch, "export_module")
        os.makedirs(work)

        def seed_000():
            process = subprocess.run([export_module], cwd=work, capture_output=True, timeout=300)
            if process.returncode != 0:
                return (f"export_module exited {process.returncode}: "
                        f"{process.stderr.decode()[-2000:]}")
            archives.append(os.path.join(work, "model.pt2"))
            return ""
        checks.check("export_module writes model.pt2 and model.pt", seed_000)
    else:
        print(f"note: no {export_module}: checking the demo's archive only", flush=True)
    return archives


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    tdfx, scratch = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    checks = Checks()
    archives = [os.path.abspath(a) for a in argv[3:]] or default_archives(checks, tdfx, scratch)
    for path in archives:
        check_archive(checks, tdfx, path)
    if checks.passed + checks.failed == 0:
        checks.failed += 1
        print("FAIL nothing was checked")
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
