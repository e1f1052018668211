"""Elementwise functions of two operands: atan2, hypot, xlogy, copysign, fmax/fmin, logaddexp(2),
ldexp, float_power, heaviside. Operands broadcast and promote as PyTorch's (_elementwise_args.py;
a Python number may stand for either), and each gradient is summed back to its operand's shape
(``unbroadcast``). The gradients at the special points are PyTorch's:

- atan2 at (0, 0): 0 for both (PyTorch drops the infinite 1 / (a**2 + b**2));
- xlogy: dL/dx = 0 where x = 0 and y <= 0; dL/dy = g x / y (NaN at x = y = 0);
- copysign: dL/da = 0 at a = 0, and never a gradient for the sign's source b;
- fmax: the whole gradient to a at a tie and where b is NaN (fmin likewise), not split;
- logaddexp(-inf, -inf) and (inf, inf): NaN gradients (e**(b - a) of inf - inf).
"""
import math

from ..autograd.op_function import Function
from ._broadcast import unbroadcast
from ._elementwise_args import operands, ufunc
from ._higher_order import constant, keep_where, needed, sum_to
from ._quiet import quiet as _quiet


def _shapes(ctx, a, b):
    ctx.shapes = (a.shape, b.shape)


def _grads(ctx, ga, gb):
    """The two gradients, each summed to its operand's shape; None where none is needed."""
    na, nb = ctx.needs_input_grad[:2]
    return (unbroadcast(ga(), ctx.shapes[0]) if na else None), (unbroadcast(gb(), ctx.shapes[1]) if nb else None)


