"""The complex-number functions on real tensors, as PyTorch answers them. minidl has no complex
dtypes (minidl/_unsupported.py), but code written for both kinds calls ``x.real``, ``x.conj()``
or ``x.angle()`` on real tensors too, where each has a real answer: a real number is its own real
part and its own conjugate, has no imaginary part to view, and its angle (argument) is 0 or pi.
"""
import math

from ..autograd import op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from .unary import _floating


def _tensor(op, x):
    if not isinstance(x, op_function.Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    return x


def real(input):
    """The real part of a real tensor: the tensor itself (same memory, same graph), as PyTorch."""
    return _tensor("real", input)


def imag(input):
    """A real tensor has no imaginary part to view: RuntimeError, as PyTorch."""
    _tensor("imag", input)
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def conj(input):
    """The conjugate of a real tensor: the tensor itself (PyTorch's conj is a lazy view that a real
    tensor does not need)."""
    return _tensor("conj", input)


def conj_physical(input):
    """The conjugate written out to new memory: for a real tensor, a copy (differentiable)."""
    return _tensor("conj_physical", input).clone()


class Angle(Function):
    """y = arg(x) for real x: 0 where x >= 0 (also for -0.0), pi where x < 0, NaN where x is NaN.

    y is constant on each side of 0, so dy/dx = 0; PyTorch's backward for a real input returns
    zeros everywhere (also at 0 and at NaN), and so does this one."""

    @staticmethod
    def forward(ctx, x):
        xp = namespace_of(x)
        y = xp.where(x < 0, math.pi, 0.0)
        return xp.where(x != x, x, y).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        return namespace_of(g).zeros_like(g)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * 0


def angle(input):
    """The argument of each element, in radians (a float tensor also for an integer input, as PyTorch)."""
    return Angle.apply(_floating(_tensor("angle", input)))
