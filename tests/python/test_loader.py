#!/usr/bin/python3
"""python/tdfx_fx.py loads the archives tdfx writes into torch.fx GraphModules that run
bit-identically to tdfx, and refuses archives it does not understand.

usage: test_loader.py TDFX EXPORT_MODULE EXPORT_BATCH_SIZED SCRATCH_DIR

Writes the test suite's archives - the demo's (`TDFX demo --out SCRATCH_DIR/demo`), seed
000's model.pt2 with its TorchScript model.pt (EXPORT_MODULE run in SCRATCH_DIR/seed_000),
and attention, transformer layers and reshape(B*T) with a dynamic batch, each with its
TorchScript (EXPORT_BATCH_SIZED run in SCRATCH_DIR/batch_sized), and the snapshot of a training
step samples/watch_training.cpp keeps (beside TDFX: its Adam state and input read back) - and
for each:

  - tdfx_fx.load() gives a GraphModule whose graph lints, whose nodes carry program.json's
    names in order, which calls torch.ops.aten overloads, operator.getitem and Python's int
    operators on sizes (operator.mul), and whose
    parameters and buffers sit at the signature's paths holding the weights' bytes;
  - gm(*user inputs) on seeded random inputs is bit-identical (values, dtypes, shapes,
    strides) to the independent interpreter of program.json in
    tests/export/check_printed_code.py;
  - with weights_as_inputs=True its `code` is what `tdfx show --code` prints, byte for
    byte, and it runs bit-identically too;
  - the C++ run: `tdfx run X.pt2 --seed 7 --save X.run.pt` writes the inputs it drew and
    the outputs tdfx computed; the GraphModule on those inputs gives those outputs, bit for
    bit. Where tdfx's C++ wrote a TorchScript module beside the archive (X.pt for X.pt2),
    it agrees too: same parameters, bit-identical outputs;
  - a dynamic archive at batches 1, 7 and 33: the C++ run of the same inputs (`tdfx run
    --input`) and the TorchScript module agree with the GraphModule bit for bit;
  - Python's FX tools work on it: ShapeProp gives each node the dtype and shape
    program.json records, torch.fx.Interpreter runs it bit-identically, print_tabular
    prints a row per node.

Then: ALLOWED_OPERATORS is the C++ allowlist (graph/op_table.cpp's loadable rows), and
edited copies of the demo's archive (another version, an unknown node kind, operator or
argument kind, a name that is not an identifier, a weight path that shadows nn.Module, ...)
raise ArchiveError with the message expected. Anything missing (a binary, an archive,
tabulate) is a failure, not a skip. Prints one line per check and `N passed, M failed`;
exits 1 when any check failed.
"""

import io
import json
import operator
import os
import re
import shutil
import subprocess
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "export"))

import torch  # noqa: E402
import torch.fx  # noqa: E402
from torch.fx.passes.shape_prop import ShapeProp  # noqa: E402

import check_printed_code as oracle  # noqa: E402
import tdfx_fx  # noqa: E402


def run(command, cwd=None):
    process = subprocess.run(command, cwd=cwd, capture_output=True, timeout=300)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {process.returncode}: "
                           f"{process.stderr.decode(errors='replace')[-2000:]}")
    return process.stdout.decode()


