"""Load a tdfx exported program (`.pt2`) into a real `torch.fx.GraphModule`.

tdfx traces C++ TensorDict pipelines and exports them as `.pt2` archives: a zip of
uncompressed records, `program.json` (the graph, its signature and a table of weights)
and one record of raw little-endian bytes per weight (see export/archive.h). This module
reads such an archive with the standard library and torch only, so that a pipeline traced
in C++ can be inspected and run with Python's FX tools:

    >>> import tdfx_fx
    >>> gm = tdfx_fx.load("model.pt2")          # a torch.fx.GraphModule
    >>> print(gm.code)                          # FX's own code for the graph
    >>> dict(gm.named_parameters())             # the weights, at their module paths
    >>> outputs = gm(x)                         # user inputs only: a tuple of tensors
    >>> from torch.fx.passes.shape_prop import ShapeProp
    >>> ShapeProp(gm).propagate(x)
    >>> gm.graph.print_tabular()

The graph keeps tdfx's node names (`linear`, `linear_1`, `getitem`), calls
`torch.ops.aten.X.overload` (and `operator.getitem`, and `operator.mul`, `add`, `sub` and
`floordiv` on the sizes of a dynamic batch), and each node's `meta["tdfx"]`
holds what program.json says of it (module path and type, TensorDict module, dtype,
shape, batch dimensions). The signature decides what a placeholder becomes:

  - a `parameter` input becomes a `get_attr` node reading an `nn.Parameter` registered
    at its path (`module.0.module.weight`), a `buffer` or `constant` input (a tensor the
    module captured, `module.0.module._tensor_constant0`) a registered buffer; the node
    keeps the placeholder's name;
  - a `user_input` stays a placeholder: `gm(*user_inputs)` in the signature's order.

`load(path, weights_as_inputs=True)` keeps every input a placeholder instead, as
torch.export's graph does; its `code` is what `tdfx show --code` prints, byte for byte,
and it runs as `gm(*program.weights.values(), *user_inputs)`.

Calling the module checks its inputs first, as tdfx's C++ does: a wrong number of inputs,
a dtype or shape other than the traced one (only batch dimensions, `s0`, may differ), or
another batch for a program traced with a static batch raises `ShapeError` (a
`ValueError`) with the message tdfx's C++ gives, not an error from inside an operator.

The file may come from anyone. Nothing in it is evaluated: names become FX nodes only
when they are plain identifiers torch.fx keeps as they are, module paths are dotted
identifiers, operators are resolved by name on `torch.ops.aten` against the same
allowlist of pure tensor operators tdfx's C++ loader uses (export/op_policy.cpp, which
reads it from graph/op_table.cpp), and every size is checked before memory is given to
it. Anything else - an unknown format version, node kind (op), operator, argument kind,
dtype, a malformed signature or weight record - raises `ArchiveError` (a `ValueError`)
naming the file, the node (`%relu`) or weight and what was expected.
"""

import functools
import itertools
import json
import keyword
import math
import operator
import os
import re
import stat
import sys
import zipfile

import torch
import torch.fx

__all__ = ["ArchiveError", "ShapeError", "Program", "read", "load", "graph_module", "FORMAT", "VERSION",
           "ALLOWED_OPERATORS"]

FORMAT = "tdfx.exported_program"
#: The newest format version this module reads, as tdfx's C++ (export/archive_format.h) writes it:
#: version 4 adds `inputs`, example inputs (a training step's snapshot keeps its own); version
#: 5 `optimizer`, an optimizer's state (a snapshot keeps its training loop's).
VERSION = 5
# The oldest format version read: version 3 added the `modules` table (the diagrams' module
# boxes), which this reader checks and keeps as Program.modules.
OLDEST_VERSION = 2
PROGRAM_RECORD = "program.json"
#: The largest program.json accepted, in bytes (tdfx's LoadOptions::max_program_bytes).
MAX_PROGRAM_BYTES = 64 << 20
#: The most memory the weights together, or one constant size, may ask for (bytes).
MEMORY_BUDGET = 4 << 30
# Bounds on nesting, far above anything tdfx writes (as export/archive_format.h).
MAX_JSON_DEPTH = 64
MAX_ARGUMENT_DEPTH = 16
MAX_BODY_DEPTH = 8

#: aten operators a loaded program may call (functional names; in-place variants such as
#: `add_` are allowed when `add` is). The same list as the C++ loader's: the loadable rows
#: of graph/op_table.cpp; tests/python/test_loader.py fails when the two differ.
ALLOWED_OPERATORS = frozenset("""
    _assert_async _convolution _embedding_bag _log_softmax _pad_circular _pad_enum
    _softmax _to_copy _unsafe_view abs absolute acos acosh adaptive_avg_pool1d
    adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d
    adaptive_max_pool3d add addbmm addcdiv addcmul addmm addmv alias all alpha_dropout
    amax amin any arange argmax argmin argsort asin asinh atan atan2 atanh avg_pool1d
    avg_pool2d avg_pool3d baddbmm batch_norm bernoulli bilinear binary_cross_entropy
    binary_cross_entropy_with_logits bitwise_and bitwise_not bitwise_or bitwise_xor bmm
    broadcast_tensors bucketize cat cauchy cdist ceil celu chunk clamp clamp_max
    clamp_min clip clone col2im concat constant_pad_nd contiguous conv1d conv2d conv3d
    conv_transpose1d conv_transpose2d conv_transpose3d convolution copy copysign cos
    cosh cosine_embedding_loss cosine_similarity count_nonzero cross_entropy_loss
    cumprod cumsum deg2rad detach diag diag_embed diagonal dim div divide dot dropout
    einsum elu embedding embedding_bag empty empty_like eq equal erf erfc erfinv exp
    exp2 expand expand_as expm1 exponential eye feature_alpha_dropout feature_dropout
    fill flatten flip float_power floor floor_divide fmax fmin fmod frac full full_like
    gather ge gelu geometric glu group_norm gru gru_cell gt hardshrink hardsigmoid
    hardswish hardtanh heaviside hinge_embedding_loss huber_loss hypot im2col index
    index_add index_fill index_put index_select instance_norm isfinite isinf isnan
    kl_div l1_loss layer_norm le leaky_relu lerp lgamma linalg_vector_norm linear
    linspace log log10 log1p log2 log_normal log_sigmoid log_softmax logaddexp
    logical_and logical_not logical_or logical_xor logit logsumexp lstm lstm_cell lt
    margin_ranking_loss masked_fill masked_select matmul max max_pool1d max_pool2d
    max_pool2d_with_indices max_pool3d max_unpool2d max_unpool3d maximum mean median min
    minimum mish mm movedim mse_loss mul multi_margin_loss multilabel_margin_loss
    multinomial multiply mv nan_to_num narrow native_batch_norm native_dropout
    native_group_norm native_layer_norm ne neg negative new_empty new_full new_ones
    new_zeros nll_loss nll_loss_nd norm normal numel one_hot ones ones_like pad
    pairwise_distance permute pixel_shuffle pixel_unshuffle poisson_nll_loss pow prelu
    prod rad2deg rand rand_like randint randn randn_like random randperm reciprocal
    reflection_pad1d reflection_pad2d relu relu6 remainder repeat repeat_interleave
    replication_pad1d replication_pad2d reshape rnn_relu rnn_relu_cell rnn_tanh
    rnn_tanh_cell roll round rrelu rsqrt rsub scalar_tensor scatter scatter_add select
    selu sigmoid sign silu sin sinh size slice smooth_l1_loss soft_margin_loss softmax
    softplus softshrink sort split split_with_sizes sqrt square squeeze stack std
    std_mean sub subtract sum t tan tanh tanhshrink threshold tile to topk transpose
    tril triplet_margin_loss triu true_divide trunc type_as unbind unflatten unfold
    uniform unsafe_chunk unsqueeze upsample_bilinear2d upsample_nearest1d
    upsample_nearest2d var var_mean view view_as where xlogy zero zeros zeros_like
""".split())

