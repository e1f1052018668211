"""Containers: Sequential, ModuleList, ModuleDict, with PyTorch's indexing and naming
(children of a Sequential / ModuleList are named "0", "1", ... so state_dict keys match)."""
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from .module import Module


class _Indexed(Module):
    """Shared integer indexing over the children, in order."""

    def _index(self, idx):
        idx = operator.index(idx)   # as PyTorch: a float index is a TypeError, not a silent int()
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
        setattr(self, self._key(idx), self._check(module))

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        for k in (keys[idx] if isinstance(idx, slice) else [self._key(idx)]):
            del self._modules[k]
        self._renumber(list(self._modules.values()))

    def _renumber(self, modules):
        """Make ``modules`` the children, named "0", "1", ... (as PyTorch does after a delete,
        also in a Sequential built from named modules)."""
        self._modules.clear()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def _check(self, module):
        """A Module, or None (a declared but absent entry, which PyTorch's containers hold too)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(self).__name__} can only hold Modules, got {type(module).__name__}")
        return module

    def append(self, module):
        self.add_module(str(len(self)), self._check(module))
        return self

    def extend(self, modules):
        if not isinstance(modules, Iterable):
            raise TypeError(f"{type(self).__name__}.extend should be called with an iterable, but got "
                            f"{type(modules).__name__}")
        for m in list(modules):   # list(): ``x.extend(x)`` must not grow while it iterates
            self.append(m)
        return self

    def insert(self, index, module):
        """Insert before position ``index``, as ``list.insert`` (a negative index counts from the
        end: -1 inserts before the last child); IndexError outside [-len, len]."""
        if isinstance(self, Sequential) and not isinstance(module, Module):   # PyTorch's check there
            raise AssertionError(f"module should be of type: {Module}")
        self._check(module)
        mods = list(self._modules.values())
        n = len(mods)
        index = operator.index(index)
        if not -n <= index <= n:
            raise IndexError(f"insert index {index} is out of range for {type(self).__name__} of length {n}")
        mods.insert(index, module)
        self._renumber(mods)
        return self

    def pop(self, key):
        """Remove and return the child at ``key`` (an int or a slice); the rest are renumbered."""
        v = self[key]
        del self[key]
        return v


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
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        """``seq += other_seq`` appends other's children to this Sequential (it stays the same object)."""
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        for m in list(other):
            self.append(m)
        return self

    def _repeat_count(self, other):
        if not isinstance(other, int) or isinstance(other, bool):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        return other

    def __mul__(self, other):
        """``seq * n``: a new Sequential of the children repeated n times (the same module
        objects, so the repeats share their parameters, as in PyTorch)."""
        return Sequential(*(list(self) * self._repeat_count(other)))

    def __rmul__(self, other):
        return self.__mul__(other)

    def __imul__(self, other):
        mods = list(self) * self._repeat_count(other)
        for m in mods[len(self):]:
            self.append(m)
        return self

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
            return f"{self._get_name()}()"
        runs = []                       # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}").replace("\n", "\n  ")
                 for a, b, r in runs]
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of Modules whose parameters the parent registers; has no forward."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"ModuleDict can only hold Modules, got {type(module).__name__} for key {key!r}")
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

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
        self._modules.clear()

    def update(self, modules):
        """Add (or replace) entries from a mapping, in its order, or from (key, module) pairs,
        with PyTorch's errors for what is neither."""
        if not isinstance(modules, Iterable):
            raise TypeError(f"ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            f"{type(modules).__name__}")
        if isinstance(modules, (Mapping, ModuleDict)):
            for k, m in modules.items():
                self[k] = m
            return
        for j, pair in enumerate(modules):
            if not isinstance(pair, Iterable):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; is "
                                f"{type(pair).__name__}")
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(pair)}; 2 is required")
            self[pair[0]] = pair[1]