def write_archives(checks, tdfx, export_module, export_batch_sized, scratch):
    """The archives of the test suite, written by the build's own binaries."""
    archives = []

    def demo():
        run([tdfx, "demo", "--out", os.path.join(scratch, "demo")])
        archives.append(os.path.join(scratch, "demo", "trace_sequential.pt2"))
        return ""
    checks.check("tdfx demo writes trace_sequential.pt2", demo)

    def seed_000():
        work = os.path.join(scratch, "seed_000")
        os.makedirs(work)
        run([export_module], cwd=work)
        for name in ("model.pt2", "model.pt"):
            if not os.path.isfile(os.path.join(work, name)):
                return f"export_module wrote no {name}"
        archives.append(os.path.join(work, "model.pt2"))
        return ""
    checks.check("export_module writes seed 000's model.pt2 and model.pt", seed_000)

    def constant():
        # An archive with a constant input (a tensor the module captured, which a trace lifts
        # as `_tensor_constant0`): seed 000's model with its first weight made one.
        source = os.path.join(scratch, "seed_000", "model.pt2")
        if not os.path.isfile(source):
            return "no seed 000 archive to rewrite"
        target = os.path.join(scratch, "constant", "constant.pt2")
        os.makedirs(os.path.dirname(target))

        def edit(document):
            first = next(i for i in document["signature"]["inputs"] if i["kind"] == "parameter")
            first["kind"] = "constant"
        rewrite(source, target, edit)
        archives.append(target)
        return ""
    checks.check("seed 000's model with a weight as a constant input", constant)

    def batch_sized():
        # Attention, transformer layers and reshape(B*T) with a dynamic batch: sizes such as
        # 2*s0 are operator.mul nodes of the program.
        work = os.path.join(scratch, "batch_sized")
        os.makedirs(work)
        run([export_batch_sized], cwd=work)
        names = sorted(n for n in os.listdir(work) if n.endswith(".pt2"))
        if len(names) != 4:
            return f"export_batch_sized wrote {names}"
        archives.extend(os.path.join(work, n) for n in names)
        return ""
    checks.check("export_batch_sized writes four dynamic archives", batch_sized)

    def snapshot():
        # A training step kept at its first bad step (samples/watch_training.cpp, beside TDFX):
        # format version 5, with that step's input and Adam's state before its update.
        work = os.path.join(scratch, "snapshot")
        os.makedirs(work)
        path = os.path.join(work, "bad.pt2")
        sample = os.path.join(os.path.dirname(tdfx), "watch_training")
        process = subprocess.run([sample, "", path], capture_output=True, timeout=300)
        if process.returncode != 1 or not os.path.isfile(path):
            return f"watch_training exited {process.returncode}: {process.stdout[-500:]!r}"
        program = tdfx_fx.read(path)
        state = program.optimizer_state
        if program.document["version"] != 5 or state is None or state["type"] != "Adam":
            return f"version {program.document['version']}, optimizer state {state!r:.200}"
        targets = {i.target: i.name for i in program.inputs if i.kind == "parameter"}
        if sorted(state["state"]) != sorted(targets) or \
                state["groups"][0]["parameters"] != list(targets):
            return f"the state is for {sorted(state['state'])}, the parameters {list(targets)}"
        if state["groups"][0]["options"]["lr"] != 0.001:
            return f"options {state['groups'][0]['options']}"
        for name, kept in state["state"].items():
            weight = program.weights[targets[name]]
            tensors = kept["tensors"]
            # 120 steps taken before step 120's update; Adam's second moment is never negative.
            if kept["step"] != 120 or sorted(tensors) != ["exp_avg", "exp_avg_sq"] or any(
                    t.shape != weight.shape or t.dtype != weight.dtype
                    for t in tensors.values()) or bool((tensors["exp_avg_sq"] < 0).any()):
                return f"{name}: step {kept['step']}, tensors {sorted(tensors)}"
        observation = program.example_inputs.get("observation")
        if observation is None or not bool(observation[7, 2].isinf()):
            return "its example input is not the step's observation, Inf at [7, 2]"
        archives.append(path)
        return ""
    checks.check("watch_training's snapshot: version 5, Adam's state at step 120 and the step's "
                 "observation", snapshot)
    return archives


def contiguous(outputs):
    """Outputs as `tdfx run --save` writes them: each tensor's values, contiguous (a view's
    strides, as attention's transposed output has, are not saved)."""
    return tuple(t.contiguous() for t in outputs)


def user_values(program, values):
    """The user inputs among the oracle's forward arguments (weights, then user inputs)."""
    kinds = [i.kind for i in program.inputs]
    return [v for kind, v in zip(kinds, values) if kind == "user_input"]


