"""The Python modules that tests/tracer/test_containers.cpp and test_leaves.cpp build in C++,
traced by torch.fx 1.13; prints str(graph) and the forward code of each, between marker lines.

Each forward takes the TensorDict as tdfx's traced graphs do (`tensordict['x']` records the
same getitem) and returns a tuple, as a TensorDictModule's traced graph does. Where C++ calls a
parameterless layer (ReLU, MaxPool2d, ...) tdfx cannot see the call, only its op, so the Python
twin calls the op the layer records, written as tdfx prints it (tensors positional, the other
arguments that differ from their defaults by keyword)."""
import torch
import torch.fx
from torch import nn


def linear_children(*sizes):
    return [nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]


class SequentialMember(nn.Module):
    def __init__(self):
        super().__init__()
        first, last = linear_children(3, 4, 2)
        self.net = nn.Sequential(first, nn.Identity(), last)  # child 1: a ReLU in C++

    def forward(self, tensordict):
        x = tensordict["x"]
        return (getattr(self.net, "2")(torch.relu(getattr(self.net, "0")(x))),)


class SequentialRoot(nn.Module):
    """make_td_module(Sequential(Linear(3, 4), ReLU(), Linear(4, 2))): the root is the Sequential."""

    def __init__(self):
        super().__init__()
        first, last = linear_children(3, 4, 2)
        self.add_module("0", first)
        self.add_module("2", last)

    def forward(self, tensordict):
        x = tensordict["x"]
        return (getattr(self, "2")(torch.relu(getattr(self, "0")(x))),)


class NestedContainers(nn.Module):
    def __init__(self):
        super().__init__()
        first, last = linear_children(3, 4, 2)
        self.blocks = nn.ModuleList([nn.Sequential(first, nn.Identity()), last])

    def forward(self, tensordict):
        x = tensordict["x"]
        return (self.blocks[1](torch.tanh(self.blocks[0][0](x))),)


class ModuleListMember(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(linear_children(3, 4, 4))

    def forward(self, tensordict):
        x = tensordict["x"]
        for layer in self.layers:
            x = torch.relu(layer(x))
        return (x,)


class ModuleDictMember(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(3, 4)
        self.heads = nn.ModuleDict({"mu": nn.Linear(4, 2), "sigma": nn.Linear(4, 2)})

    def forward(self, tensordict):
        x = tensordict["x"]
        h = torch.relu(self.trunk(x))
        return (self.heads["mu"](h), torch.exp(self.heads["sigma"](h)))


class LeafTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, tensordict):
        x = tensordict["x"]
        return (self.lin(torch.relu(self.lin(x))),)


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.fc2 = nn.Linear(4, 4)

    def forward(self, tensordict):
        x = tensordict["x"]
        return (torch.relu(x + self.fc2(torch.relu(self.fc1(x)))),)


class LoopedLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, tensordict):
        x = tensordict["x"]
        for _ in range(3):
            x = torch.relu(self.bn(self.lin(x)))
        return (x,)