# Creation operators whose single int argument is an element count.
_COUNTED_CREATION = frozenset({"arange", "eye", "linspace", "multinomial", "one_hot", "randperm"})

# The dtypes archives store, by the name torch has them under, with c10's ScalarType code
# (schemas give an enum's default as that int: `MemoryFormat memory_format=0`).
_DTYPES = {
    "float32": (torch.float32, 6), "float64": (torch.float64, 7), "float16": (torch.float16, 5),
    "bfloat16": (torch.bfloat16, 15), "complex32": (torch.complex32, 8),
    "complex64": (torch.complex64, 9), "complex128": (torch.complex128, 10),
    "int64": (torch.int64, 4), "int32": (torch.int32, 3), "int16": (torch.int16, 2),
    "int8": (torch.int8, 1), "uint8": (torch.uint8, 0), "bool": (torch.bool, 11),
}
# In c10's enum order: the index is the code.
_MEMORY_FORMATS = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")
_LAYOUTS = ("strided", "sparse_coo", "sparse_csr", "_mkldnn", "sparse_csc", "sparse_bsr",
            "sparse_bsc")
_INPUT_KINDS = ("parameter", "buffer", "constant", "user_input")
_ARGUMENT_KINDS = ("none", "bool", "int", "float", "str", "key", "dtype", "memory_format",
                   "layout", "device", "node", "list", "tuple")
_INT64 = (-(1 << 63), (1 << 63) - 1)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ArchiveError(ValueError):
    """A file that is not a tdfx archive this module reads, or one it refuses. The message
    names the file, then the node (`%relu`), weight or field, and what was expected."""


class ShapeError(ValueError):
    """Inputs a loaded program cannot run on: their number, a dtype, a shape other than the
    one traced (only batch dimensions, `s0`, may differ), or a batch other than the one a
    program with a static batch was traced at. The message is the one tdfx's C++ gives."""


def _fail(where, message):
    raise ArchiveError(f"{where}: {message}")


def _describe(value):
    """What a JSON value is, for messages: values from the file are never printed whole."""
    if isinstance(value, bool) or value is None:
        return f"a JSON {json.dumps(value)}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return repr(value[:40] + "..." if len(value) > 40 else value)
    return f"a JSON {type(value).__name__}"


_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f]")


def _printable(text, what, where):
    if _CONTROL_CHARACTER.search(text):
        _fail(where, f"{what} {text!r} holds a control character")
    return text


def _is_identifier(text):
    return bool(_IDENTIFIER.match(text)) and not keyword.iskeyword(text)


def _is_module_path(path):
    """`module.0.fc1`: dotted identifiers or indices, which FX prints as `self.module` or
    `getattr(self.module, "0")`."""
    return (bool(_PATH_CHARACTERS.match(path)) and not path.startswith(".")
            and not path.endswith(".") and ".." not in path
            and not _DIGITS_THEN_NAME.search("." + path)
            and not _KEYWORDS.intersection(path.split(".")))


# Checked by the whole path, not part by part: a module table may hold 50 MB of paths. A part
# is an index (digits) or an identifier: one that starts with a digit must be all digits.
_PATH_CHARACTERS = re.compile(r"[A-Za-z0-9_.]+\Z")
_DIGITS_THEN_NAME = re.compile(r"\.[0-9]+[A-Za-z_]")
_KEYWORDS = frozenset(keyword.kwlist)


def dtype_of(name, where="dtype"):
    """torch.float32 for "float32": only the dtypes archives store."""
    if not isinstance(name, str) or name not in _DTYPES:
        _fail(where, f"invalid dtype {_describe(name)} (one of {', '.join(map(repr, _DTYPES))})")
    return _DTYPES[name][0]


def _enum_of(name, names, what, where):
    if not isinstance(name, str) or name not in names:
        _fail(where, f"invalid {what} {_describe(name)} (one of {', '.join(map(repr, names))})")
    return getattr(torch, name)


# --- JSON fields ---------------------------------------------------------------------


def _field(obj, name, where):
    if not isinstance(obj, dict) or name not in obj:
        _fail(where, f"missing field {name!r}")
    return obj[name]


def _text(obj, name, where):
    value = _field(obj, name, where)
    if not isinstance(value, str):
        _fail(where, f"field {name!r} is not a string")
    return value


def _list(obj, name, where):
    value = _field(obj, name, where)
    if not isinstance(value, list):
        _fail(where, f"field {name!r} is not a list")
    return value


def _int(value):
    return isinstance(value, int) and not isinstance(value, bool) and \
        _INT64[0] <= value <= _INT64[1]


def _key(parts, is_tuple, where):
    """A TensorDict key: "x", or ("input", "x") for a nested or tuple key."""
    if not isinstance(parts, list) or not parts:
        _fail(where, "a key must be a non-empty list")
    for part in parts:
        if not isinstance(part, str):
            _fail(where, "a key part is not a string")
        if not part:
            _fail(where, "a key part is empty")
        _printable(part, "key part", where)
    return tuple(parts) if is_tuple or len(parts) > 1 else parts[0]


def _shape(value, where):
    if not isinstance(value, list) or len(value) > 64:
        _fail(where, "a shape must be a list of at most 64 sizes")
    for d in value:
        if not _int(d) or d < 0:
            _fail(where, f"a size is not a non-negative int: {_describe(d)}")
    return tuple(value)