def check_archive(checks, tdfx, path):
    label = os.path.basename(path)
    state = {}

    def loads():
        program = state["program"] = tdfx_fx.read(path)
        gm = state["gm"] = tdfx_fx.load(path)
        gm.graph.lint()
        want = [n["name"] for n in program.document["nodes"]]
        got = [n.name for n in gm.graph.nodes]
        if got != want:
            return f"nodes {got}, expected {want}"
        for node in gm.graph.nodes:
            if node.op == "call_function" and not (
                    isinstance(node.target, torch._ops.OpOverload)
                    or node.target in (operator.getitem, operator.add, operator.sub,
                                       operator.mul, operator.floordiv)):
                return f"%{node.name} calls {node.target!r}"
        kinds = {n.name: n.op for n in gm.graph.nodes}
        for spec in program.inputs:
            want_op = "placeholder" if spec.kind == "user_input" else "get_attr"
            if kinds[spec.name] != want_op:
                return f"%{spec.name} ({spec.kind}) is a {kinds[spec.name]}"
        return ""
    if not checks.check(f"{label}: loads into a GraphModule with tdfx's node names", loads):
        return
    program, gm = state["program"], state["gm"]

    def weights():
        # The weights, read again here the way a Python user reads them.
        with zipfile.ZipFile(path) as z:
            records = {w["name"]: z.read(w["record"]) for w in program.document["weights"]}
        params, buffers = dict(gm.named_parameters()), dict(gm.named_buffers())
        for spec in program.inputs:
            if spec.kind == "user_input":
                continue
            where = params if spec.kind == "parameter" else buffers
            other = buffers if spec.kind == "parameter" else params
            if spec.target not in where or spec.target in other:
                return f"{spec.target} is not a {spec.kind} of the module"
            tensor = where[spec.target]
            if tensor.detach().contiguous().numpy().tobytes() != records[spec.name]:
                return f"{spec.target} does not hold the bytes of its record"
        count = sum(1 for i in program.inputs if i.kind != "user_input")
        if len(params) + len(buffers) != count:
            return f"{len(params)} parameters and {len(buffers)} buffers, expected {count}"
        return ""
    checks.check(f"{label}: parameters and buffers sit at the signature's paths, bit for bit",
                 weights)

    def runs():
        values = oracle.forward_arguments(program.document, program.weights)
        state["user"] = user_values(program, values)
        torch.manual_seed(oracle.SEED)
        state["expected"] = oracle.interpret(program.document["nodes"], values)
        torch.manual_seed(oracle.SEED)
        with torch.no_grad():
            got = gm(*state["user"])
        return oracle.difference(got, state["expected"])
    if not checks.check(f"{label}: gm(*user_inputs) is bit-identical to the interpreter of "
                        f"program.json", runs):
        return

    def printed_code():
        lifted = tdfx_fx.load(path, weights_as_inputs=True)
        shown = run([tdfx, "show", "--code", path])
        if lifted.code + "\n" != shown:
            return f"code differs from `tdfx show --code`:\n{lifted.code}\n---\n{shown}"
        torch.manual_seed(oracle.SEED)
        got = lifted(*program.weights.values(), *state["user"])
        return oracle.difference(got, state["expected"])
    checks.check(f"{label}: with weights_as_inputs, code is `tdfx show --code` byte for byte "
                 f"and runs bit-identically", printed_code)

    script = os.path.splitext(path)[0] + ".pt"

    def torchscript():
        if not os.path.exists(script):
            return f"no {os.path.basename(script)}"
        module = torch.jit.load(script)
        ts_params = dict(module.named_parameters())
        for spec in program.inputs:
            if spec.kind == "parameter" and not torch.equal(
                    oracle.raw_bytes(ts_params[spec.name]),
                    oracle.raw_bytes(gm.get_parameter(spec.target))):
                return f"parameter {spec.target} differs from the TorchScript's {spec.name}"
        torch.manual_seed(oracle.SEED)
        with torch.no_grad():
            want = module(*state["user"])
            got = gm(*state["user"])
        return oracle.difference(got, tuple(want) if isinstance(want, list) else want)
    if os.path.exists(script) or label == "model.pt2":
        checks.check(f"{label}: the C++ run (TorchScript {os.path.basename(script)} written by "
                     f"tdfx) agrees bit for bit", torchscript)

    def cpp_run():
        # tdfx's own C++ run: `tdfx run --save` writes its inputs and outputs.
        saved = os.path.join(os.path.dirname(path), os.path.splitext(label)[0] + ".run.pt")
        run([tdfx, "run", path, "--seed", "7", "--save", saved])
        values = torch.load(saved)
        inputs = [values["input:" + name] for name in program.user_inputs]
        # Outputs by key, joined as `--loss` names them; tensors as values (no requires_grad).
        want = tuple(values["output:" + ("_".join(spec.key) if isinstance(spec.key, tuple)
                                         else spec.key)] for spec in program.outputs)
        if any(t.requires_grad for t in values.values()):
            return "a saved tensor requires grad"
        with torch.no_grad():
            got = gm(*inputs)
        return oracle.difference(contiguous(got), want)
    checks.check(f"{label}: the C++ run (`tdfx run --save`) agrees bit for bit", cpp_run)

    def other_batches():
        # At batches the trace never saw: the C++ run of the same inputs (`tdfx run --input`)
        # and the TorchScript module agree with the GraphModule bit for bit.
        metas = {n["name"]: n["meta"] for n in program.document["nodes"]
                 if n["op"] == "placeholder"}
        specs = [spec for spec in program.inputs if spec.kind == "user_input"]
        stem = os.path.splitext(path)[0]
        for batch in (1, 7, 33):
            inputs, arguments = [], []
            torch.manual_seed(batch)
            for spec, value in zip(specs, state["user"]):
                dims = metas[spec.name].get("batch_dims", ())
                shape = [batch if d in dims else s for d, s in enumerate(value.shape)]
                tensor = (torch.randn(shape, dtype=value.dtype) if value.is_floating_point()
                          else torch.randint(0, 10, shape).to(value.dtype))
                file = f"{stem}.batch{batch}.{spec.name}.pt"
                torch.save(tensor, file)
                inputs.append(tensor)
                arguments += ["--input", f"{spec.name}={file}"]
            saved = f"{stem}.batch{batch}.run.pt"
            run([tdfx, "run", path, *arguments, "--save", saved])
            values = torch.load(saved)
            want = tuple(values["output:" + ("_".join(spec.key) if isinstance(spec.key, tuple)
                                             else spec.key)] for spec in program.outputs)
            with torch.no_grad():
                got = gm(*inputs)
            problem = oracle.difference(contiguous(got), want)
            if not problem and os.path.exists(script):
                with torch.no_grad():
                    scripted = torch.jit.load(script)(*inputs)
                problem = oracle.difference(
                    got, tuple(scripted) if isinstance(scripted, list) else scripted)
            if problem:
                return f"batch {batch}: {problem}"
        return ""
    if not program.batch_specialisation:
        checks.check(f"{label}: at batches 1, 7 and 33, the C++ run and TorchScript agree bit "
                     f"for bit", other_batches)

    def wrong_inputs():
        # At another batch, with another dtype, or one input short: tdfx_fx.ShapeError, as
        # C++ gives, before any operator runs.
        user = state["user"]
        first = program.user_inputs[0]
        other_batch = [torch.cat([t, t[:1]]) if t.dim() > 0 else t for t in user]
        cases = [(other_batch, "batch"), ([user[0].double(), *user[1:]], "float64"),
                 (user[:-1], "input(s)")]
        for inputs, said in cases:
            try:
                with torch.no_grad():
                    gm(*inputs)
            except tdfx_fx.ShapeError as error:
                if said not in str(error):
                    return f"ShapeError {error} does not say {said!r}"
                continue
            except Exception as error:  # anything else is the defect this check is for
                return f"{type(error).__name__}, not ShapeError: {error}"
            if said != "batch" or program.batch_specialisation:
                return f"inputs {[tuple(t.shape) for t in inputs]} ran"
        return "" if first else "no user input"
    checks.check(f"{label}: inputs of another batch, dtype or number raise ShapeError",
                 wrong_inputs)

    def fx_tools():
        ShapeProp(gm).propagate(*state["user"])
        for node in gm.graph.nodes:
            meta, tensor = node.meta["tdfx"], node.meta.get("tensor_meta")
            if "shape" in meta and (not hasattr(tensor, "shape")
                                    or tuple(tensor.shape) != meta["shape"]
                                    or tensor.dtype != meta["dtype"]):
                return f"ShapeProp gives %{node.name} {tensor}, program.json {meta}"
        torch.manual_seed(oracle.SEED)
        with torch.no_grad():
            problem = oracle.difference(torch.fx.Interpreter(gm).run(*state["user"]),
                                        state["expected"])
        if problem:
            return f"torch.fx.Interpreter: {problem}"
        table = io.StringIO()
        stdout, sys.stdout = sys.stdout, table
        try:
            gm.graph.print_tabular()  # needs tabulate (scripts/bootstrap.sh installs it)
        finally:
            sys.stdout = stdout
        rows = [line for line in table.getvalue().splitlines()[2:] if line.strip()]
        if len(rows) != len(gm.graph.nodes):
            return f"print_tabular printed {len(rows)} rows for {len(gm.graph.nodes)} nodes"
        return ""
    checks.check(f"{label}: ShapeProp, Interpreter and print_tabular work on it", fx_tools)


