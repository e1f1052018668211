"""F.lp_pool1d and F.lp_pool2d: power-average pooling, as ``torch.nn.functional.lp_pool{1,2}d``.

Over each window of n = kernel numel positions (no padding; with ceil_mode a last window
may overhang the input, and the average then divides by its in-bounds count, as avg_pool's):

    a = avg_pool(x ** p)                       (the existing pooling op and ``pow``)
    y = (n a) ** (1/p)                         = (sum over the window of x ** p) ** (1/p)

PyTorch writes the last step as ``(sign(a) * relu(|a|)).mul(n).pow(1/p)``. sign(a) relu(|a|)
is a itself, so the value is (n a) ** (1/p) (NaN for a negative a and a fractional 1/p, as
any real power); what the detour changes is the gradient, which the relu stops where a = 0
(an all-zero window), so that the infinite slope of t ** (1/p) at t = 0 never reaches x:

    dy/da = n (1/p) (n a) ** (1/p - 1)     where a != 0,     0 where a == 0.

``LpRoot`` is that last step with that derivative; the pooling and the power before it carry
their own backwards. p = +inf is max_pool(|x|) and p = -inf is -max_pool(-|x|), as PyTorch.
"""
import math
import numbers

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.tensor import Tensor
from ._broadcast import int_pair
from .pooling import avg_pool2d, max_pool2d
from .pooling1d import _one, avg_pool1d, max_pool1d


class LpRoot(Function):
    """y = (n a) ** (1/p);  dL/da = g n/p (n a) ** (1/p - 1) where a != 0, else 0 (module docstring)."""

    @staticmethod
    def forward(ctx, a, n, p):
        xp = namespace_of(a)
        with xp.errstate(invalid="ignore", divide="ignore"):
            y = (a * n) ** (1.0 / p)
        ctx.save_for_backward(a)
        ctx.n, ctx.p = n, p
        return y.astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        xp = namespace_of(g)
        n, p = ctx.n, ctx.p
        with xp.errstate(invalid="ignore", divide="ignore", over="ignore"):
            slope = (a * n) ** (1.0 / p - 1.0) * (n / p)
            da = xp.where(a == 0, xp.zeros((), dtype=g.dtype), g * slope)
        return da.astype(g.dtype, copy=False), None, None


def _norm(norm_type, op):
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real):
        raise TypeError(f"{op}(): argument 'norm_type' must be a number, got {type(norm_type).__name__} "
                        f"({norm_type!r})")
    return norm_type


def _check_input(input, ndims, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, got {type(input).__name__}")
    if input.ndim not in ndims:
        raise RuntimeError(f"{op}: expected a {ndims[0]}-D or {ndims[1]}-D (batched) input, got shape "
                           f"{list(input.shape)}")


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """As ``torch.nn.functional.lp_pool2d``: (sum over each kernel_size window of x ** p) ** (1/p)."""
    op = "lp_pool2d"
    p = _norm(norm_type, op)
    _check_input(input, (3, 4), op)
    kh, kw = int_pair(kernel_size, "kernel_size", op)
    if math.isinf(p):
        pooled = max_pool2d(input.abs() if p > 0 else -input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return pooled if p > 0 else -pooled
    a = avg_pool2d(input.pow(p), kernel_size, stride, 0, ceil_mode)
    return LpRoot.apply(a, kh * kw, float(p))


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """As ``torch.nn.functional.lp_pool1d``: (sum over each length-kernel_size window of x ** p) ** (1/p)."""
    op = "lp_pool1d"
    p = _norm(norm_type, op)
    _check_input(input, (2, 3), op)
    k = _one(kernel_size, "kernel_size", op)
    if math.isinf(p):
        pooled = max_pool1d(input.abs() if p > 0 else -input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return pooled if p > 0 else -pooled
    a = avg_pool1d(input.pow(p), kernel_size, stride, 0, ceil_mode)
    return LpRoot.apply(a, k, float(p))
