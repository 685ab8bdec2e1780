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


class MethodCalls(nn.Module):
    """x.flatten(1).view({2, -1}), sub_(1), repeat, to(kDouble), expand, add_ in C++."""

    def forward(self, tensordict):
        x = tensordict["x"]
        v = torch.flatten(x, start_dim=1).view([2, -1])
        v = v.sub_(1)
        d = v.repeat([1, 1]).to(torch.float64)
        return (d.add_(v.expand([2, 12]).to(torch.float64), alpha=2),)


CASES = {
    "sequential_member": SequentialMember,
    "sequential_root": SequentialRoot,
    "nested_containers": NestedContainers,
    "module_list_member": ModuleListMember,
    "module_dict_member": ModuleDictMember,
    "leaf_twice": LeafTwice,
    "residual": Residual,
    "method_calls": MethodCalls,
}


def method_faces():
    """Each aten op name, with 1 when Python has it as a Tensor method that torch.fx records
    with call_method: one that is not a torch function, or an in-place one."""
    import inspect

    names = sorted({s.name.split("::")[1] for s in torch._C._jit_get_all_schemas()
                    if s.name.startswith("aten::") and not s.name.startswith("aten::__")})
    for name in names:
        found = inspect.getattr_static(torch.Tensor, name, None)
        method = found is not None and callable(getattr(torch.Tensor, name)) and \
            type(found).__name__ not in ("property", "getset_descriptor")
        print(name, int(method and (not hasattr(torch, name) or name.endswith("_"))))

if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--method-faces"]:
        method_faces()
        sys.exit(0)
    for name, build in CASES.items():
        module = torch.fx.symbolic_trace(build())
        print(f"=== {name} graph")
        print(str(module.graph))
        print(f"=== {name} code")
        print(module.code)
