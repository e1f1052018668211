"""The classical orthogonal polynomials of torch.special, p_n(x) for a tensor (or number) x and a
degree n (a tensor or number, truncated to an integer; n < 0 gives 0), evaluated by their
three-term recurrences (DLMF 18.9.1) in float64 and rounded once to the result dtype:

- Chebyshev T, U, V, W: p_{k+1} = 2x p_k - p_{k-1}, from p_0 = 1 and p_1 = x, 2x, 2x - 1, 2x + 1;
  for |x| < 1 and n above 6 (T) or 8 (U, V, W) the trigonometric closed forms (DLMF 18.5.1-18.5.4)
  T_n = cos(n t), U_n = sin((n+1) t)/sin t, V_n = cos((n+1/2) t)/cos(t/2), W_n = sin((n+1/2) t)/sin(t/2),
  t = arccos x, which cost nothing per degree; at x = +-1 the exact values;
- the shifted Chebyshev polynomials, T*_n(x) = T_n(2x - 1) and likewise U*, V*, W*;
- Hermite H (physicists'): H_{k+1} = 2x H_k - 2k H_{k-1}; He (probabilists'): He_{k+1} = x He_k - k He_{k-1};
  NaN beyond degree 512 in float64 (128 in float32), where PyTorch gives up;
- Laguerre L: (k+1) L_{k+1} = (2k + 1 - x) L_k - k L_{k-1}; L_n(0) = 1;
- Legendre P: (k+1) P_{k+1} = (2k+1) x P_k - k P_{k-1}; P_n(+-1) = (+-1)**n.

None has a gradient in PyTorch (their results do not require grad), and none here. The
result dtype is PyTorch's for the two operands, integer and bool results becoming the default
float dtype. Computed on the host: CPU tensors only.
"""
import numpy as np

from ..autograd.op_function import Function
from ._elementwise_args import host_only, operands


def _degrees(n):
    """n truncated to int64; NaN and +-inf count as -1 (no polynomial: 0)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(n), np.trunc(np.where(np.isfinite(n), n, -1)), -1).astype(np.int64)


def _recurrence(x, n, first, step, start=1):
    """p_n by p_{k+1} = step(k, x, p_k, p_{k-1}) from p_0 = 1, p_1 = first, on all elements at once
    (each element stops at its own n; a NaN stops it, as PyTorch's loop)."""
    p, q = np.ones_like(x), first.copy()
    out = np.where(n == 0, 1.0, np.where(n == 1, first, 0.0))
    top = int(n.max(initial=0))
    for k in range(start, top + start - 1):
        live = (k + 2 - start <= n) & ~np.isnan(q)
        if not live.any():
            break
        r = step(k, x, q, p)
        p, q = np.where(live, q, p), np.where(live, r, q)
        out = np.where(live, q, out)
    return np.where(n < 0, 0.0, out)


def _chebyshev(kind, x, n):
    x2 = x + x
    first = {"t": x, "u": x2, "v": x2 - 1, "w": x2 + 1}[kind]
    with np.errstate(all="ignore"):
        out = _recurrence(x, n, first, lambda k, x, q, p: (x + x) * q - p, start=2)
        t = np.arccos(np.clip(x, -1, 1))
        inside = np.abs(x) < 1
        if kind == "t":
            closed, cut = np.cos(n * t), 6
        elif kind == "u":
            s = np.sin(t)
            closed, cut = np.where(s != 0, np.sin((n + 1) * t) / s, (n + 1) * np.cos((n + 1) * t) / x), 8
        elif kind == "v":
            closed, cut = np.cos((n + 0.5) * t) / np.cos(t / 2), 8
        else:
            closed, cut = np.sin((n + 0.5) * t) / np.sin(t / 2), 8
        out = np.where(inside & (n > cut), closed, out)
        even = n % 2 == 0
        odd_sign = np.where(even, 1.0, -1.0)
        at_one = {"t": 1.0, "u": n + 1.0, "v": 1.0, "w": 2.0 * n + 1}[kind]
        at_minus_one = {"t": odd_sign, "u": odd_sign * (n + 1), "v": odd_sign * (2 * n + 1), "w": odd_sign}[kind]
        out = np.where(x == 1, at_one, np.where(x == -1, at_minus_one, out))
    return np.where(n < 0, 0.0, out)


def _hermite(x, n, physicists, limit):
    with np.errstate(all="ignore"):
        if physicists:
            out = _recurrence(x, n, x + x, lambda k, x, q, p: (x + x) * q - 2 * k * p)
        else:
            out = _recurrence(x, n, x.copy(), lambda k, x, q, p: x * q - k * p)
    return np.where(n > limit, np.nan, out)


def _laguerre_step(k, x, q, p):
    return (((k + k) + (1 - x)) * q - k * p) / (k + 1)


def _legendre_step(k, x, q, p):
    return ((k + k + 1) * x * q - k * p) / (k + 1)


def _evaluate(name, x, n, dtype):
    n = _degrees(n)
    if name.startswith("shifted_chebyshev"):
        return _chebyshev(name[-1], x + x - 1, n)
    if name.startswith("chebyshev"):
        return _chebyshev(name[-1], x, n)
    if name in ("hermite_polynomial_h", "hermite_polynomial_he"):
        limit = {4: 128, 8: 512}.get(dtype.itemsize, 1024)
        return _hermite(x, n, name == "hermite_polynomial_h", limit)
    with np.errstate(all="ignore"):
        if name == "laguerre_polynomial_l":
            out = _recurrence(x, n, 1 - x, _laguerre_step)
            return np.where((x == 0) & (n >= 0), 1.0, out)
        out = _recurrence(x, n, x.copy(), _legendre_step)   # legendre_polynomial_p
        even = n % 2 == 0
        return np.where((x == 1) & (n >= 0), 1.0, np.where((x == -1) & (n >= 0), np.where(even, 1.0, -1.0), out))


class Polynomial(Function):
    """p_n(x) for one of the families above; its result takes no gradient (as PyTorch's)."""

    @staticmethod
    def forward(ctx, x, n, name):
        xs, ns = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n, np.float64))
        out = np.asarray(_evaluate(name, xs, ns, x.dtype)).astype(x.dtype, copy=False)
        ctx.mark_non_differentiable(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return None, None, None


def _polynomial(name):
    def fn(input, n):
        x, deg = operands(name, input, n, names=("input", "n"))
        host_only(name, x._data)
        return Polynomial.apply(x, deg, name)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(input, n): the polynomial of degree n at input (see the module's docstring)."
    return fn


NAMES = tuple(f"{prefix}chebyshev_polynomial_{k}" for prefix in ("", "shifted_") for k in "tuvw") + (
    "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")
FUNCTIONS = {name: _polynomial(name) for name in NAMES}
