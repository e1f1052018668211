"""Containers: Sequential, ModuleList, ModuleDict, with PyTorch's indexing and naming
(children of a Sequential / ModuleList are named "0", "1", ... so state_dict keys match)."""
from collections import OrderedDict

from .module import Module


class _Indexed(Module):
    """Shared integer indexing over the children, in order."""

    def _index(self, idx):
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for {type(self).__name__} of length {n}")
        return idx % n

    def _key(self, idx):
        return list(self._modules.keys())[self._index(idx)]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __setitem__(self, idx, module):
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__} can only hold Modules, got {type(module).__name__}")
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        doomed = keys[idx] if isinstance(idx, slice) else [self._key(idx)]
        for k in doomed:
            del self._modules[k]
            object.__delattr__(self, k)
        self._renumber()

    def _renumber(self):
        mods = list(self._modules.items())
        for k, _ in mods:
            object.__delattr__(self, k)
        self._modules.clear()
        for i, (_, m) in enumerate(mods):
            self.add_module(str(i), m)

    def _check(self, module):
        if not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__} can only hold Modules, got {type(module).__name__}")
        return module

    def append(self, module):
        self.add_module(str(len(self)), self._check(module))
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        n = len(mods)
        if not -n <= index <= n:
            raise IndexError(f"insert index {index} is out of range for {type(self).__name__} of length {n}")
        mods.insert(index % (n + 1) if index < 0 else index, self._check(module))
        for k in list(self._modules.keys()):
            object.__delattr__(self, k)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)
        return self

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class Sequential(_Indexed):
    """Runs its children in order: Sequential(a, b, c)(x) == c(b(a(x))). Also
    Sequential(OrderedDict(name=module, ...)) for named children."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, self._check(m))
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), self._check(m))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise TypeError(f"can only add a Sequential to a Sequential, got {type(other).__name__}")
        return Sequential(*self, *other)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input


class ModuleList(_Indexed):
    """A list of Modules whose parameters the parent registers; has no forward."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def __repr__(self):
        """As PyTorch's: a run of equal consecutive children prints once, as ``(i-j): n x child``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return "ModuleList()"
        runs = []                       # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}").replace("\n", "\n  ")
                 for a, b, r in runs]
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of Modules whose parameters the parent registers; has no forward."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict can only hold Modules, got {type(module).__name__} for key {key!r}")
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]
        object.__delattr__(self, key)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key):
        m = self._modules[key]
        del self[key]
        return m

    def clear(self):
        for k in list(self._modules):
            del self[k]

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m
