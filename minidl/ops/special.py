"""Special functions: erfinv, erfc, lgamma, digamma, i0, logit, exp2. The series behind erfinv,
digamma (and its derivative trigamma) and I1 are in _special_math.py with their derivations.
On the CPU erfinv, erfc, lgamma, digamma and i0 are computed per element on the host in float64
and rounded once to the input's dtype; on a device that has them (cuda: the device functions of
minidl/kernels/cuda/special.py, the same methods per element) the device computes them, and their
backward passes (digamma, trigamma, I1) run there too. Integer and bool inputs compute in the
default float dtype, as PyTorch's.
"""
import math

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from . import _special_math as sm
from ._elementwise_args import floating, host_only, ufunc
from ._higher_order import constant, keep_where


def _host(fn, x, *more):
    """fn on float64 copies of the arrays, rounded once to x's dtype (the host-computed special
    functions here, in special_functions*.py and their backward passes)."""
    with np.errstate(all="ignore"):
        return np.asarray(fn(np.asarray(x, np.float64), *(np.asarray(m, np.float64) for m in more))).astype(
            x.dtype, copy=False)


def special(name, host_fn, x, *more):
    """``name`` elementwise in x's dtype: on CPU arrays ``host_fn`` on float64 copies (``_host``), on a
    device its namespace's function of that name (NotImplementedError naming it where it has none)."""
    if namespace_of(x) is np:
        return _host(host_fn, x, *more)
    return ufunc(name, name, x, *more)


def derivative(name, host_fn, x, *more):
    """A backward pass's factor: float64 on the CPU (multiplied into the gradient before its one
    rounding), the device function in x's dtype elsewhere."""
    if namespace_of(x) is np:
        with np.errstate(all="ignore"):
            return host_fn(np.asarray(x, np.float64), *(np.asarray(m, np.float64) for m in more))
    return ufunc(name, name, x, *more)


class Erfinv(Function):
    """y = erfinv x, the inverse of erf on (-1, 1) (+-inf at +-1, NaN beyond);
    dy/dx = 1 / erf'(y) = sqrt(pi) / 2 * e**(y**2)."""

    @staticmethod
    def forward(ctx, x):
        y = special("erfinv", sm.erfinv, x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        with np.errstate(over="ignore"):
            return g * (math.sqrt(math.pi) / 2) * np.exp(y * y)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        y = Erfinv.apply(inputs[0])
        return g * (math.sqrt(math.pi) / 2) * (y * y).exp()


class Erfc(Function):
    """y = erfc x = 1 - erf x (accurate where erf x is near 1);  dy/dx = -2/sqrt(pi) e**(-x**2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return special("erfc", sm.erfc, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (-2 / math.sqrt(math.pi)) * np.exp(-x * x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        return g * (-2 / math.sqrt(math.pi)) * (-x * x).exp()


class Lgamma(Function):
    """y = ln |Gamma(x)| (+inf at the poles 0, -1, -2, ...);  dy/dx = digamma(x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return special("lgamma", sm.lgamma, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * derivative("digamma", sm.digamma, x).astype(g.dtype, copy=False)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * Digamma.apply(inputs[0])


class Digamma(Function):
    """y = psi(x) = d/dx ln Gamma(x);  dy/dx = trigamma(x) = psi'(x) (derivations in _special_math)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return special("digamma", sm.digamma, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * derivative("trigamma", sm.trigamma, x).astype(g.dtype, copy=False)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        from .special_functions import Polygamma
        return g * Polygamma.apply(inputs[0], 1)


class I0(Function):
    """y = I0(x), the modified Bessel function of the first kind of order 0 (NumPy's i0);
    dy/dx = I1(x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return special("i0", np.i0, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * derivative("i1", sm.i1, x).astype(g.dtype, copy=False)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        from .special_functions_bessel import I1
        return g * I1.apply(inputs[0])


class Logit(Function):
    """y = ln(z / (1 - z)), z = x, or with eps x clamped to [eps, 1 - eps] (PyTorch's order: below
    eps is eps, else above 1 - eps is 1 - eps);  dy/dx = 1 / (x (1 - x)) where x is not clamped;
    outside [0, 1] without eps NaN, clamped with eps 0 (PyTorch's)."""

    @staticmethod
    def forward(ctx, x, eps):
        z = x
        if eps is not None:
            lo, hi = x.dtype.type(eps), x.dtype.type(1 - eps)
            z = ufunc("logit", "where", x < lo, lo, ufunc("logit", "where", x > hi, hi, x))
        ctx.save_for_backward(x)
        ctx.eps = eps
        with np.errstate(all="ignore"):
            return ufunc("logit", "log", z / (1 - z)).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        eps = ctx.eps
        lo, hi = (0, 1) if eps is None else (eps, 1 - eps)
        fill = g.dtype.type(np.nan if eps is None else 0)
        with np.errstate(all="ignore"):
            d = g / (x * (1 - x))
        return ufunc("logit", "where", (x < lo) | (x > hi), fill, d).astype(g.dtype, copy=False), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        a = x._data
        eps = ctx.eps
        lo, hi = (0, 1) if eps is None else (eps, 1 - eps)
        outside = (a < lo) | (a > hi)
        inside = keep_where(~outside, x) + constant(np.where(outside, 0.5, 0).astype(a.dtype))  # no 1/0 off it
        d = keep_where(~outside, g / (inside * (1 - inside)))
        if eps is None and outside.any():   # NaN outside [0, 1], as backward's
            d = d + constant(np.where(outside, np.nan, 0).astype(a.dtype))
        return d, None


class Exp2(Function):
    """y = 2**x;  dy/dx = y ln 2."""

    @staticmethod
    def forward(ctx, x):
        with np.errstate(over="ignore"):
            y = ufunc("exp2", "exp2", x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * math.log(2.0)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * Exp2.apply(inputs[0]) * math.log(2.0)


def _host_unary(cls, name, *args, doc=None):
    """The public function ``name`` of the host-computed elementwise Function ``cls`` (here and in
    special_functions*.py): CPU tensors only, integer and bool inputs in the default float dtype;
    ``args`` follow the input to ``cls.apply``."""
    def fn(input):
        host_only(name, input._data)
        return cls.apply(floating(input), *args)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = cls.__doc__ if doc is None else doc
    return fn


def _special_unary(cls, name):
    """The public function ``name`` of an elementwise Function computed by ``special``: any device
    whose namespace has the function; integer and bool inputs in the default float dtype."""
    def fn(input):
        return cls.apply(floating(input))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = cls.__doc__
    return fn


erfinv, erfc, lgamma, digamma, i0 = (_special_unary(c, n) for c, n in (
    (Erfinv, "erfinv"), (Erfc, "erfc"), (Lgamma, "lgamma"), (Digamma, "digamma"), (I0, "i0")))


def exp2(input):
    return Exp2.apply(floating(input))


def logit(input, eps=None):
    """ln(x / (1 - x)); with ``eps`` (a number in [0, 1)) x is first clamped to [eps, 1 - eps]. A
    negative eps means none, as PyTorch."""
    if eps is not None and eps < 0:
        eps = None
    return Logit.apply(floating(input), None if eps is None else float(eps))