# --- refusals ----------------------------------------------------------------------------


def rewrite(source, target, edit=None, records=None, compress=()):
    """A copy of the archive `source` at `target`: program.json passed through
    edit(document) (which may return text instead of a document), records replaced or
    added from `records` ({name: bytes}, None to drop one), those named in `compress`
    deflated."""
    with zipfile.ZipFile(source) as z:
        contents = {name: z.read(name) for name in z.namelist()}
    document = json.loads(contents["program.json"])
    edited = edit(document) if edit else None
    text = edited if isinstance(edited, str) else json.dumps(document)
    contents["program.json"] = text.encode()
    for name, data in (records or {}).items():
        if data is None:
            del contents[name]
        else:
            contents[name] = data
    with zipfile.ZipFile(target, "w") as z:
        for name, data in contents.items():
            z.writestr(name, data, zipfile.ZIP_DEFLATED if name in compress else
                       zipfile.ZIP_STORED)
    return target


def node_named(document, name):
    return next(n for n in document["nodes"] if n["name"] == name)


def renamed(document, old, new):
    """Every "name" and "node" field that says `old` says `new`."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key in ("name", "node") and value == old:
                document[key] = new
            else:
                renamed(value, old, new)
    elif isinstance(document, list):
        for item in document:
            renamed(item, old, new)


def set_field(path, value):
    def edit(document):
        *parents, last = path
        for key in parents:
            document = document[key]
        document[last] = value
    return edit


def edit_node(name, field, value):
    def edit(document):
        node_named(document, name)[field] = value
    return edit


def refusal_cases(work):
    """(label, the archive's path or a call, the message expected) for edited copies of
    the demo's archive."""
    weight = "p_module_0_module_fc1_weight"
    aten_list = ", ".join(("none", "bool", "int", "float", "str", "key", "dtype",
                           "memory_format", "layout", "device", "node", "list", "tuple"))
    cases = [
        ("a format version newer than 5", {"edit": set_field(["version"], 6)},
         "archive format version 6 is not supported; this reader reads versions 2 to 5 (export the "
         "program again with tdfx)"),
        ("format version 1's layout", {"edit": None, "records": {"model/program.json": b"{}"}},
         "this is a tdfx archive of format version 1 (pickled weights), which is not "
         "supported; this reader reads version 5: export the program again with tdfx"),
        ("an unknown node kind", {"edit": edit_node("relu", "op", "call_eval")},
         "node %relu: unknown node kind (op) 'call_eval'; one of 'placeholder', "
         "'call_function', 'call_module', 'output'"),
        ("a get_attr node", {"edit": edit_node("relu", "op", "get_attr")},
         "node %relu: op 'get_attr' cannot appear in a loaded program (it runs aten operators "
         "only)"),
        ("an operator off the allowlist", {"edit": edit_node("relu", "target", "aten::from_file")},
         "node %relu: calls 'aten::from_file', which a loaded program may not run (only pure "
         "tensor operators are allowed; see ALLOWED_OPERATORS)"),
        ("a Python function as target", {"edit": edit_node("relu", "target", "builtins.eval")},
         "node %relu: calls 'builtins.eval', which a loaded program may not run (only pure "
         "tensor operators are allowed; see ALLOWED_OPERATORS)"),
        ("an overload torch does not have", {"edit": edit_node("relu", "target", "aten::relu.x")},
         f"node %relu: 'aten::relu.x' is not an operator of this torch ({torch.__version__})"),
        ("an unknown argument kind",
         {"edit": edit_node("relu", "args", [{"eval": "__import__('os').system('true')"}])},
         f"node %relu: unknown argument kind 'eval'; one of {aten_list}"),
        ("an argument the operator does not take",
         {"edit": edit_node("relu", "kwargs", [["inplace", {"bool": True}]])},
         "node %relu: aten::relu has no argument 'inplace' (arguments: self)"),
        ("a node name that is not an identifier",
         {"edit": lambda d: renamed(d, "mul", "mul; import os")},
         "node 9: name 'mul; import os' is not a legal identifier"),
        ("a node name torch.fx would change", {"edit": lambda d: renamed(d, "mul", "print")},
         "node %print: torch.fx renames the node %print_1 (a builtin's name, or one it numbers "
         "differently)"),
        ("a weight path that shadows nn.Module",
         {"edit": lambda d: d["signature"]["inputs"][0].update(target="forward")},
         f"parameter %{weight}: path 'forward' is taken"),
        ("a weight path with a control character",
         {"edit": lambda d: d["signature"]["inputs"][0].update(target="a\nimport os")},
         "input target 'a\\nimport os' holds a control character"),
        ("a dtype archives do not store",
         {"edit": lambda d: d["weights"][0].update(dtype="float128")},
         f"weight '{weight}': invalid dtype 'float128' (one of 'float32', 'float64', 'float16', "
         f"'bfloat16', 'complex32', 'complex64', 'complex128', 'int64', 'int32', 'int16', "
         f"'int8', 'uint8', 'bool')"),
        ("a weight record of the wrong size", {"records": {"weights/0": bytes(19996)}},
         f"weight '{weight}': a float32 tensor of shape [50, 100] needs 20000 bytes; record "
         f"'weights/0' holds 19996"),
        ("a record the program does not name", {"records": {"weights.pkl": b"\x80\x02"}},
         "record 'weights.pkl' is not part of the program"),
        ("a compressed record", {"compress": ("program.json",)},
         "record 'program.json' is compressed or encrypted; tdfx stores records as they are"),
        ("NaN in program.json",
         {"edit": lambda d: json.dumps(d).replace('"version": 3', '"version": NaN')},
         "program.json holds NaN, which is not JSON"),
        ("program.json nested 100 deep",
         {"edit": lambda d: json.dumps(d)[:-1] + ', "x": ' + "[" * 100 + "]" * 100 + "}"},
         "program.json nests deeper than 64 levels"),
    ]
    out = []
    for i, (label, edits, message) in enumerate(cases):
        path = os.path.join(work, f"edited_{i}.pt2")
        out.append((label, path, edits, f"{path}: {message}"))
    return out


def check_refusals(checks, tdfx, demo, scratch):
    work = os.path.join(scratch, "edited")
    os.makedirs(work)
    for label, path, edits, message in refusal_cases(work):
        def refused(path=path, edits=edits, message=message):
            rewrite(demo, path, edits.get("edit"), edits.get("records"),
                    edits.get("compress", ()))
            try:
                tdfx_fx.load(path)
            except tdfx_fx.ArchiveError as error:
                if str(error) != message:
                    return f"message {str(error)!r}\nexpected {message!r}"
                return ""
            return "loaded"
        checks.check(f"refuses {label}", refused)

    def call_module_body():
        # No archive of the suite has a call_module; tdfx's reader takes one with a body.
        def edit(document):
            relu = node_named(document, "relu")
            body_relu = dict(relu, args=[{"node": "x"}])
            relu.update(op="call_module", target="act.0", body=[
                {"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": [],
                 "meta": {"module_path": "", "module_type": "", "td_module": ""}},
                body_relu,
                {"name": "output", "op": "output", "target": "output", "kwargs": [],
                 "args": [{"node": "relu"}], "meta": relu["meta"]}])
        path = rewrite(demo, os.path.join(work, "call_module.pt2"), edit)
        program, gm = tdfx_fx.read(path), tdfx_fx.load(path)
        if not isinstance(gm.get_submodule("act.0"), torch.fx.GraphModule):
            return "act.0 is not a GraphModule"
        if "getattr(self.act, \"0\")(linear)" not in gm.code:
            return f"code:\n{gm.code}"
        lifted = tdfx_fx.load(path, weights_as_inputs=True).code + "\n"
        if lifted != run([tdfx, "show", "--code", path]):
            return f"code differs from `tdfx show --code`:\n{lifted}"
        values = oracle.forward_arguments(program.document, program.weights)
        with torch.no_grad():
            got = gm(*user_values(program, values))
        return oracle.difference(got, oracle.interpret(program.document["nodes"], values))
    checks.check("a call_module's body becomes a GraphModule at its path, printed as tdfx "
                 "prints it, and runs bit-identically", call_module_body)

    def truncated():
        path = os.path.join(work, "truncated.pt2")
        with open(demo, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[:len(data) // 2])
        try:
            tdfx_fx.load(path)
        except tdfx_fx.ArchiveError as error:
            want = f"{path}: cannot read the archive: "
            return "" if str(error).startswith(want) else f"message {str(error)!r}"
        return "loaded"
    checks.check("refuses a truncated archive", truncated)

    def over_budget():
        try:
            tdfx_fx.load(demo, memory_budget=1000)
        except tdfx_fx.ArchiveError as error:
            want = (f"{demo}: weight 'p_module_0_module_fc1_weight': the weights need more than "
                    f"the memory budget of 1000 bytes")
            return "" if str(error) == want else f"message {str(error)!r}"
        return "loaded"
    checks.check("refuses weights over the memory budget", over_budget)


def check_allowlist(checks):
    def same():
        with open(os.path.join(SOURCE_DIR, "graph", "op_table.cpp")) as f:
            source = f.read()
        table = re.search(r"kRows\[\] = \{(.*?)\n\};", source, re.S)
        if not table:
            return "no kRows table in graph/op_table.cpp"
        # Rows read `{"name", facts, ...},`; the loadable ones are export/op_policy.cpp's allowlist.
        rows = re.findall(r'\{"([^"]+)", ([^,}]+)', table.group(1))
        if not rows:
            return "no rows in graph/op_table.cpp's kRows"
        cpp = {name for name, facts in rows if "kLoadable" in facts.split(" | ")}
        if cpp != tdfx_fx.ALLOWED_OPERATORS:
            return (f"only in C++: {sorted(cpp - tdfx_fx.ALLOWED_OPERATORS)}; only in Python: "
                    f"{sorted(tdfx_fx.ALLOWED_OPERATORS - cpp)}")
        return ""
    checks.check("ALLOWED_OPERATORS is graph/op_table.cpp's loadable rows", same)


def main(argv):
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    tdfx, export_module, export_batch_sized, scratch = (os.path.abspath(a) for a in argv[1:])
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    checks = oracle.Checks()
    archives = write_archives(checks, tdfx, export_module, export_batch_sized, scratch)
    for path in archives:
        check_archive(checks, tdfx, path)
    demo = os.path.join(scratch, "demo", "trace_sequential.pt2")
    if os.path.exists(demo):
        check_refusals(checks, tdfx, demo, scratch)
    check_allowlist(checks)
    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed or not archives else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
