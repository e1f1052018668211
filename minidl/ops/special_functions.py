"""torch.special's error-function and gamma-family functions as differentiable ops: ndtr, ndtri,
log_ndtr, erfcx, entr, polygamma, multigammaln, zeta, xlog1py, gammainc/gammaincc (md.igamma /
md.igammac), and the integer and bit-level neighbours md.gcd, md.lcm and md.nextafter. The
float64 math is in special_functions_math.py; each Function here computes in float64 on the host
and rounds once to its input's dtype, and its backward is the closed-form derivative:

    ndtr'(x) = phi(x) = e**(-x**2/2) / sqrt(2 pi)
    ndtri'(p) = 1 / phi(ndtri p) = sqrt(2 pi) e**(y**2/2)
    log_ndtr'(x) = phi(x) / Phi(x) = e**(-x**2/2 - log_ndtr x) / sqrt(2 pi)
    erfcx'(x) = 2x erfcx(x) - 2/sqrt(pi)          (d/dx of e**(x**2) erfc x)
    entr'(x) = -(1 + ln x)                         (entr x = -x ln x; inf at 0, NaN below, as PyTorch)
    d/dx polygamma(n, x) = polygamma(n + 1, x)
    d/dq zeta(x, q) = -x zeta(x + 1, q)            (none for x: PyTorch raises, and so does minidl)
    d/dx xlog1py = log1p(y) (0 where x = 0 and y <= -1),  d/dy = x / (1 + y)
    d/dx gammainc(a, x) = x**(a-1) e**-x / Gamma(a) = -d/dx gammaincc(a, x)   (none for a, as PyTorch)
    d/da nextafter(a, b) = 1, d/db = 0             (PyTorch's)

Integer and bool inputs compute in the default float dtype, as PyTorch's special functions
(except gammainc/gammaincc and nextafter, which PyTorch refuses for integers, as here).
Computed on the host: CPU tensors only (NotImplementedError naming the op and device otherwise),
except polygamma, zeta and nextafter, which a device with those functions (cuda: the device
functions of minidl/kernels/cuda/special.py) computes itself, backward passes included.
"""
import math
import numbers

import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from . import _special_math as sm
from . import special_functions_math as sfm
from ._broadcast import unbroadcast
from ._elementwise_args import floating, host_only, operands, result_dtype, ufunc
from .special import _host, _host_unary, derivative, special
from .special import lgamma as _lgamma_op

_SQRT_2PI = math.sqrt(2 * math.pi)


def _grad(g, value):
    return namespace_of(g).asarray(g * value).astype(g.dtype, copy=False)


class Ndtr(Function):
    """y = Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF;  dy/dx = e**(-x**2/2) / sqrt(2 pi)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _host(sfm.ndtr, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = np.asarray(x, np.float64)
        return _grad(g, np.exp(-0.5 * x * x) / _SQRT_2PI)


class Ndtri(Function):
    """y = Phi**-1(p);  dy/dp = 1 / Phi'(y) = sqrt(2 pi) e**(y**2/2)."""

    @staticmethod
    def forward(ctx, p):
        y = _host(sfm.ndtri, p)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        y = np.asarray(y, np.float64)
        with np.errstate(over="ignore"):
            return _grad(g, _SQRT_2PI * np.exp(0.5 * y * y))


class LogNdtr(Function):
    """y = ln Phi(x);  dy/dx = Phi'(x) / Phi(x) = e**(-x**2/2 - y) / sqrt(2 pi)."""

    @staticmethod
    def forward(ctx, x):
        y = _host(sfm.log_ndtr, x)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = (np.asarray(a, np.float64) for a in ctx.saved_tensors)
        with np.errstate(over="ignore", invalid="ignore"):
            return _grad(g, np.exp(-(y + 0.5 * x * x)) / _SQRT_2PI)


class Erfcx(Function):
    """y = e**(x**2) erfc(x);  dy/dx = 2x e**(x**2) erfc(x) + e**(x**2) (-2/sqrt(pi)) e**(-x**2)
    = 2x y - 2/sqrt(pi)."""

    @staticmethod
    def forward(ctx, x):
        y = _host(sfm.erfcx, x)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = (np.asarray(a, np.float64) for a in ctx.saved_tensors)
        with np.errstate(invalid="ignore", over="ignore"):
            return _grad(g, 2 * x * y - 2 / math.sqrt(math.pi))