def _json_depth(text):
    """The deepest nesting of brackets in a JSON text, found without recursion before
    the (recursive) parser sees it: strings taken out, then the brackets counted."""
    brackets = _BRACKET.findall(_JSON_STRING.sub("", text))
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def _parse_json(text, where):
    def no_constant(name):
        _fail(where, f"program.json holds {name}, which is not JSON")

    def no_repeats(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            _fail(where, "program.json repeats a field of an object")
        return dict(pairs)

    def int64(literal):
        # 20 digits are past the range whatever they say (JSON has no leading zeros), and
        # int() refuses texts of thousands of digits with a ValueError of its own.
        value = int(literal) if len(literal.lstrip("-")) <= 19 else None
        if value is None or not _INT64[0] <= value <= _INT64[1]:
            shown = literal if len(literal) <= 40 else literal[:40] + "..."
            _fail(where, f"program.json holds the integer {shown}, outside the 64-bit signed "
                         f"range")
        return value

    if _json_depth(text) > MAX_JSON_DEPTH:
        _fail(where, f"program.json nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=no_constant, object_pairs_hook=no_repeats,
                          parse_int=int64)
    except json.JSONDecodeError as error:
        _fail(where, f"program.json is not valid JSON ({error})")


# --- the program -----------------------------------------------------------------------


class _Ref:
    """An argument that reads the node called `name`."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"%{self.name}"


class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


class NodeRecord:
    """One node of program.json, checked: `target` is the callable for call_function
    (a torch.ops.aten OpOverload, operator.getitem or an int operator) and the text otherwise; `args`
    and `kwargs` hold Python values with node references; `meta` what the file says of
    the node's module and tensor; `body` a call_module's nodes."""

    __slots__ = ("name", "op", "target", "args", "kwargs", "meta", "body", "source")

    def __init__(self, name, op, target, args, kwargs, meta, body, source):
        self.name, self.op, self.target = name, op, target
        self.args, self.kwargs, self.meta, self.body = args, kwargs, meta, body
        self.source = source  # the node's JSON, to tell two bodies of one module apart

    def __repr__(self):
        return f"NodeRecord(%{self.name} = {self.op}[target={self.target}])"


class InputSpec:
    """An input of the signature: `kind` ("parameter", "buffer", "constant" or "user_input"), the
    placeholder's `name`, and `target` (the weight's module path, or the user input)."""

    __slots__ = ("kind", "name", "target")

    def __init__(self, kind, name, target):
        self.kind, self.name, self.target = kind, name, target

    def __repr__(self):
        return f"InputSpec({self.kind}, {self.name!r}, {self.target!r})"


class OutputSpec:
    """An output of the signature: the node it returns and the TensorDict key it is."""

    __slots__ = ("name", "key")

    def __init__(self, name, key):
        self.name, self.key = name, key

    def __repr__(self):
        return f"OutputSpec({self.name!r}, {self.key!r})"


class Program:
    """A checked archive: `nodes` (NodeRecord), `inputs` and `outputs` (the signature),
    `weights` ({placeholder name: tensor}, in placeholder order), `batch_specialisation`
    (a dict, or None), `modules` (version 3's table), `example_inputs` ({placeholder name:
    tensor}: version 4's, a snapshot's inputs), `optimizer_state` (version 5's, a snapshot's
    optimizer, or None: {"type": "Adam", "groups": [{"options": {"lr": ...}, "parameters":
    [names]}], "state": {name: {"step": int, "tensors": {"exp_avg": tensor, ...}}}}, each
    parameter by its target, `module.0.module.weight`) and `document`, program.json as parsed."""

    def __init__(self, path, document, nodes, inputs, outputs, weights, batch_specialisation,
                 modules=(), example_inputs=None, optimizer_state=None):
        self.path, self.document, self.nodes = path, document, nodes
        self.inputs, self.outputs, self.weights = inputs, outputs, weights
        self.batch_specialisation = batch_specialisation
        # The `modules` table of a version 3 archive (entries as program.json has them).
        self.modules = list(modules)
        self.example_inputs = dict(example_inputs or {})
        self.optimizer_state = optimizer_state

    @property
    def user_inputs(self):
        """The names of the user inputs, in the order the forward takes them."""
        return [i.name for i in self.inputs if i.kind == "user_input"]

    def __repr__(self):
        return (f"Program({self.path!r}: {len(self.nodes)} nodes, {len(self.weights)} weights, "
                f"inputs {self.user_inputs}, outputs {[o.key for o in self.outputs]})")


# --- aten calls --------------------------------------------------------------------------


def _is_allowed(name):
    if name in ALLOWED_OPERATORS:
        return True
    # In-place variants (`add_`, `relu_`) of allowed operators.
    return len(name) > 1 and name.endswith("_") and name[:-1] in ALLOWED_OPERATORS


def _aten_overload(target, where):
    namespace, _, qualified = target.partition("::")
    name, _, overload = qualified.partition(".")
    if namespace != "aten" or not _is_allowed(name):
        _fail(where, f"calls {target!r}, which a loaded program may not run (only pure tensor "
                     f"operators are allowed; see ALLOWED_OPERATORS)")
    overload = overload or "default"
    if not _IDENTIFIER.match(overload):
        _fail(where, f"{target!r}: overload {overload!r} is not an identifier")
    try:
        op = getattr(getattr(torch.ops.aten, name), overload)
    except (AttributeError, RuntimeError):
        _fail(where, f"{target!r} is not an operator of this torch ({torch.__version__})")
    if not isinstance(op, torch._ops.OpOverload):
        _fail(where, f"{target!r} is not an operator overload")
    return op


def _equals_default(value, default):
    """True when `value` (from the file) is the schema default `default` (as Python's
    schema gives it), with tdfx's rule (graph/schema_arguments.cpp, equals_default): same kind,
    same value; an enum compares by its c10 code; an int equals a float default."""
    if default is None:
        return value is None
    if isinstance(default, bool):
        return isinstance(value, bool) and value == default
    if isinstance(default, int):
        if isinstance(value, torch.dtype):
            return any(d == value and code == default for d, code in _DTYPES.values())
        if isinstance(value, torch.memory_format):
            return str(value) == f"torch.{_MEMORY_FORMATS[default]}" if \
                0 <= default < len(_MEMORY_FORMATS) else False
        if isinstance(value, torch.layout):
            return str(value) == f"torch.{_LAYOUTS[default]}" if \
                0 <= default < len(_LAYOUTS) else False
        return _int(value) and value == default
    if isinstance(default, float):
        return (isinstance(value, float) or _int(value)) and float(value) == default
    if isinstance(default, str):
        return isinstance(value, str) and value == default
    if isinstance(default, list):
        return (isinstance(value, (list, tuple)) and len(value) == len(default)
                and all(_int(v) and isinstance(d, int) and v == d
                        for v, d in zip(value, default)))
    return False


_ENUM_KINDS = {torch.dtype: "ScalarType", torch.memory_format: "MemoryFormat",
               torch.layout: "Layout"}


@functools.lru_cache(maxsize=None)
def _enum_arguments(op):
    """{argument name: ScalarType, MemoryFormat or Layout} for `op`'s enum arguments, which
    Python's schema objects type as int: its printed schema names them."""
    return {name: kind for kind, name in
            re.findall(r"\b(ScalarType|MemoryFormat|Layout)\??\s+(\w+)", str(op._schema))}


def _export_call(op, target, args, kwargs, where):
    """Arguments in schema order (program.json lists keyword-only ones too) as Python
    calls the operator, in export style as `tdfx show --code` prints it: positional ones
    up to the last that differs from its default, then keyword-only ones that differ."""
    formals = op._schema.arguments
    if len(args) > len(formals):
        _fail(where, f"{target} takes {len(formals)} arguments, not {len(args)}")
    full = list(args) + [_MISSING] * (len(formals) - len(args))
    names = [f.name for f in formals]
    for name, value in kwargs.items():
        if name not in names:
            _fail(where, f"{target} has no argument {name!r} (arguments: {', '.join(names)})")
        if full[names.index(name)] is not _MISSING:
            _fail(where, f"argument {name!r} of {target} is given twice")
        full[names.index(name)] = value
    declared = _enum_arguments(op)
    for value, formal in zip(full, formals):
        if value is _MISSING and not formal.has_default_value():
            _fail(where, f"argument {formal.name!r} of {target} is missing")
        # An enum reaches the operator as an int: one of another kind (a layout where a
        # memory format is due) would run as a wrong value, silently.
        kind = _ENUM_KINDS.get(type(value))
        if kind and declared.get(formal.name) != kind:
            _fail(where, f"argument {formal.name!r} of {target} is {value}, where the schema "
                         f"takes {declared.get(formal.name, formal.type)}")

    def is_default(i):
        return full[i] is _MISSING or (formals[i].has_default_value() and
                                       _equals_default(full[i], formals[i].default_value))
    positional = 0
    while positional < len(formals) and not formals[positional].kwarg_only:
        positional += 1
    kept = positional
    while kept > 0 and is_default(kept - 1):
        kept -= 1
    call_args = tuple(formals[i].default_value if full[i] is _MISSING else full[i]
                      for i in range(kept))
    call_kwargs = {formals[i].name: full[i] for i in range(positional, len(formals))
                   if not is_default(i)}
    return call_args, call_kwargs


def _requested_elements(value, counts):
    """How many elements a constant argument asks for: the product of an int list, or an
    int itself for counted creation operators (export/op_policy.cpp's rule)."""
    if counts and _int(value):
        return max(value, 0)
    if not isinstance(value, (list, tuple)) or not all(_int(v) for v in value):
        return 0
    return math.prod(max(v, 0) for v in value)


# --- reading program.json ------------------------------------------------------------


