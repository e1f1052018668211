"""Parameter: a leaf tensor that a Module registers as learnable."""
import numpy as np

from ..tensor import dtype as dtypes
from ..tensor.tensor import Tensor


def _storage(data):
    """The array a Parameter or Buffer wraps: data's own (shared) for a Tensor, an empty float32
    array for None, else data as a native-order array."""
    if data is None:
        return np.zeros(0, np.float32)
    if isinstance(data, Tensor):
        return data._data
    return dtypes.native(np.asarray(data))


class Parameter(Tensor):
    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        p = cls._wrap(_storage(data), None, 0)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        """A Parameter over a copy of the values, with the same requires_grad, as PyTorch's: the
        gradient is not copied (a deep-copied model, say an EMA copy, starts without one)."""
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.detach().clone(), self.requires_grad)
        return memo[id(self)]


class Buffer(Tensor):
    """A tensor that a Module registers as a buffer when assigned as an attribute
    (``self.running_mean = nn.Buffer(torch.zeros(3))``), as ``torch.nn.Buffer``; with
    ``persistent=False`` it is left out of the state_dict. The module keeps a plain Tensor
    sharing its memory (a plain Tensor assigned so would be a mere attribute)."""
    __slots__ = ("persistent",)

    def __new__(cls, data=None, *, persistent=True):
        b = cls._wrap(_storage(data), None, 0)
        if isinstance(data, Tensor):
            b._version_counter = data._version_counter
            if data.requires_grad:
                b.requires_grad_(True)
        b.persistent = persistent
        return b

    def __init__(self, data=None, *, persistent=True):
        pass

    def _as_tensor(self):
        """The plain Tensor a module registers: the same memory, version and requires_grad."""
        t = self.detach()
        if self.requires_grad:
            t.requires_grad_(True)
        return t


def __getattr__(name):
    """``nn.parameter.UninitializedParameter`` / ``UninitializedBuffer`` / ``is_lazy``, as PyTorch
    exports them here (defined in modules/uninitialized.py, which needs this module first)."""
    if name in ("UninitializedParameter", "UninitializedBuffer", "UninitializedTensorMixin", "is_lazy"):
        from .modules import uninitialized
        return getattr(uninitialized, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