class Atan2(Function):
    """y = atan2(a, b), the angle of the point (b, a) in (-pi, pi];
    dy/da = b / (a**2 + b**2), dy/db = -a / (a**2 + b**2), both 0 at the origin (as PyTorch)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        _shapes(ctx, a, b)
        return ufunc("atan2", "arctan2", a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        with _quiet():
            r = 1 / (a * a + b * b)
            r = ufunc("atan2", "where", r == math.inf, r.dtype.type(0), r)
        return _grads(ctx, lambda: g * b * r, lambda: g * -a * r)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        a, b = inputs
        origin = (a._data == 0) & (b._data == 0)
        r = keep_where(~origin, 1 / (a * a + b * b + constant(origin.astype(a._data.dtype))))
        return needed(ctx, (sum_to(g * b * r, ctx.shapes[0]), sum_to(-g * a * r, ctx.shapes[1])))


class Hypot(Function):
    """y = sqrt(a**2 + b**2) without overflow;  dy/da = a / y, dy/db = b / y (NaN at the origin,
    as PyTorch's)."""

    @staticmethod
    def forward(ctx, a, b):
        y = ufunc("hypot", "hypot", a, b)
        ctx.save_for_backward(a, b, y)
        _shapes(ctx, a, b)
        return y

    @staticmethod
    def backward(ctx, g):
        a, b, y = ctx.saved_tensors
        with _quiet():
            return _grads(ctx, lambda: g * a / y, lambda: g * b / y)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        a, b = inputs
        y = Hypot.apply(a, b)
        return needed(ctx, (sum_to(g * a / y, ctx.shapes[0]), sum_to(g * b / y, ctx.shapes[1])))


def _xlogy(xp_op, x, y):
    """x * ln y, 0 where x = 0 unless y is NaN."""
    with _quiet():
        r = x * ufunc(xp_op, "log", y)
    return ufunc(xp_op, "where", (x == 0) & (y == y), r.dtype.type(0), r)


class Xlogy(Function):
    """z = x ln y, 0 where x = 0 (unless y is NaN);  dz/dx = ln y (0 where x = 0 and y <= 0, as
    PyTorch), dz/dy = x / y."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        _shapes(ctx, x, y)
        return _xlogy("xlogy", x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors

        def gx():
            gl = _xlogy("xlogy", g, y)
            return ufunc("xlogy", "where", (x == 0) & (y <= 0), gl.dtype.type(0), gl)
        with _quiet():
            return _grads(ctx, gx, lambda: g * x / y)


class Copysign(Function):
    """y = |a| with the sign (bit) of b;  dy/da = y / a = +-1, taken as 0 at a = 0 (PyTorch's);
    dy/db = 0."""

    @staticmethod
    def forward(ctx, a, b):
        y = ufunc("copysign", "copysign", a, b)
        ctx.save_for_backward(a, y)
        _shapes(ctx, a, b)
        return y

    @staticmethod
    def backward(ctx, g):
        a, y = ctx.saved_tensors
        with _quiet():
            ratio = ufunc("copysign", "where", a == 0, y.dtype.type(0), y / a)
        return _grads(ctx, lambda: g * ratio, lambda: g * 0)


class FExtremum(Function):
    """y = fmax(a, b) (or fmin): the larger (smaller) of the two, NaN only where both are;
    dy/da = 1 where a is taken (a >= b, a tie, or b NaN), else dy/db = 1: the whole gradient goes
    to the operand taken, a at ties, as PyTorch (maximum splits a tie; fmax does not)."""

    @staticmethod
    def forward(ctx, a, b, take_max):
        take_a = ((a >= b) if take_max else (a <= b)) | (b != b)
        ctx.save_for_backward(take_a)
        _shapes(ctx, a, b)
        return ufunc("fmax" if take_max else "fmin", "where", take_a, a, b)

    @staticmethod
    def backward(ctx, g):
        (take_a,) = ctx.saved_tensors
        return (*_grads(ctx, lambda: g * take_a, lambda: g * ~take_a), None)


class LogAddExp(Function):
    """y = ln(e**a + e**b) = m + ln(1 + e**-|a - b|), m = max(a, b) (base 2: log2(2**a + 2**b));
    y = a where a = b = +-inf. dy/da = 1 / (1 + e**(b - a)), dy/db = 1 / (1 + e**(a - b))
    (base 2: 2** in place of e**)."""

    @staticmethod
    def forward(ctx, a, b, base2):
        op = "logaddexp2" if base2 else "logaddexp"
        with _quiet():
            m = ufunc(op, "maximum", a, b)
            d = -abs(a - b)
            t = ufunc(op, "log1p", ufunc(op, "power", 2.0, d) if base2 else ufunc(op, "exp", d))
            y = m + (t * (1 / math.log(2.0)) if base2 else t)
            y = ufunc(op, "where", (a == b) & ((a == math.inf) | (a == -math.inf)), a, y).astype(m.dtype, copy=False)
        ctx.save_for_backward(a, b)
        ctx.base2 = base2
        _shapes(ctx, a, b)
        return y

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        op = "logaddexp2" if ctx.base2 else "logaddexp"

        def share(u, v):   # 1 / (1 + base**(v - u))
            with _quiet():
                e = ufunc(op, "power", 2.0, v - u) if ctx.base2 else ufunc(op, "exp", v - u)
                return g / (1 + e)
        return (*_grads(ctx, lambda: share(a, b), lambda: share(b, a)), None)


class Ldexp(Function):
    """y = a * 2**b;  dy/da = 2**b, dy/db = y ln 2."""

    @staticmethod
    def forward(ctx, a, b):
        p = ufunc("ldexp", "power", 2.0, b).astype(b.dtype, copy=False)
        ctx.save_for_backward(a, p)
        _shapes(ctx, a, b)
        return a * p

    @staticmethod
    def backward(ctx, g):
        a, p = ctx.saved_tensors
        return _grads(ctx, lambda: g * p, lambda: g * a * p * math.log(2.0))


class Heaviside(Function):
    """y = 0 for x < 0, values for x = 0, 1 for x > 0 (0 for NaN, as PyTorch). Not differentiable:
    PyTorch has no derivative for it, and backward says so."""

    @staticmethod
    def forward(ctx, x, values):
        positive = (x > 0).astype(x.dtype)
        return ufunc("heaviside", "where", x == 0, values, positive).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("the derivative for 'heaviside' is not implemented (PyTorch: derivative for "
                           "aten::heaviside is not implemented)")


def atan2(input, other):
    return Atan2.apply(*operands("atan2", input, other))


def hypot(input, other):
    return Hypot.apply(*operands("hypot", input, other, integers=False))


def xlogy(input, other):
    return Xlogy.apply(*operands("xlogy", input, other))


def copysign(input, other):
    return Copysign.apply(*operands("copysign", input, other))


def fmax(input, other):
    """The larger of the two, ignoring a NaN (NumPy's fmax); integer tensors stay integers."""
    return FExtremum.apply(*operands("fmax", input, other, floating=False), True)


def fmin(input, other):
    """The smaller of the two, ignoring a NaN (NumPy's fmin); integer tensors stay integers."""
    return FExtremum.apply(*operands("fmin", input, other, floating=False), False)


def logaddexp(input, other):
    return LogAddExp.apply(*operands("logaddexp", input, other, integers=False), False)


def logaddexp2(input, other):
    return LogAddExp.apply(*operands("logaddexp2", input, other, integers=False), True)


def ldexp(input, other):
    return Ldexp.apply(*operands("ldexp", input, other))


def float_power(input, exponent):
    """input ** exponent computed in float64 whatever the operands' dtypes (PyTorch's float_power);
    the gradients are pow's, flowing back through the casts."""
    from ..autograd import op_function as _op_function
    from ..tensor import dtype as dtypes
    from . import arithmetic
    from ._elementwise_args import check_operand
    Tensor = _op_function.Tensor
    a, b = check_operand("float_power", "input", input), check_operand("float_power", "exponent", exponent)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError("float_power(): expected at least one of input and exponent to be a Tensor, got two numbers")
    a, b = (v.to(dtypes.float64) if isinstance(v, Tensor) else float(v) for v in (a, b))
    return arithmetic.pow(a, b)


def heaviside(input, values):
    """0 where input < 0, ``values`` where input == 0, 1 where input > 0, in input's dtype."""
    from ..autograd import op_function as _op_function
    Tensor = _op_function.Tensor
    if isinstance(values, Tensor) and isinstance(input, Tensor) and values.dtype != input.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    a, b = operands("heaviside", input, values, floating=False, names=("input", "values"))
    return Heaviside.apply(a, b)