_SIZE_ARITHMETIC = {
    "operator.add": operator.add,
    "operator.sub": operator.sub,
    "operator.mul": operator.mul,
    "operator.floordiv": operator.floordiv,
}


def _schema_type(type_text):
    """A schema type as tdfx's value types spell it (graph/value_type.h)."""
    text = type_text.rstrip("?")
    if text == "Tensor":
        return "Tensor"
    if text in ("int", "SymInt"):
        return "int"
    if text in ("float", "bool", "None"):
        return text
    if text == "Scalar":
        return "number"
    if text.endswith("[]"):
        return f"List[{_schema_type(text[:-2])}]"
    return "Any"


# The list arguments whose items tdfx's plan checks (graph/graph_module.cpp), by their
# schema type as Python spells it, and the item types each holds.
_LIST_ELEMENTS = {"List[int]": "int", "List[SymInt]": "int", "List[Tensor]": "Tensor",
                  "List[Optional[Tensor]]": "Tensor?"}
_LIST_HOLDS = {"int": ("int",), "Tensor": ("Tensor",), "Tensor?": ("Tensor", "None")}


def _value_type(record, types, where):
    """The type of a node's result, as tdfx works it out (graph/value_type.h): refuses a node
    that takes a value as a type it is not, as tdfx refuses it, naming both."""
    def taken(ref):
        return f"takes %{ref.name}, a {types.get(ref.name, 'Any')}"
    if record.op == "placeholder":
        return "Tensor" if "dtype" in record.meta else "Any"  # as tdfx: what its meta records
    if record.op != "call_function":
        return "Any"
    if record.target is operator.getitem:
        source, index = record.args
        if not _int(index):
            return "Tensor"  # a key
        of = types.get(source.name, "Any")
        if not (of == "Any" or of.startswith("List[") or of.startswith("Tuple[")):
            _fail(where, f"{taken(source)}, where operator.getitem takes a list or a tuple")
        if of.startswith("List["):
            return of[len("List["):-1]
        if of.startswith("Tuple["):
            items = _tuple_items(of)
            if not -len(items) <= index < len(items):
                _fail(where, f"takes item {index} of %{source.name}, a {of} of {len(items)} "
                             f"item(s)")
            return items[index]
        return "Any"
    if record.target in _SIZE_ARITHMETIC.values():
        name = next(k for k, v in _SIZE_ARITHMETIC.items() if v is record.target)
        for arg in record.args:
            if isinstance(arg, _Ref) and types.get(arg.name, "Any") not in ("int", "Any"):
                _fail(where, f"{taken(arg)}, where {name} takes ints")
        return "int"
    schema = record.target._schema
    for i, formal in enumerate(schema.arguments):
        value = record.args[i] if i < len(record.args) else record.kwargs.get(formal.name)
        element = _LIST_ELEMENTS.get(str(formal.type))
        if element is None or not isinstance(value, (list, tuple)):
            continue
        for item in value:
            of = types.get(item.name, "Any") if isinstance(item, _Ref) else "Any"
            if of != "Any" and of not in _LIST_HOLDS[element]:
                op = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
                _fail(where, f"a list argument of {op} holds %{item.name}, of type {of}, where "
                             f"the schema takes {element}[]")
    returns = [_schema_type(str(r.type)) for r in schema.returns]
    if len(returns) == 1:
        return returns[0]
    return f"Tuple[{', '.join(returns)}]" if returns else "None"


def _tuple_items(text):
    """The item types of `Tuple[A, B]`, whose items are never tuples themselves."""
    inner, items, depth, start = text[len("Tuple["):-1], [], 0, 0
    for i, c in enumerate(inner):
        depth += c == "["
        depth -= c == "]"
        if c == "," and depth == 0:
            items.append(inner[start:i].strip())
            start = i + 1
    items.append(inner[start:].strip())
    return items