def _entr(x):
    with np.errstate(all="ignore"):
        out = np.where(x > 0, -x * np.log(x), np.where(x == 0, 0.0, -np.inf))
    return np.where(np.isnan(x), np.nan, out)


class Entr(Function):
    """y = -x ln x for x > 0, 0 at 0, -inf below (the entropy summand);  dy/dx = -(1 + ln x)
    (+inf at 0 and NaN below, as PyTorch)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _host(_entr, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with np.errstate(all="ignore"):
            return _grad(g, -(1 + np.log(np.asarray(x, np.float64))))


def polygamma_values(n, x):
    """psi^(n)(x) in float64: digamma, trigamma, and (-1)**(n+1) n! zeta(n + 1, x) for n >= 2
    (differentiate psi(x) = -gamma + sum_k (1/(k+1) - 1/(k+x)) n times)."""
    if n == 0:
        return sm.digamma(x)
    if n == 1:
        return sm.trigamma(x)
    factorial = float(math.factorial(n)) if n <= 170 else math.inf
    with np.errstate(all="ignore"):
        return (1.0 if n % 2 else -1.0) * factorial * sfm.zeta(float(n + 1), x)


def _polygamma_derivative(n, x):
    """psi^(n)(x) as a backward factor (``derivative``'s rule: float64 on the CPU)."""
    if namespace_of(x) is np:
        return polygamma_values(n, np.asarray(x, np.float64))
    return ufunc("polygamma", "polygamma", n, x)


class Polygamma(Function):
    """y = psi^(n)(x), the n-th derivative of digamma;  dy/dx = psi^(n+1)(x)."""

    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        ctx.n = n
        if namespace_of(x) is np:
            return _host(lambda v: polygamma_values(n, v), x)
        return ufunc("polygamma", "polygamma", n, x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _grad(g, _polygamma_derivative(ctx.n + 1, x)), None


def _two_operand_grads(ctx, ga, gb):
    na, nb = ctx.needs_input_grad[:2]
    return (unbroadcast(ga(), ctx.shapes[0]) if na else None), (unbroadcast(gb(), ctx.shapes[1]) if nb else None)


def _not_implemented(name):
    def fail():
        raise NotImplementedError(f"the derivative for '{name}' is not implemented.")
    return fail


class Zeta(Function):
    """z = zeta(x, q) = sum_k (q + k)**-x (Hurwitz);  dz/dq = -x zeta(x + 1, q); dz/dx is not
    implemented (as PyTorch: backward raises NotImplementedError when x needs a gradient)."""

    @staticmethod
    def forward(ctx, x, q):
        ctx.save_for_backward(x, q)
        ctx.shapes = (x.shape, q.shape)
        return special("zeta", sfm.zeta, x, q)

    @staticmethod
    def backward(ctx, g):
        x, q = ctx.saved_tensors
        if namespace_of(x) is np:   # float64 on the host
            x, q = np.asarray(x, np.float64), np.asarray(q, np.float64)
        return _two_operand_grads(ctx, _not_implemented("zeta"),
                                  lambda: _grad(g, -x * derivative("zeta", sfm.zeta, x + 1, q)))


def _xlog1py(x, y):
    with np.errstate(all="ignore"):
        return np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log1p(y))


class Xlog1py(Function):
    """z = x log1p(y), 0 where x = 0 (unless y is NaN);  dz/dx = log1p(y) (0 where x = 0 and
    y <= -1, as PyTorch), dz/dy = x / (1 + y)."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        ctx.shapes = (x.shape, y.shape)
        return _host(_xlog1py, x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = (np.asarray(a, np.float64) for a in ctx.saved_tensors)
        with np.errstate(all="ignore"):
            dx = np.where((x == 0) & (y <= -1), 0.0, np.log1p(y))
            dy = x / (1 + y)
        return _two_operand_grads(ctx, lambda: _grad(g, dx), lambda: _grad(g, dy))


class IncompleteGamma(Function):
    """P(a, x) (upper=False) or Q(a, x) = 1 - P (upper=True), regularized;
    dP/dx = -dQ/dx = x**(a-1) e**-x / Gamma(a) = e**((a-1) ln x - x - lnGamma(a)); no derivative in a
    (PyTorch raises, and so does minidl)."""

    @staticmethod
    def forward(ctx, a, x, upper):
        ctx.save_for_backward(a, x)
        ctx.shapes = (a.shape, x.shape)
        ctx.upper = upper
        return _host(sfm.gammaincc if upper else sfm.gammainc, a, x)

    @staticmethod
    def backward(ctx, g):
        a, x = (np.asarray(v, np.float64) for v in ctx.saved_tensors)
        with np.errstate(all="ignore"):
            d = np.exp((a - 1) * np.log(x) - x - sm.lgamma(a))
        d = -d if ctx.upper else d
        name = "igammac: input" if ctx.upper else "igamma: input"
        ga, gx = _two_operand_grads(ctx, _not_implemented(name), lambda: _grad(g, d))
        return ga, gx, None


class NextAfter(Function):
    """The next float after a towards b;  d/da = 1, d/db = 0 (PyTorch's)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return ufunc("nextafter", "nextafter", a, b)

    @staticmethod
    def backward(ctx, g):
        return _two_operand_grads(ctx, lambda: g, lambda: np.zeros_like(g))


# ---- the public functions ----------------------------------------------------------------------
ndtr, ndtri, log_ndtr, erfcx, entr = (_host_unary(c, n) for c, n in (
    (Ndtr, "ndtr"), (Ndtri, "ndtri"), (LogNdtr, "log_ndtr"), (Erfcx, "erfcx"), (Entr, "entr")))


def polygamma(n, input):
    """The n-th derivative of digamma at input (n >= 0 an integer)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return Polygamma.apply(floating(input), int(n))


def multigammaln(input, p):
    """ln Gamma_p(x) = p (p - 1)/4 ln(pi) + sum_{i<p} lnGamma(x - i/2), the multivariate log-gamma,
    composed of lgamma so that its gradient is sum_{i<p} digamma(x - i/2)."""
    if isinstance(p, bool) or not isinstance(p, numbers.Integral):
        raise TypeError(f"mvlgamma(): argument 'p' must be int, not {type(p).__name__}")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = floating(input)
    out = _lgamma_op(x)
    for i in range(1, p):
        out = out + _lgamma_op(x - i / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


def zeta(input, other):
    """Hurwitz's zeta function sum_k (other + k)**-input (Riemann's at other = 1)."""
    x, q = operands("zeta", input, other)
    return Zeta.apply(x, q)


def xlog1py(input, other):
    x, y = operands("xlog1py", input, other)
    host_only("xlog1py", x._data)
    return Xlog1py.apply(x, y)


def _incomplete_gamma(name, upper):
    def fn(input, other):
        a, x = operands(name, input, other, integers=False)
        host_only(name, a._data)
        return IncompleteGamma.apply(a, x, upper)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = ("The regularized upper incomplete gamma function Q(input, other) = 1 - P."
                  if upper else "The regularized lower incomplete gamma function P(input, other).")
    return fn


gammainc, gammaincc = _incomplete_gamma("gammainc", False), _incomplete_gamma("gammaincc", True)
igamma, igammac = _incomplete_gamma("igamma", False), _incomplete_gamma("igammac", True)


def _tensor_pair(name, input, other):
    """gcd, lcm and nextafter take two tensors, no numbers (as PyTorch)."""
    for arg, v in (("input", input), ("other", other)):
        if not isinstance(v, _op_function.Tensor):
            raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(v).__name__}")


def nextafter(input, other):
    """The next floating-point value after input towards other (both tensors of a floating dtype)."""
    _tensor_pair("nextafter", input, other)
    a, b = operands("nextafter", input, other, floating=False, integers=False)
    return NextAfter.apply(a, b)


def _integer_binary(name, xp_name):
    def fn(input, other):
        _tensor_pair(name, input, other)
        dt = result_dtype(input, other)
        if dt.kind not in "iu":
            bad = next(t for t in (input, other) if t._data.dtype.kind not in "iu")
            raise NotImplementedError(f'"{name}" not implemented for \'{bad.dtype}\' tensors: it takes integer '
                                      "tensors only (as PyTorch)")
        a, b = operands(name, input, other, floating=False)
        out = ufunc(name, xp_name, a._data, b._data)
        return _op_function.Tensor._wrap(out.astype(dt, copy=False), None, 0)
    fn.__name__ = fn.__qualname__ = name
    return fn


gcd = _integer_binary("gcd", "gcd")
gcd.__doc__ = "The greatest common divisor of |input| and |other|, elementwise (0 for 0 and 0); integers only."
lcm = _integer_binary("lcm", "lcm")
lcm.__doc__ = "The least common multiple of |input| and |other|, elementwise (0 if either is 0); integers only."
