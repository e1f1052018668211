"""Elementwise functions about a number's parts and sign: frexp (mantissa and exponent), frac,
fix, sgn, positive, negative, absolute, and the tests signbit, isposinf, isneginf, isreal.

The differentiable ones compose ops that have their backward already (frac = x - trunc x has
gradient 1, fix = trunc and sgn = sign have gradient 0, negative = -x, absolute = |x| with 0 at
0, as PyTorch); frexp is its own Function. The tests return bool tensors and no gradient.
"""
import math
from collections import namedtuple

import numpy as np

from .. import backends
from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from . import elementwise_math as _em
from ._elementwise_args import ufunc

frexp_result = namedtuple("frexp", ("mantissa", "exponent"))


class Frexp(Function):
    """x = mantissa * 2**exponent, |mantissa| in [0.5, 1) (0 for 0; NumPy's frexp);
    dmantissa/dx = 2**-exponent (the exponent is a step function, an int32 tensor)."""

    @staticmethod
    def forward(ctx, x):
        mantissa, exponent = ufunc("frexp", "frexp", x)
        ctx.save_for_backward(exponent)
        return mantissa, exponent.astype(np.int32, copy=False)

    @staticmethod
    def backward(ctx, g_mantissa, g_exponent):
        (exponent,) = ctx.saved_tensors
        return ufunc("frexp", "ldexp", g_mantissa, -exponent)


def _is_bool(t):
    return t.dtype.kind == "b"


def _trunc(x, op):
    """trunc(x), gradient 0 (elementwise_math's Piecewise, in x's array namespace)."""
    return _em.Piecewise.apply(x, lambda a: ufunc(op, "trunc", a))


def frexp(input):
    """(mantissa, exponent) with input = mantissa * 2**exponent, as PyTorch's named tuple."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"frexp() only supports floating-point dtypes, got {input.dtype}")
    return frexp_result(*Frexp.apply(input))


def frac(input):
    """x - trunc(x), the fractional part with x's sign; the gradient is 1."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f'"frac" is not implemented for {input.dtype} tensors (as PyTorch: floating '
                                  "point only)")
    return input - _trunc(input, "frac")


def fix(input):
    """trunc(x): rounded toward 0 (gradient 0)."""
    if _is_bool(input):
        raise NotImplementedError("fix (trunc) is not implemented for bool tensors")
    return _trunc(input, "fix") if input.dtype.is_floating_point else input.clone()


def sgn(input):
    """sign(x) for real tensors (PyTorch's sgn is x / |x| for complex ones); gradient 0."""
    return _em.sign(input)


def positive(input):
    """The input itself, as PyTorch returns it."""
    if _is_bool(input):
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def negative(input):
    """-x (neg)."""
    if _is_bool(input):
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                           "invert a mask, use the `~` or `logical_not()` operator instead.")
    return input.neg()


def absolute(input):
    """|x| (abs)."""
    if _is_bool(input):
        raise NotImplementedError("absolute (abs) is not implemented for bool tensors")
    return input.abs()


def _bool_tensor(array):
    if isinstance(array, np.generic):   # NumPy answers a 0-d array with a scalar
        array = np.asarray(array)
    return _op_function.Tensor._wrap(array, None, 0)


def signbit(input):
    """Whether the sign bit is set: True for negative numbers, -0.0 and a negative NaN."""
    return _bool_tensor(ufunc("signbit", "signbit", input._data))


def isposinf(input):
    return _bool_tensor(input._data == math.inf)


def isneginf(input):
    return _bool_tensor(input._data == -math.inf)


def isreal(input):
    """All True: minidl's tensors are real."""
    data = input._data
    return _bool_tensor(backends.namespace_of(data).ones(data.shape, dtype=np.bool_))