class _GraphReader:
    """Reads a list of nodes (the program's, or a call_module's body), checking each."""

    def __init__(self, where, memory_budget):
        self.where = where
        self.memory_budget = memory_budget

    def read(self, nodes, depth=0):
        if depth > MAX_BODY_DEPTH:
            _fail(self.where, "bodies nested too deeply")
        if not isinstance(nodes, list):
            _fail(self.where, "'nodes' is not a list")
        records, defined, input_names, types = [], set(), set(), {}
        for i, entry in enumerate(nodes):
            name = _text(entry, "name", f"{self.where}: node {i}")
            if not _is_identifier(name):
                _fail(self.where, f"node {i}: name {name!r:.60} is not a legal identifier")
            if name in defined:
                _fail(self.where, f"node name {name!r} is used twice")
            record = self._node(entry, name, defined, depth)
            if record.op == "placeholder":
                # Either would print `def forward(self, x, self)` or `(self, x, x)`.
                if record.target == "self" or record.target in input_names:
                    problem = ("is the module's own name" if record.target == "self"
                               else "repeats another input's")
                    _fail(f"{self.where}: node %{name}",
                          f"placeholder target {record.target!r} {problem}")
                input_names.add(record.target)
            types[name] = _value_type(record, types, f"{self.where}: node %{name}")
            defined.add(name)
            records.append(record)
        outputs = [i for i, r in enumerate(records) if r.op == "output"]
        if outputs != [len(records) - 1]:
            _fail(self.where, "the graph must end with its one output node")
        return records

    def _node(self, entry, name, defined, depth):
        where = f"{self.where}: node %{name}"
        op = _text(entry, "op", where)
        target = _printable(_text(entry, "target", where), "target", where)
        args = [self._argument(v, defined, where, 0) for v in _list(entry, "args", where)]
        kwargs = {}
        for pair in _list(entry, "kwargs", where):
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str):
                _fail(where, "a keyword argument must be [name, value]")
            if not _is_identifier(pair[0]) or pair[0] in kwargs:
                _fail(where, f"keyword argument {pair[0]!r:.60} is not an identifier or repeats")
            kwargs[pair[0]] = self._argument(pair[1], defined, where, 0)
        meta = self._meta(_field(entry, "meta", where), where)
        body = None
        if op == "placeholder":
            if not _is_identifier(target):
                _fail(where, f"placeholder target {target!r:.60} is not an identifier")
            args, kwargs = [], {}  # as tdfx's reader: a placeholder takes no arguments
        elif op == "call_module":
            if not _is_module_path(target):
                _fail(where, f"call_module target {target!r:.60} is not a module path")
            if "body" not in entry:
                _fail(where, "call_module has no body graph to run")
            body = _GraphReader(f"{where} body", self.memory_budget).read(entry["body"],
                                                                           depth + 1)
        elif op == "output":
            if len(args) != 1 or kwargs:
                _fail(where, "output takes one argument")
        elif op == "call_function":
            target, args, kwargs = self._call(target, args, kwargs, where)
        elif op in ("get_attr", "call_method"):
            _fail(where, f"op {op!r} cannot appear in a loaded program (it runs aten "
                         f"operators only)")
        else:
            _fail(where, f"unknown node kind (op) {op!r:.60}; one of 'placeholder', "
                         f"'call_function', 'call_module', 'output'")
        return NodeRecord(name, op, target, args, kwargs, meta, body, entry)

    def _call(self, target, args, kwargs, where):
        if target == "operator.getitem":
            index = args[1] if len(args) == 2 else None
            is_key = isinstance(index, str) or (
                isinstance(index, tuple) and index and all(isinstance(i, str) for i in index))
            if len(args) != 2 or kwargs or not isinstance(args[0], _Ref) or \
                    not (_int(index) or is_key):
                _fail(where, "operator.getitem needs (node, index or key) arguments")
            return operator.getitem, tuple(args), {}
        if target in _SIZE_ARITHMETIC:
            # Python's int arithmetic on sizes (`size * 2`), as torch.fx records it.
            if len(args) != 2 or kwargs or \
                    not all(isinstance(a, _Ref) or _int(a) for a in args):
                _fail(where, f"{target} needs two int arguments")
            if target == "operator.floordiv" and _int(args[1]) and args[1] == 0:
                _fail(where, "operator.floordiv divides by zero")
            return _SIZE_ARITHMETIC[target], tuple(args), {}
        op = _aten_overload(target, where)
        counts = target.partition("::")[2].partition(".")[0] in _COUNTED_CREATION
        for value in [*args, *kwargs.values()]:
            elements = _requested_elements(value, counts)
            if elements > self.memory_budget // 8:  # eight bytes an element: the widest
                _fail(where, f"{target} asks for {elements} elements, over the memory "
                             f"budget of {self.memory_budget} bytes")
        call_args, call_kwargs = _export_call(op, target, args, kwargs, where)
        return op, call_args, call_kwargs

    def _argument(self, value, defined, where, depth):
        if depth > MAX_ARGUMENT_DEPTH:
            _fail(where, "arguments nested too deeply")
        if not isinstance(value, dict) or len(value) != 1 + ("is_tuple" in value):
            _fail(where, f"malformed argument ({_describe(value)})")
        kind = next(k for k in value if k != "is_tuple")
        v = value[kind]
        if kind == "none" and v is None:
            return None
        if kind == "bool" and isinstance(v, bool):
            return v
        if kind == "int" and _int(v):
            return v
        if kind == "float":
            if isinstance(v, float) or _int(v):
                return float(v)
            if v in ("inf", "-inf", "nan"):
                return float(v)
        if kind == "str" and isinstance(v, str):
            return v
        if kind == "key":
            return _key(v, value.get("is_tuple") is True, where)
        if kind == "dtype":
            return dtype_of(v, where)
        if kind == "memory_format":
            return _enum_of(v, _MEMORY_FORMATS, "memory format", where)
        if kind == "layout":
            return _enum_of(v, _LAYOUTS, "layout", where)
        if kind == "device":
            if v != "cpu":
                _fail(where, f"invalid device {_describe(v)} (loaded programs run on 'cpu')")
            return torch.device("cpu")
        if kind == "node" and isinstance(v, str):
            if v not in defined:
                _fail(where, f"reads node {_describe(v)}, which is not defined before it")
            return _Ref(v)
        if kind in ("list", "tuple") and isinstance(v, list):
            items = [self._argument(item, defined, where, depth + 1) for item in v]
            return items if kind == "list" else tuple(items)
        if kind not in _ARGUMENT_KINDS:
            _fail(where, f"unknown argument kind {kind!r:.60}; one of {', '.join(_ARGUMENT_KINDS)}")
        _fail(where, f"malformed {kind} argument ({_describe(v)})")

    @staticmethod
    def _meta(meta, where):
        out = {name: _printable(_text(meta, name, where), name, where)
               for name in ("module_path", "module_type", "td_module")}
        if "dtype" in meta:
            out["dtype"] = dtype_of(meta["dtype"], where)
        if "device" in meta:
            if meta["device"] != "cpu":
                _fail(where, f"invalid device {_describe(meta['device'])}")
            out["device"] = torch.device("cpu")
        if "shape" in meta:
            out["shape"] = _shape(meta["shape"], where)
        if "batch_dims" in meta:
            dims = meta["batch_dims"]
            rank = len(out.get("shape", ()))
            if "shape" not in out or not isinstance(dims, list) or not dims or len(dims) > rank:
                _fail(where, "batch_dims must be a non-empty list of dimensions of the shape")
            for i, d in enumerate(dims):
                if not _int(d) or not 0 <= d < rank or (i and d <= dims[i - 1]):
                    _fail(where, f"batch dimension {_describe(d)} is not a dimension of the "
                                 f"shape in increasing order")
            out["batch_dims"] = tuple(dims)
        if "derived_dims" in meta:
            # [dim, scale, divisor, offset]: dimension dim is (s0 * scale) // divisor + offset.
            dims = meta["derived_dims"]
            rank = len(out.get("shape", ()))
            batch = out.get("batch_dims", ())
            valid = "shape" in out and isinstance(dims, list) and 0 < len(dims) <= rank
            for i, d in enumerate(dims if valid else ()):
                valid = (isinstance(d, list) and len(d) == 4 and all(_int(v) for v in d)
                         and 0 <= d[0] < rank and d[0] not in batch
                         and (i == 0 or d[0] > dims[i - 1][0]) and d[1] >= 1 and d[2] >= 1
                         and (d[2] == 1 or d[1] == 1))
                if not valid:
                    break
            if not valid:
                _fail(where, "derived_dims must be a non-empty list of [dim, scale, divisor, "
                             "offset], dimensions of the shape in increasing order and not "
                             "batch dimensions, scale and divisor at least 1 (a divisor above "
                             "1 only with scale 1)")
            out["derived_dims"] = tuple(tuple(d) for d in dims)
        return out


def _signature(value, nodes, where):
    """The signature's inputs and outputs, which must describe the graph exactly: its
    inputs are the placeholders in order, its outputs the nodes the output node returns."""
    inputs = []
    for entry in _list(value, "inputs", where):
        kind = _text(entry, "kind", where)
        if kind not in _INPUT_KINDS:
            _fail(where, f"unknown input kind {kind!r:.60}; one of {', '.join(_INPUT_KINDS)}")
        target = _printable(_text(entry, "target", where), "input target", where)
        inputs.append(InputSpec(kind, _text(entry, "name", where), target))
    outputs = []
    for entry in _list(value, "outputs", where):
        key = _key(_field(entry, "key", where), entry.get("is_tuple") is True, where)
        outputs.append(OutputSpec(_text(entry, "name", where), key))

    placeholders = [n.name for n in nodes if n.op == "placeholder"]
    if len(placeholders) != len(inputs):
        _fail(where, f"the signature lists {len(inputs)} inputs but the graph has "
                     f"{len(placeholders)} placeholders")
    user_targets, weight_targets = set(), set()
    for i, (spec, placeholder) in enumerate(zip(inputs, placeholders)):
        if spec.name != placeholder:
            _fail(where, f"signature input {i} is {spec.name!r:.60} but the placeholder is "
                         f"{placeholder!r}")
        if spec.kind == "user_input":
            if spec.target in user_targets:
                _fail(where, f"two user inputs are called {spec.target!r}")
            user_targets.add(spec.target)
        else:
            if not _is_module_path(spec.target) or spec.target in weight_targets:
                _fail(where, f"{spec.kind} %{spec.name}: target {spec.target!r:.60} is not a "
                             f"module path, or is given twice")
            weight_targets.add(spec.target)
    result = nodes[-1].args[0]
    if not isinstance(result, tuple) or not result:
        _fail(where, "the output node must return a non-empty tuple of nodes")
    if len(result) != len(outputs):
        _fail(where, f"the signature lists {len(outputs)} outputs but the graph returns "
                     f"{len(result)}")
    for i, (item, spec) in enumerate(zip(result, outputs)):
        if not isinstance(item, _Ref) or item.name != spec.name:
            got = f"%{item.name}" if isinstance(item, _Ref) else "a constant"
            _fail(where, f"output {i} of the signature is {spec.name!r:.60} but the graph "
                         f"returns {got}")
    return inputs, outputs


