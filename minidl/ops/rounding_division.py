"""Division that rounds the quotient, and the remainders that go with it: ``//``, ``%``,
``floor_divide``, ``remainder``, ``fmod`` and ``div(a, b, rounding_mode="trunc"|"floor")``.

PyTorch's semantics, which for the remainder are Python's rather than C's:

- ``remainder(a, b) = a - b * floor(a / b)`` has the sign of the divisor (``%``);
- ``fmod(a, b) = a - b * trunc(a / b)`` has the sign of the dividend;
- integers stay integers (``int // int`` is an int tensor) and dividing an integer by zero
  raises ``RuntimeError: ZeroDivisionError``, where floats give inf or NaN;
- a bool tensor divided by a bool tensor is not implemented (there is no bool quotient).

Dtypes follow the other arithmetic ops (``arithmetic._binary``): an int tensor with a float
operand is computed in that float, float32 for a Python float. A float division by zero is a
value (inf or NaN), not a warning, as in PyTorch.
"""

from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import shape_of, unbroadcast
from ._quiet import quiet as _quiet
from .arithmetic import _binary, _kind, div as true_div


def _integer_divisor_check(a, b):
    """PyTorch raises for an integer division by zero (C would trap; NumPy warns and gives 0)."""
    if _kind(a) in "iub" and _kind(b) in "iub" and bool((b == 0).any() if hasattr(b, "shape") else b == 0):
        raise RuntimeError("ZeroDivisionError")


def _floor_quotient(a, b):
    """floor(a / b), exactly: for floats NumPy computes it as CPython and PyTorch do (from fmod,
    so 7.5 // 2.5 is 3, not the 2.9999... a plain floor(a / b) may give)."""
    return namespace_of(a if hasattr(a, "shape") else b).floor_divide(a, b)


def _trunc_quotient(a, b):
    """trunc(a / b): the integer quotient rounded toward zero (PyTorch's ``rounding_mode="trunc"``)."""
    xp = namespace_of(a if hasattr(a, "shape") else b)
    if _kind(a) in "iub" and _kind(b) in "iub":
        q = xp.floor_divide(a, b)     # one less than trunc where the signs differ and b does not divide a
        return q + ((xp.remainder(a, b) != 0) & ((a < 0) != (b < 0)))
    return xp.trunc(a / b)


class FloorDivide(Function):
    """out = floor(a / b). Not differentiable, as in PyTorch, whose ``floor_divide`` has no
    derivative: the result records a node (so requires_grad propagates) whose backward raises."""

    @staticmethod
    def forward(ctx, a, b):
        _integer_divisor_check(a, b)
        with _quiet():
            return _floor_quotient(a, b)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for floor_divide is not implemented (PyTorch defines none); use "
                           "div(a, b, rounding_mode='floor'), whose gradient is zero, or detach() the operands")


class RoundedDiv(Function):
    """out = trunc(a / b) or floor(a / b) (``div``'s rounding modes);  dL/da = dL/db = 0. The
    result is a step function of a and b, and PyTorch defines its gradient as zero everywhere."""

    @staticmethod
    def forward(ctx, a, b, mode):
        _integer_divisor_check(a, b)
        ctx.shapes = shape_of(a), shape_of(b)
        with _quiet():
            return _trunc_quotient(a, b) if mode == "trunc" else _floor_quotient(a, b)

    @staticmethod
    def backward(ctx, g):
        xp = namespace_of(g)
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad[:2]
        return (xp.zeros(sa, g.dtype) if na else None), (xp.zeros(sb, g.dtype) if nb else None), None


class _Modulo(Function):
    """out = a - b * q(a, b), q the rounded quotient;  dL/da = g,  dL/db = -g * q(a, b) (q is
    piecewise constant, so it contributes nothing; PyTorch's derivative). a and b are saved
    only for dL/db."""

    @staticmethod
    def quotient(a, b):
        raise NotImplementedError

    @staticmethod
    def modulo(a, b):
        raise NotImplementedError

    @classmethod
    def forward(cls, ctx, a, b):
        _integer_divisor_check(a, b)
        ctx.shapes = shape_of(a), shape_of(b)
        ctx.save_for_backward(*((a, b) if ctx.needs_input_grad[1] else (None, None)))
        with _quiet():
            return cls.modulo(a, b)

    @classmethod
    def backward(cls, ctx, g):
        a, b = ctx.saved_tensors
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        ga = unbroadcast(g, sa) if na else None
        with _quiet():
            gb = unbroadcast(-g * cls.quotient(a, b), sb) if nb else None
        return ga, gb


class Remainder(_Modulo):
    """remainder(a, b) = a - b * floor(a / b): the sign of b, as Python's ``%``."""

    quotient = staticmethod(_floor_quotient)

    @staticmethod
    def modulo(a, b):
        return namespace_of(a if hasattr(a, "shape") else b).remainder(a, b)


class Fmod(_Modulo):
    """fmod(a, b) = a - b * trunc(a / b): the sign of a, as C's ``fmod``."""

    quotient = staticmethod(_trunc_quotient)

    @staticmethod
    def modulo(a, b):
        return namespace_of(a if hasattr(a, "shape") else b).fmod(a, b)


def _no_bool_pair(op, a, b):
    if _kind(a) == "b" and _kind(b) == "b":
        raise NotImplementedError(f"{op}: not implemented for two bool operands")


def floor_divide(input, other):
    _no_bool_pair("floor_divide", input, other)
    return _binary(FloorDivide, input, other)


def remainder(input, other):
    _no_bool_pair("remainder", input, other)
    return _binary(Remainder, input, other)


def fmod(input, other):
    _no_bool_pair("fmod", input, other)
    return _binary(Fmod, input, other)


def div(input, other, *, rounding_mode=None):
    """``input / other`` (true division; integers give the default float dtype), or the quotient
    rounded toward zero (``"trunc"``) or down (``"floor"``) in the operands' own dtype."""
    if rounding_mode is None:
        return true_div(input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                           f"{rounding_mode!r}")
    _no_bool_pair("div", input, other)
    return _binary(RoundedDiv, input, other, rounding_mode)
