"""Bitwise logic on integer and bool tensors: ``&``, ``|``, ``^``, ``~``, ``<<``, ``>>`` and their
named forms. None is differentiable (their results are integers or bools, as in PyTorch).

On bool tensors and/or/xor/not are the logical operations; on integers they act on the two's
complement bits (``~5 == -6``). Floating tensors have no bits to operate on: PyTorch refuses them,
and so does minidl. A number on either side takes the tensor's dtype.
"""
import numpy as np

from ..autograd import function as _function
from ..backends import namespace_of

_LOGICAL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor",
            "bitwise_not": "logical_not"}


def _check(name, *values):
    Tensor = _function.Tensor
    for v in values:
        kind = v.dtype.kind if isinstance(v, Tensor) else ("b" if isinstance(v, bool) else
                                                           "i" if isinstance(v, int) else "f")
        if kind not in "biu":
            dtype = v.dtype if isinstance(v, Tensor) else type(v).__name__
            raise TypeError(f"{name}: expected integer or bool tensors (or numbers), got {dtype}")


def _binary(name, a, b):
    Tensor = _function.Tensor
    _check(name, a, b)
    ra = a._data if isinstance(a, Tensor) else a
    rb = b._data if isinstance(b, Tensor) else b
    tensor = ra if isinstance(a, Tensor) else rb
    both_bool = all((v.dtype.kind == "b") if isinstance(v, Tensor) else isinstance(v, bool) for v in (a, b))
    xp = namespace_of(tensor)
    ufunc = getattr(xp, _LOGICAL[name] if both_bool and name in _LOGICAL else name)
    dtype = tensor.dtype
    if dtype.kind == "b" and not both_bool:       # a bool tensor with an integer number: int64, as PyTorch
        dtype = np.dtype(np.int64)
        ra, rb = (xp.asarray(v).astype(dtype) if hasattr(v, "dtype") else v for v in (ra, rb))
    if not isinstance(a, Tensor):
        ra = xp.asarray(ra, dtype=dtype)
    if not isinstance(b, Tensor):
        rb = xp.asarray(rb, dtype=dtype)
    return Tensor._wrap(ufunc(ra, rb), None, 0)


def bitwise_and(input, other):
    return _binary("bitwise_and", input, other)


def bitwise_or(input, other):
    return _binary("bitwise_or", input, other)


def bitwise_xor(input, other):
    return _binary("bitwise_xor", input, other)


def bitwise_left_shift(input, other):
    """input * 2**other, on the bits."""
    return _binary("left_shift", input, other)


def bitwise_right_shift(input, other):
    """input // 2**other, on the bits (arithmetic: the sign is kept)."""
    return _binary("right_shift", input, other)


def bitwise_not(input):
    _check("bitwise_not", input)
    xp = namespace_of(input._data)
    fn = xp.logical_not if input.dtype.kind == "b" else xp.invert
    return _function.Tensor._wrap(fn(input._data), None, 0)


TABLE = {"bitwise_and": bitwise_and, "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor,
         "bitwise_not": bitwise_not, "bitwise_left_shift": bitwise_left_shift,
         "bitwise_right_shift": bitwise_right_shift}