# What an optimizer's state holds, by LibTorch's type (tdfx's optimizer_kinds()): its options,
# its state tensors, and whether it counts steps.
OPTIMIZER_KINDS = {
    "Adam": (("lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"),
             ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"), True),
    "AdamW": (("lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"),
              ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"), True),
    "SGD": (("lr", "momentum", "dampening", "weight_decay", "nesterov"), ("momentum_buffer",),
            False),
    "RMSprop": (("lr", "alpha", "eps", "weight_decay", "momentum", "centered"),
                ("square_avg", "momentum_buffer", "grad_avg"), True),
    "Adagrad": (("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"), ("sum",),
                True),
}


# Of each type, the options that are flags (0 or 1) and those below 1; every option is a finite
# number of at least 0, as LibTorch's constructors check (tdfx's option_problem).
_OPTIMIZER_FLAGS = {"Adam": {"amsgrad"}, "AdamW": {"amsgrad"}, "SGD": {"nesterov"},
                    "RMSprop": {"centered"}, "Adagrad": set()}
_OPTIMIZER_BELOW_ONE = {"Adam": {"beta1", "beta2"}, "AdamW": {"beta1", "beta2"}}


def _option_problem(kind_name, option, value):
    if not math.isfinite(value) or value < 0:
        return "a finite number of at least 0"
    if option in _OPTIMIZER_FLAGS[kind_name] and value not in (0, 1):
        return "0 or 1"
    if option in _OPTIMIZER_BELOW_ONE.get(kind_name, ()) and not value < 1:
        return "below 1"
    return ""


def _optimizer(value, inputs, read_tensor, where):
    """The `optimizer` section of a version 5 archive, checked as tdfx's C++ checks it: its
    type one of OPTIMIZER_KINDS, each group's options exactly its type's, finite numbers, each
    parameter a parameter input's target in one group only, each state for a grouped
    parameter, its tensors of its type's names, each of its parameter's dtype and shape."""
    here = f"{where}: optimizer state"
    kind_name = _text(value, "type", here)
    if kind_name not in OPTIMIZER_KINDS:
        _fail(here, f"type {kind_name!r:.60} is not one tdfx keeps (Adam, AdamW, SGD, RMSprop, "
                    f"Adagrad)")
    option_names, tensor_names, counts_steps = OPTIMIZER_KINDS[kind_name]
    targets = {i.target: i.name for i in inputs if i.kind == "parameter"}
    groups, grouped = [], set()
    for g, group in enumerate(_list(value, "groups", here)):
        at = f"{here}: group {g}"
        options = _field(group, "options", at)
        if not isinstance(options, dict):
            _fail(at, "options is not an object")
        for option, number in options.items():
            if not isinstance(number, (int, float)) or isinstance(number, bool):
                _fail(at, f"option {option!r:.60} is not a number")
        if sorted(options) != sorted(option_names) or not all(
                math.isfinite(v) for v in options.values()):
            _fail(at, f"{kind_name}'s options are {', '.join(option_names)}, each a finite "
                      f"number")
        for option, number in options.items():
            problem = _option_problem(kind_name, option, number)
            if problem:
                _fail(at, f"option {option} is {number:g}, not {problem}")
        names = _list(group, "parameters", at)
        for name in names:
            if not isinstance(name, str) or name not in targets or name in grouped:
                _fail(at, f"{_describe(name)} is not a parameter input of the program, or is in "
                          f"two groups")
            grouped.add(name)
        groups.append({"options": {k: float(v) for k, v in options.items()},
                       "parameters": list(names)})
    state = {}
    for entry in _list(value, "state", here):
        name = _text(entry, "parameter", f"{here}: state")
        at = f"{here}: parameter {name!r:.60}"
        if name not in targets or name in state:
            _fail(at, "not a parameter of the program, or given twice")
        if name not in grouped:
            _fail(at, "for no parameter of a group")
        step = _field(entry, "step", at)
        if not _int(step) or step < 0 or (not counts_steps and step != 0):
            _fail(at, f"step {_describe(step)} for {kind_name}")
        tensors = {}
        for tensor in _list(entry, "tensors", at):
            tensor_name = _text(tensor, "name", at)
            there = f"{at}: {tensor_name!r:.60}"
            if tensor_name not in tensor_names or tensor_name in tensors:
                _fail(there, f"not a state tensor of {kind_name} ({', '.join(tensor_names)}), "
                             f"or given twice")
            tensors[tensor_name] = read_tensor(tensor, there, "state tensor",
                                               targets[name], False)
        state[name] = {"step": step, "tensors": tensors}
    return {"type": kind_name, "groups": groups, "state": state}


def _weights(entries, nodes, inputs, z, memory_budget, where, example_entries=None,
             optimizer=None):
    """({placeholder name: tensor} for the parameter and buffer inputs, in placeholder order;
    {placeholder name: tensor} for the example inputs of a version 4 archive; the optimizer
    state of a version 5 archive, or None); each tensor read from its record, raw C-contiguous
    little-endian bytes, checked against its placeholder and, with every tensor read before
    it, the memory budget."""
    metas = {n.name: n.meta for n in nodes if n.op == "placeholder"}
    batch_dims = {n.name: set(n.meta.get("batch_dims", [])) for n in nodes
                  if n.op == "placeholder"}
    expected = [i.name for i in inputs if i.kind != "user_input"]
    user = {i.name for i in inputs if i.kind == "user_input"}
    names = set(z.namelist())
    records, total = {PROGRAM_RECORD}, 0

    def read(entry, kind):
        is_input = kind == "input"
        name = _text(entry, "name", f"{where}: {'inputs' if is_input else 'weights'}")
        here = f"{where}: {kind} {name!r:.60}"
        table = examples if is_input else weights
        if name not in (user if is_input else expected) or name in table:
            _fail(here, f"not a {'user' if is_input else 'parameter or buffer'} input of the "
                        f"signature, or given twice")
        table[name] = read_tensor(entry, here, kind, name, is_input)

    def read_tensor(entry, here, kind, placeholder, batch_free):
        """One tensor, of the dtype and shape of `placeholder` (a dimension that follows the
        batch may differ when `batch_free`), from a record of its own."""
        nonlocal total
        record = _text(entry, "record", here)
        if record in records:
            _fail(here, f"record {record!r:.60} is not a {kind} record of its own")
        records.add(record)
        dtype = dtype_of(_field(entry, "dtype", here), here)
        shape = _shape(_field(entry, "shape", here), here)
        meta = metas[placeholder]
        want = meta.get("shape", shape)
        free = batch_dims[placeholder] if batch_free else set()
        if meta.get("dtype", dtype) != dtype or len(want) != len(shape) or any(
                a != b and d not in free for d, (a, b) in enumerate(zip(want, shape))):
            _fail(here, "its dtype or shape differs from its placeholder's")
        size = torch.empty((), dtype=dtype).element_size() * math.prod(shape)
        total += size
        if total > memory_budget:
            _fail(here, f"the weights need more than the memory budget of {memory_budget} bytes")
        if record not in names:
            _fail(here, f"record {record!r:.60} is not in the archive")
        stored = z.getinfo(record).file_size
        if stored != size:
            _fail(here, f"a {entry['dtype']} tensor of shape {list(shape)} needs {size} bytes; "
                        f"record {record!r} holds {stored}")
        data = bytearray(z.read(record))
        if dtype == torch.bool and data.translate(None, b"\x00\x01"):
            _fail(here, "a bool tensor holds bytes other than 0 and 1")
        # torch.frombuffer refuses an empty buffer: a weight with no elements is made empty.
        tensor = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
        return tensor.reshape(shape)

    weights, examples = {}, {}
    for entry in entries:
        read(entry, "weight")
    for name in expected:
        if name not in weights:
            _fail(where, f"input {name} has no weight")
    for entry in example_entries or []:
        read(entry, "input")
    optimizer_state = None if optimizer is None else _optimizer(optimizer, inputs, read_tensor,
                                                                where)
    for name in sorted(names - records):
        _fail(where, f"record {name!r:.60} is not part of the program")
    return {name: weights[name] for name in expected}, examples, optimizer_state


def _batch_specialisation(document, nodes, where):
    if "batch_specialisation" not in document:
        return None
    here = f"{where}: batch_specialisation"
    value = document["batch_specialisation"]
    batch = _field(value, "traced_batch", here)
    if not _int(batch) or batch < 0:
        _fail(here, "traced_batch is not a non-negative int")
    node = _text(value, "node", here)
    if node and node not in {n.name for n in nodes}:
        _fail(here, "names no node of the graph")
    module = _printable(_text(value, "module", here), "module path", here)
    return {"traced_batch": batch, "node": node, "module": module}


def _check_records(z, where):
    names = z.namelist()
    if len(set(names)) != len(names):
        _fail(where, "the archive holds two records of one name")
    for name in names:
        # tdfx before format 2 wrote every record under a folder ("model/program.json").
        if "/" in name and name.endswith("/" + PROGRAM_RECORD):
            _fail(where, f"this is a tdfx archive of format version 1 (pickled weights), which "
                         f"is not supported; this reader reads version {VERSION}: export the "
                         f"program again with tdfx")
    if PROGRAM_RECORD not in names:
        _fail(where, f"not a tdfx archive (no record {PROGRAM_RECORD!r})")
    for info in z.infolist():
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
            _fail(where, f"record {info.filename!r:.60} is compressed or encrypted; tdfx stores "
                         f"records as they are")
        if info.flag_bits & 0x8:
            _fail(where, f"record {info.filename!r:.60} uses a data descriptor")


def _check_end_record(file, where):
    """Refuses, as tdfx's zip reader does, the end-of-directory records of what tdfx never
    writes (split and zip64 files), which Python's zipfile would read."""
    size = file.seek(0, os.SEEK_END)
    tail_size = min(size, 22 + 0xFFFF)
    file.seek(size - tail_size)
    tail = file.read(tail_size)
    for i in range(len(tail) - 22, -1, -1):
        if tail[i:i + 4] == b"PK\x05\x06" and \
                i + 22 + int.from_bytes(tail[i + 20:i + 22], "little") == len(tail):
            break
    else:
        return  # zipfile refuses a file without one
    disk, directory_disk, disk_entries, entries = (
        int.from_bytes(tail[i + k:i + k + 2], "little") for k in (4, 6, 8, 10))
    directory_offset = int.from_bytes(tail[i + 16:i + 20], "little")
    if disk or directory_disk or disk_entries != entries:
        _fail(where, "not a tdfx archive: split (multi-disk) zip files are not supported")
    if entries == 0xFFFF or directory_offset == 0xFFFFFFFF:
        _fail(where, "not a tdfx archive: zip64 files are not supported")
    file.seek(0)


def _read_archive(z, where, max_program_bytes, memory_budget):
    _check_records(z, where)
    size = z.getinfo(PROGRAM_RECORD).file_size
    if size > max_program_bytes:
        _fail(where, f"record 'program.json' declares {size} bytes, over the limit of "
                     f"{max_program_bytes}")
    try:
        text = z.read(PROGRAM_RECORD).decode("utf-8")
    except UnicodeDecodeError:
        _fail(where, "program.json is not UTF-8 text")
    document = _parse_json(text, where)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        _fail(where, "not a tdfx exported program")
    version = _field(document, "version", where)
    if not _int(version) or not OLDEST_VERSION <= version <= VERSION:
        _fail(where, f"archive format version {_describe(version)} is not supported; this "
                     f"reader reads versions {OLDEST_VERSION} to {VERSION} (export the program "
                     f"again with tdfx)")
    nodes = _GraphReader(where, memory_budget).read(_field(document, "nodes", where))
    inputs, outputs = _signature(_field(document, "signature", where), nodes, where)
    examples = None
    if "inputs" in document:
        if version < 4:
            _fail(where, f"an archive of version {version} has no example inputs")
        examples = _list(document, "inputs", where)
    optimizer = None
    if "optimizer" in document:
        if version < 5:
            _fail(where, f"an archive of version {version} has no optimizer state")
        optimizer = document["optimizer"]
    weights, example_inputs, optimizer_state = _weights(
        _list(document, "weights", where), nodes, inputs, z, memory_budget, where, examples,
        optimizer)
    batch = _batch_specialisation(document, nodes, where)
    modules = _modules(document, nodes, where) if version >= 3 else []
    return Program(where, document, nodes, inputs, outputs, weights, batch, modules,
                   example_inputs, optimizer_state)


def _modules(document, nodes, where):
    """The `modules` table (version 3): one entry per TensorDictModule or nested sequential,
    each path given once; every node's td_module one of them."""
    table = _list(document, "modules", where)
    paths = set()
    out = []
    for i, entry in enumerate(table):
        here = f"{where}: modules[{i}]"
        if not isinstance(entry, dict):
            _fail(here, "is not an object")
        path = _printable(_text(entry, "path", here), "module path", here)
        if path and not _is_module_path(path):
            _fail(here, f"path {path!r:.60} is not a module path")
        if path in paths:
            _fail(here, f"module {path!r} is listed twice")
        paths.add(path)
        for name in ("type", "label"):
            _printable(_text(entry, name, here), name, here)
        sequential = _field(entry, "sequential", here)
        if not isinstance(sequential, bool):
            _fail(here, "sequential is not a bool")
        if sequential and not path:
            _fail(here, "the root sequential is the program itself, not a module")
        for name in ("in_keys", "out_keys"):
            for key in _list(entry, name, here):
                is_tuple = _field(key, "is_tuple", here)
                if not isinstance(is_tuple, bool):
                    _fail(here, "is_tuple is not a bool")
                _key(_field(key, "key", here), is_tuple, here)
        for name in ("parameters", "buffers"):
            count = _field(entry, name, here)
            if not _int(count) or count < 0:
                _fail(here, f"{name} is not a non-negative int")
        out.append(entry)
    for node in nodes:
        module = (node.meta or {}).get("td_module", "")
        if module and module not in paths:
            _fail(f"{where}: %{node.name}", f"td_module {module!r} is not in the modules table")
    return out


def _open_regular(path, where):
    """`path` opened for reading in binary, when it is a regular file."""
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as error:
        _fail(where, f"cannot open the file: {error.strerror}")
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device")
        _fail(where, f"is {kind}, not a regular file")
    return os.fdopen(fd, "rb")


def read(path, *, max_program_bytes=MAX_PROGRAM_BYTES, memory_budget=MEMORY_BUDGET):
    """The checked contents of the archive at `path` (a Program): its nodes, signature
    and weights. Every refusal is an ArchiveError, as tdfx refuses the same files: one that
    cannot be opened, or is not a regular file (a FIFO is refused, never waited on), one that
    is not a tdfx archive of this VERSION, or one that fails a check."""
    where = str(path)
    if sys.byteorder != "little":
        _fail(where, "weight records are little-endian; this reader needs a little-endian host")
    with _open_regular(path, where) as file:
        try:
            _check_end_record(file, where)
            with zipfile.ZipFile(file) as z:
                return _read_archive(z, where, max_program_bytes, memory_budget)
        except ArchiveError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, RuntimeError,
                NotImplementedError, ValueError) as error:
            _fail(where, f"cannot read the archive: {error}")


# --- the GraphModule -----------------------------------------------------------------


def _install(root, path, value, where):
    """Puts `value` (a Parameter, a buffer tensor or a module) at the dotted `path` under
    `root`, making plain modules on the way; a path taken, or one that would shadow an
    attribute of nn.Module (`forward`, `training`), is refused."""
    *prefix, last = path.split(".")
    module = root
    for i, part in enumerate(prefix):
        child = module._modules.get(part)
        if child is None:
            if hasattr(module, part):
                _fail(where, f"path {path!r}: {'.'.join(prefix[:i + 1])!r} is taken by "
                             f"something that is not a module")
            child = torch.nn.Module()
            module.add_module(part, child)
        module = child
    if hasattr(module, last):
        _fail(where, f"path {path!r} is taken")
    if isinstance(value, torch.nn.Parameter):
        module.register_parameter(last, value)
    elif isinstance(value, torch.Tensor):
        module.register_buffer(last, value)
    else:
        module.add_module(last, value)


def _build_graph(records, root, inputs, weights_as_inputs, where):
    """A torch.fx.Graph of `records`, whose nodes keep their names; call_module bodies
    become GraphModules installed on `root`."""
    graph = torch.fx.Graph()
    env, bodies = {}, {}

    def value(v):
        if isinstance(v, _Ref):
            return env[v.name]
        if isinstance(v, (list, tuple)):
            return type(v)(value(item) for item in v)
        return v

    for record in records:
        here = f"{where}: node %{record.name}"
        spec = inputs.get(record.name)
        if record.op == "placeholder" and spec and spec.kind != "user_input" and \
                not weights_as_inputs:
            node = graph.create_node("get_attr", spec.target, name=record.name)
        elif record.op == "placeholder":
            node = graph.create_node("placeholder", record.target, name=record.name)
        elif record.op == "call_module":
            source = json.dumps(record.source.get("body"), sort_keys=True)
            if record.target not in bodies:
                # The body's own call_module nodes install their bodies on its root.
                body_root = torch.nn.Module()
                body = torch.fx.GraphModule(body_root, _build_graph(
                    record.body, body_root, {}, True, f"{here} body"))
                _install(root, record.target, body, here)
                bodies[record.target] = source
            elif bodies[record.target] != source:
                _fail(here, f"module {record.target!r} is called with two different bodies")
            node = graph.create_node("call_module", record.target, value(tuple(record.args)),
                                     value(record.kwargs), name=record.name)
        elif record.op == "output":
            node = graph.create_node("output", "output", (value(record.args[0]),),
                                     name=record.name)
        else:
            node = graph.create_node("call_function", record.target, value(tuple(record.args)),
                                     value(record.kwargs), name=record.name)
        if node.name != record.name:
            _fail(here, f"torch.fx renames the node %{node.name} (a builtin's name, or one "
                        f"it numbers differently)")
        node.meta["tdfx"] = dict(record.meta)
        env[record.name] = node
    graph.lint()
    return graph


def _check_input_shape(meta, tensor, name):
    """As tdfx's check_input_shape (tracer/batch_check.cpp), with its messages."""
    if "dtype" in meta and tensor.dtype != meta["dtype"]:
        raise ShapeError(
            f"input {name} is {_dtype_name(tensor.dtype)}; the graph was traced with "
            f"{_dtype_name(meta['dtype'])}, and the dtypes it computes in are constants of the "
            f"graph: convert the input, or trace with this dtype")
    if "shape" not in meta:
        return
    shape, batch_dims = meta["shape"], meta.get("batch_dims", ())
    fits = tensor.dim() == len(shape) and all(
        i in batch_dims or tensor.shape[i] == size for i, size in enumerate(shape))
    if fits:
        return
    got = ", ".join(str(size) for size in tensor.shape)
    expected = ", ".join("s0" if i in batch_dims else str(size) for i, size in enumerate(shape))
    if not batch_dims:
        raise ShapeError(
            f"input {name} has shape [{got}]; the graph was traced with static shapes "
            f"[{expected}]: trace with TraceOptions::dynamic_batch (export_program: "
            f"ExportOptions::dynamic_batch) for a batch size that varies")
    raise ShapeError(
        f"input {name} has shape [{got}]; the graph was traced for [{expected}], and only its "
        f"batch dimensions (s0) may differ: sizes read as integers while tracing are constants "
        f"of the graph")


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _input_check(program, placeholders):
    """A forward pre-hook checking the inputs of a program's GraphModule before it runs, as
    tdfx's ExportedModule does: a ShapeError rather than an error from inside an operator."""
    specialisation = program.batch_specialisation
    names = [node.name for node in placeholders]
    metas = [node.meta["tdfx"] for node in placeholders]
    user = [i for i, node in enumerate(placeholders) if node.op == "placeholder"
            and node.name in set(program.user_inputs)]

    def check(module, args):
        if len(args) != len(names):
            raise ShapeError(f"the exported program takes {len(names)} input(s) "
                             f"({', '.join(names)}); {len(args)} given")
        for i, value in enumerate(args):
            if not isinstance(value, torch.Tensor):
                raise ShapeError(f"input {names[i]} is a {type(value).__name__}, not a tensor")
        users = [args[i] for i in user]
        if specialisation and users and all(t.dim() > 0 for t in users) and \
                len({t.shape[0] for t in users}) == 1:
            batch = users[0].shape[0]
            if batch != specialisation["traced_batch"]:
                node, where = specialisation["node"], specialisation["module"]
                if not node:
                    raise ShapeError(
                        f"traced at batch {specialisation['traced_batch']} with a static batch; "
                        f"this input has batch {batch}: trace with TraceOptions::dynamic_batch "
                        f"(export_program: ExportOptions::dynamic_batch) for a graph that runs at "
                        f"other batch sizes")
                raise ShapeError(
                    f"traced at batch {specialisation['traced_batch']}; this input has batch "
                    f"{batch}, and %{node}{f' (module {where})' if where else ''} was "
                    f"specialised to it")
        batch, batch_input = None, None
        for i, value in enumerate(args):
            _check_input_shape(metas[i], value, names[i])
            for dim in metas[i].get("batch_dims", ()):
                size = value.shape[dim]
                if batch is None:
                    batch, batch_input = size, names[i]
                elif size != batch:
                    raise ShapeError(
                        f"input {names[i]} has batch size (s0) {size} in dimension {dim}, and "
                        f"input {batch_input} has {batch}: the inputs share one batch size")
    return check


def graph_module(program, *, weights_as_inputs=False):
    """A torch.fx.GraphModule running `program` (from read()).

    By default each parameter and buffer input is registered on the module at its path
    (the signature's target: `module.0.module.weight`) and read with a `get_attr` node of
    the placeholder's name; the forward takes the user inputs. With `weights_as_inputs`
    every input stays a placeholder, as in torch.export's graph and `tdfx show --code`."""
    root = torch.nn.Module()
    inputs = {spec.name: spec for spec in program.inputs}
    if not weights_as_inputs:
        for spec in program.inputs:
            if spec.kind == "user_input":
                continue
            tensor = program.weights[spec.name]
            if spec.kind == "parameter":
                trainable = tensor.is_floating_point() or tensor.is_complex()
                tensor = torch.nn.Parameter(tensor, requires_grad=trainable)
            _install(root, spec.target, tensor, f"{program.path}: {spec.kind} %{spec.name}")
    graph = _build_graph(program.nodes, root, inputs, weights_as_inputs, program.path)
    module = torch.fx.GraphModule(root, graph)
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    module.register_forward_pre_hook(_input_check(program, placeholders))
    return module


def load(path, *, weights_as_inputs=False, max_program_bytes=MAX_PROGRAM_BYTES,
         memory_budget=MEMORY_BUDGET):
    """The archive at `path` as a torch.fx.GraphModule: `graph_module(read(path))`.

        gm = load("model.pt2")
        print(gm.code)
        outputs = gm(x)      # a tuple, in the signature's order of outputs
    """
    program = read(path, max_program_bytes=max_program_bytes, memory_budget=memory_budget)
    return graph_module(program, weights_as_inputs=weights_as_inputs)
