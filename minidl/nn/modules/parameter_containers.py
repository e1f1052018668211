"""ParameterList and ParameterDict: parameters held in a list or a dict, registered with the
module that owns the container (so ``parameters()``, ``state_dict()`` and optimizers see
them), named "0", "1", ... or by key, as PyTorch names them."""
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from ...tensor.tensor import Tensor
from ..parameter import Parameter
from .module import Module


def _as_parameter(value, where):
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):   # PyTorch wraps a plain tensor, which then requires grad
        return Parameter(value)
    raise TypeError(f"{where} can only hold Parameters or Tensors, got {type(value).__name__}")


def _describe(p, dtype_name):
    """PyTorch's line for one entry: ``Parameter containing: [<dtype> of size 2x3]``, the
    device added when it is not the CPU (a 0-d one has an empty size, as there)."""
    size = "x".join(str(n) for n in p.shape)
    device = f" ({p.device})" if p.device.type != "cpu" else ""
    return f"Parameter containing: [{dtype_name(p)} of size {size}{device}]"


class ParameterList(Module):
    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.extend(values)

    def _index(self, idx):
        n = len(self)
        idx = operator.index(idx)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for ParameterList of length {n}")
        return idx % n

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self._parameters.values())[idx])
        return self._parameters[str(self._index(idx))]

    def __setitem__(self, idx, value):
        setattr(self, str(self._index(idx)), _as_parameter(value, "ParameterList"))

    def append(self, value):
        setattr(self, str(len(self)), _as_parameter(value, "ParameterList"))
        return self

    def extend(self, values):
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got "
                            f"{type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values):
        return self.extend(values)

    def extra_repr(self):
        return "\n".join(f"  ({k}): {_describe(p, lambda t: t.dtype)}" for k, p in self._parameters.items())

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._parameters:
            raise KeyError(key)
        return self._parameters[key]

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"Index given to ParameterDict cannot be used as a key as it is not a string "
                            f"(type is '{type(key).__name__}')")
        setattr(self, key, _as_parameter(value, "ParameterDict"))

    def __delitem__(self, key):
        delattr(self, key)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key):
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def items(self):
        return self._parameters.items()

    def values(self):
        return self._parameters.values()

    def __reversed__(self):
        return reversed(list(self._parameters))

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key):
        p = self[key]
        del self[key]
        return p

    def popitem(self):
        """Remove and return the last (key, parameter) pair, as dict.popitem."""
        if not self._parameters:
            raise KeyError("popitem(): ParameterDict is empty")
        key = next(reversed(self._parameters))
        return key, self.pop(key)

    def copy(self):
        """A new ParameterDict holding the same Parameters (not copies), in the same order."""
        return ParameterDict(OrderedDict(self._parameters))

    def fromkeys(self, keys, default=None):
        return ParameterDict([(k, default) for k in keys])

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = other.copy() if isinstance(other, ParameterDict) else ParameterDict(other)
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self

    def clear(self):
        for k in list(self._parameters):
            del self[k]

    def update(self, parameters):
        if not isinstance(parameters, Iterable) and not isinstance(parameters, Mapping):
            raise TypeError(f"ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            f"{type(parameters).__name__}")
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = list(parameters.items())
        elif isinstance(parameters, Mapping):
            items = sorted(parameters.items())   # PyTorch orders a plain mapping by key
        else:
            items = []                           # (key, value) pairs, in order
            for j, pair in enumerate(parameters):
                if not isinstance(pair, Iterable):
                    raise TypeError(f"ParameterDict update sequence element #{j} should be Iterable; is "
                                    f"{type(pair).__name__}")
                pair = tuple(pair)
                if len(pair) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length {len(pair)}; "
                                     "2 is required")
                items.append(pair)
        for k, v in items:
            self[k] = v

    def extra_repr(self):
        """As PyTorch's, which names the type here (``FloatTensor``) but the dtype in a ParameterList."""
        return "\n".join(f"  ({k}): {_describe(p, lambda t: t.type())}" for k, p in self._parameters.items())

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called.")
