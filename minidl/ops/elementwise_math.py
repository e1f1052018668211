"""More elementwise functions: log1p/expm1, log2, erf, nan_to_num, the rounding
family, and maximum/minimum of two tensors. Each backward is dL/dx = g * f'(x)."""
import math

import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import DtypeNotImplementedError
from . import _special_math
from ._broadcast import unbroadcast
from ._quiet import quiet
from ._higher_order import constant, sum_to
from .unary import _floating, _sign


class Log1p(Function):
    """y = ln(1 + x), accurate for small x;  dy/dx = 1 / (1 + x). (-inf at x = -1, nan below,
    without NumPy's warning, as PyTorch.)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with quiet():
            return namespace_of(x).log1p(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with quiet():
            return g / (1 + x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g / (1 + inputs[0])


class Log2(Function):
    """y = log2 x;  dy/dx = 1 / (x ln 2). (NumPy's log2, not ln x / ln 2, so powers of two are exact.)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with quiet():
            return namespace_of(x).log2(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with quiet():
            return g / (x * math.log(2.0))

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g / (inputs[0] * math.log(2.0))


class NanToNum(Function):
    """y = x with NaN, +inf and -inf replaced by the given numbers (posinf/neginf None: the dtype's
    largest/lowest finite value);  dy/dx = 1 where x is finite, 0 where a value was replaced,
    as PyTorch's gradient."""

    @staticmethod
    def forward(ctx, x, nan, posinf, neginf):
        xp = namespace_of(x)
        ctx.save_for_backward(xp.isfinite(x))
        return xp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)

    @staticmethod
    def backward(ctx, g):
        (finite,) = ctx.saved_tensors
        return g * finite, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (finite,) = ctx.saved_tensors
        return g * constant(finite.astype(g.dtype)), None, None, None


class Expm1(Function):
    """y = e**x - 1, accurate for small x;  dy/dx = e**x = y + 1. (Overflow gives inf without
    NumPy's warning, as PyTorch.)"""

    @staticmethod
    def forward(ctx, x):
        with quiet():
            y = namespace_of(x).expm1(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (y + 1)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * inputs[0].exp()


class Erf(Function):
    """y = erf x = 2/sqrt(pi) int_0^x e**(-t**2) dt;  dy/dx = 2/sqrt(pi) e**(-x**2).

    NumPy has no erf; Python's math.erf is applied per element (exact, not fast). A device whose
    namespace has an erf kernel (cuda) uses it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        if type(x) is not np.ndarray:
            return namespace_of(x).erf(x)
        return _special_math.erf(x).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (2 / math.sqrt(math.pi)) * np.exp(-x * x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        return g * (2 / math.sqrt(math.pi)) * (-x * x).exp()


class Piecewise(Function):
    """y = f(x) for a step function f (sign, floor, ceil, round, trunc);  dy/dx = 0 (almost
    everywhere, and taken as 0 at the steps, as PyTorch)."""

    @staticmethod
    def forward(ctx, x, fn):
        return fn(x)

    @staticmethod
    def backward(ctx, g):
        return g * 0, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * 0, None


class Extremum(Function):
    """y = max(a, b) (or min) elementwise, broadcast;  dy/da = 1 where a wins, 0 where b
    wins, 1/2 at a tie (and dy/db likewise), as PyTorch splits the gradient."""

    @staticmethod
    def forward(ctx, a, b, take_max):
        xp = namespace_of(a)
        wins = (a > b) if take_max else (a < b)
        ctx.save_for_backward(wins, a == b)
        ctx.shapes = (np.shape(a), np.shape(b))
        return xp.maximum(a, b) if take_max else xp.minimum(a, b)

    @staticmethod
    def backward(ctx, g):
        wins, tie = ctx.saved_tensors
        share = wins + 0.5 * tie
        ga = g * share.astype(g.dtype)
        gb = g * (1.0 - share).astype(g.dtype)
        return unbroadcast(ga, ctx.shapes[0]), unbroadcast(gb, ctx.shapes[1]), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        wins, tie = ctx.saved_tensors
        share = wins + 0.5 * tie
        na, nb = ctx.needs_input_grad[:2]
        ga = sum_to(g * constant(share.astype(g.dtype)), ctx.shapes[0]) if na else None
        gb = sum_to(g * constant((1.0 - share).astype(g.dtype)), ctx.shapes[1]) if nb else None
        return ga, gb, None


def _unary(cls):
    return lambda x: cls.apply(_floating(x))


log1p, expm1, erf, log2 = (_unary(c) for c in (Log1p, Expm1, Erf, Log2))


def reciprocal(x):
    """1 / x, in floating point for integer x as PyTorch; the gradient -1 / x**2 through div."""
    return 1.0 / _floating(x)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """x with NaN, +inf and -inf replaced (see NanToNum); integer and bool tensors come back as
    copies, having none of them."""
    if x.dtype.kind not in "fV":
        return x.clone()
    return NanToNum.apply(x, float(nan), None if posinf is None else float(posinf),
                          None if neginf is None else float(neginf))


def sign(x):
    """-1, 0 or 1 (0 for NaN, as PyTorch); a bool tensor is its own sign."""
    return x.clone() if x.dtype.kind == "b" else Piecewise.apply(x, _sign)


def _no_bool(op, x):
    if x.dtype.kind == "b":
        raise DtypeNotImplementedError(f'"{op}" is not implemented for bool tensors (as PyTorch)')


def floor(x):
    """Rounded down; an integer tensor comes back unchanged in its dtype, a bool one is refused."""
    _no_bool("floor", x)
    return Piecewise.apply(x, np.floor)


def ceil(x):
    _no_bool("ceil", x)
    return Piecewise.apply(x, np.ceil)


def trunc(x):
    _no_bool("trunc", x)
    return Piecewise.apply(x, np.trunc)


def round(x, decimals=0):   # noqa: A001  (PyTorch's name)
    """Half to even, as PyTorch (and NumPy) round. Integer tensors have nothing to round (they come
    back unchanged), and no decimals to round to: PyTorch refuses ``decimals`` for them."""
    _no_bool("round", x)
    if decimals != 0 and x.dtype.kind in "iu":
        raise DtypeNotImplementedError(f'"round" with decimals is not implemented for {x.dtype} tensors (as '
                                       "PyTorch: floating point only)")
    return Piecewise.apply(x, lambda a: np.round(a, decimals))


def _pair(a, b, op):
    """Both Tensors (PyTorch's maximum/minimum take no numbers), in PyTorch's result dtype."""
    from ._elementwise_args import operands
    Tensor = _op_function.Tensor
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"{op}(): expected two Tensors, got {type(a).__name__} and {type(b).__name__}")
    return operands(op, a, b, floating=False)


def maximum(a, b):
    return Extremum.apply(*_pair(a, b, "maximum"), True)


def minimum(a, b):
    return Extremum.apply(*_pair(a, b, "minimum"), False)
