"""Parameter: a leaf tensor that a Module registers as learnable."""
import numpy as np

from ..tensor import dtype as dtypes
from ..tensor.tensor import Tensor


class Parameter(Tensor):
    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            array = np.zeros(0, np.float32)
        elif isinstance(data, Tensor):
            array = data._data
        else:
            array = dtypes.native(np.asarray(data))
        p = cls._wrap(array, None, 0)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()