class TiedWeights(nn.Module):
    """A language model's head tied to its embedding: the weight read again is no call."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, tensordict):
        h = torch.tanh(self.emb(tensordict["x"]))
        return (h @ torch.t(self.emb.weight),)


class MethodCalls(nn.Module):
    """x.flatten(1).view({2, -1}), sub_(1), repeat, to(kDouble), expand, add_ in C++."""

    def forward(self, tensordict):
        x = tensordict["x"]
        v = torch.flatten(x, start_dim=1).view([2, -1])
        v = v.sub_(1)
        d = v.repeat([1, 1]).to(torch.float64)
        return (d.add_(v.expand([2, 12]).to(torch.float64), alpha=2),)


class MemoryFormats(nn.Module):
    """x.clone(ChannelsLast), zeros_like(c, layout(kStrided), Contiguous), c + z in C++
    (test_enums.cpp)."""

    def forward(self, tensordict):
        x = tensordict["x"]
        c = torch.clone(x, memory_format=torch.channels_last)
        z = torch.zeros_like(c, layout=torch.strided, memory_format=torch.contiguous_format)
        return (c + z,)


class ContiguousChannelsLast(nn.Module):
    """x.contiguous(ChannelsLast) * 2 in C++ (test_enums.cpp, with method calls)."""

    def forward(self, tensordict):
        x = tensordict["x"]
        return (x.contiguous(memory_format=torch.channels_last) * 2,)


class Holder(nn.Module):
    """A user module with one built-in layer `layer` (or none), whose forward is `call`."""

    def __init__(self, layer, call):
        super().__init__()
        if layer is not None:
            self.layer = layer
        self.call = call

    def forward(self, tensordict):
        return (self.call(self, tensordict["x"]),)


def holder(layer, call=lambda m, x: m.layer(x)):
    return lambda: Holder(layer, call)


# The layers of test_leaves.cpp. Parameterless ones show as the op they record, in tdfx's
# face; `torch._C._nn` is where torch.fx finds F.gelu & co, and so does tdfx.
LAYERS = {
    "linear_3d": holder(nn.Linear(3, 4)),
    "conv1d": holder(nn.Conv1d(3, 4, 3)),
    "conv2d": holder(nn.Conv2d(3, 4, 3, padding=1)),
    "conv2d_reflect": holder(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")),
    "conv_transpose2d": holder(nn.ConvTranspose2d(3, 4, 3)),
    "batch_norm1d": holder(nn.BatchNorm1d(4)),
    "batch_norm2d_eval": holder(nn.BatchNorm2d(3)),
    "layer_norm": holder(nn.LayerNorm(4)),
    "group_norm": holder(nn.GroupNorm(2, 4)),
    "instance_norm2d": holder(nn.InstanceNorm2d(3, affine=True)),
    "embedding": holder(nn.Embedding(10, 3)),
    "prelu": holder(nn.PReLU()),
    "bilinear": holder(nn.Bilinear(4, 4, 2), lambda m, x: m.layer(x, x * 2)),
    "lstm": holder(nn.LSTM(3, 4, batch_first=True), lambda m, x: m.layer(x)[0]),
    "lstm_hidden": holder(nn.LSTM(3, 4, batch_first=True), lambda m, x: torch.squeeze(m.layer(x)[1][0], dim=0)),
    "gru": holder(nn.GRU(3, 4, batch_first=True), lambda m, x: m.layer(x)[0]),
    "gru_cell": holder(nn.GRUCell(3, 4)),
    "lstm_cell": holder(nn.LSTMCell(3, 4), lambda m, x: m.layer(x)[0]),
    "rnn_cell": holder(nn.RNNCell(3, 4)),
    "dropout": holder(None, lambda m, x: torch.dropout(x, p=0.5, train=True)),
    "relu": holder(None, lambda m, x: torch.relu(x)),
    "tanh": holder(None, lambda m, x: torch.tanh(x)),
    "sigmoid": holder(None, lambda m, x: torch.sigmoid(x)),
    "softmax": holder(None, lambda m, x: torch.softmax(x, dim=1)),
    "gelu": holder(None, lambda m, x: torch._C._nn.gelu(x)),
    "elu": holder(None, lambda m, x: torch._C._nn.elu(x, alpha=1.0)),
    "leaky_relu": holder(None, lambda m, x: torch._C._nn.leaky_relu(x)),
    "silu": holder(None, lambda m, x: torch._C._nn.silu(x)),
    "softplus": holder(None, lambda m, x: torch._C._nn.softplus(x, beta=1.0, threshold=20.0)),
    "max_pool2d": holder(None, lambda m, x: torch.max_pool2d(x, kernel_size=[2, 2],
                                                             stride=[2, 2])),
    "avg_pool2d": holder(None, lambda m, x: torch._C._nn.avg_pool2d(x, kernel_size=[2, 2],
                                                                    stride=[2, 2])),
    "adaptive_avg_pool2d": holder(None, lambda m, x: torch._C._nn.adaptive_avg_pool2d(
        x, output_size=[1, 1])),
    "flatten": holder(None, lambda m, x: torch.flatten(x, start_dim=1)),
    "identity": holder(None, lambda m, x: x),
}

CASES = {
    "sequential_member": SequentialMember,
    "sequential_root": SequentialRoot,
    "nested_containers": NestedContainers,
    "module_list_member": ModuleListMember,
    "module_dict_member": ModuleDictMember,
    "leaf_twice": LeafTwice,
    "residual": Residual,
    "tied_weights": TiedWeights,
    "looped_layers": LoopedLayers,
    "method_calls": MethodCalls,
    "memory_formats": MemoryFormats,
    "contiguous_channels_last": ContiguousChannelsLast,
    **LAYERS,
}


def aten_names():
    """Every aten op name torch 1.13 has, sorted."""
    return sorted({s.name.split("::")[1] for s in torch._C._jit_get_all_schemas()
                   if s.name.startswith("aten::") and not s.name.startswith("aten::__")})

def is_tensor_method(name):
    """True when torch.Tensor has `name` as a method (not a property)."""
    import inspect

    found = inspect.getattr_static(torch.Tensor, name, None)
    return found is not None and callable(getattr(torch.Tensor, name)) and \
        type(found).__name__ not in ("property", "getset_descriptor")

def method_faces():
    """Each aten op name, with 1 when Python has it as a Tensor method that torch.fx records
    with call_method: one that is not a torch function, or an in-place one."""
    for name in aten_names():
        print(name, int(is_tensor_method(name) and (not hasattr(torch, name) or name.endswith("_"))))

def nn_functions():
    """Each aten op name, with 1 when Python has it in torch._C._nn and not in torch: torch.fx
    shows torch.nn.functional's calls of it as torch._C._nn.<name>."""
    for name in aten_names():
        print(name, int(hasattr(torch._C._nn, name) and not hasattr(torch, name)))

def aten_only():
    """Each aten op name, with 1 when Python has it neither in torch nor in torch._C._nn nor
    as a Tensor method: only as torch.ops.aten.<name>."""
    for name in aten_names():
        print(name, int(not hasattr(torch, name) and not hasattr(torch._C._nn, name)
                        and not is_tensor_method(name)))

if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--method-faces"]:
        method_faces()
        sys.exit(0)
    if sys.argv[1:] == ["--nn-functions"]:
        nn_functions()
        sys.exit(0)
    if sys.argv[1:] == ["--aten-only"]:
        aten_only()
        sys.exit(0)
    for name, build in CASES.items():
        module = torch.fx.symbolic_trace(build())
        print(f"=== {name} graph")
        print(str(module.graph))
        print(f"=== {name} code")
        print(module.code)
