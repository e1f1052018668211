"""Bitwise logic on integer and bool tensors: ``&``, ``|``, ``^``, ``~``, ``<<``, ``>>`` and their
named forms. None is differentiable (their results are integers or bools, as in PyTorch).

On bool tensors and/or/xor/not are the logical operations; on integers they act on the two's
complement bits (``~5 == -6``). Floating tensors have no bits to operate on: PyTorch refuses them,
and so does minidl. A number on either side takes the tensor's dtype.
"""
import numpy as np

from ..autograd import op_function as _op_function
from ..backends import namespace_of
from ..tensor.dtype import DtypeNotImplementedError

_LOGICAL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor",
            "bitwise_not": "logical_not"}


def _check(name, *values):
    Tensor = _op_function.Tensor
    for v in values:
        kind = v.dtype.kind if isinstance(v, Tensor) else ("b" if isinstance(v, bool) else
                                                           "i" if isinstance(v, int) else "f")
        if kind not in "biu":
            dtype = v.dtype if isinstance(v, Tensor) else type(v).__name__
            raise DtypeNotImplementedError(f'"{name}" is not implemented for {dtype}: expected integer or bool '
                                           "tensors (or numbers), as PyTorch")


def _binary(name, a, b):
    """The ufunc on both operands brought to PyTorch's result dtype (``_elementwise_args.result_dtype``:
    an int8 tensor with a 0-d int64 tensor or a number stays int8, a bool tensor with an integer becomes
    int64); a number that dtype cannot hold wraps around into it, as PyTorch casts it."""
    from ._elementwise_args import result_dtype
    Tensor = _op_function.Tensor
    _check(name, a, b)
    dtype = result_dtype(a, b)
    tensor = (a if isinstance(a, Tensor) else b)._data
    xp = namespace_of(tensor)
    ufunc = getattr(xp, _LOGICAL[name] if dtype.kind == "b" and name in _LOGICAL else name)
    ra, rb = (_as(xp, v, dtype) for v in (a, b))
    return Tensor._wrap(ufunc(ra, rb), None, 0)


def _as(xp, v, dtype):
    if isinstance(v, _op_function.Tensor):
        return v._data if v._data.dtype == dtype else v._data.astype(dtype)
    return xp.asarray(np.asarray(v).astype(dtype))


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
    return _op_function.Tensor._wrap(fn(input._data), None, 0)


TABLE = {"bitwise_and": bitwise_and, "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor,
         "bitwise_not": bitwise_not, "bitwise_left_shift": bitwise_left_shift,
         "bitwise_right_shift": bitwise_right_shift}
