"""F.normalize: x / max(||x||_p, eps) along a dim, as ``torch.nn.functional.normalize``."""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.tensor import Tensor
from .distance import check_dim
from ._higher_order import constant, keep_where


class Normalize(Function):
    """With n = ||x||_p = (sum |x_i|**p)**(1/p) along dim and c = max(n, eps): y = x / c;

        dL/dx = g / c - [n > eps] (sum_i g_i x_i) / c**2 * dn/dx,   dn/dx = sign(x) |x|**(p-1) / n**(p-1)

    (below eps the divisor is the constant eps, so only the first term remains)."""

    @staticmethod
    def forward(ctx, x, p, dim, eps):
        xp = namespace_of(x)
        a = xp.abs(x)
        if p == float("inf"):
            n = a.max(axis=dim, keepdims=True) if x.shape[dim] else xp.zeros_like(a.sum(axis=dim, keepdims=True))
        else:
            n = (a ** p).sum(axis=dim, keepdims=True) ** (1.0 / p)
        c = xp.maximum(n, eps)
        ctx.save_for_backward(x, n, c)
        ctx.args = (p, dim, eps)
        return (x / c).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, n, c = ctx.saved_tensors
        p, dim, eps = ctx.args
        xp = namespace_of(x)
        dot = (g * x).sum(axis=dim, keepdims=True)
        if p == float("inf"):
            a = xp.abs(x)
            at_max = (a == n)
            dn = xp.sign(x) * at_max / xp.maximum(at_max.sum(axis=dim, keepdims=True), 1)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                dn = xp.where(n > 0, xp.sign(x) * xp.abs(x) ** (p - 1) / xp.where(n > 0, n, 1) ** (p - 1), 0)
        dx = g / c - (n >= eps) * dot / (c * c) * dn
        return dx.astype(x.dtype, copy=False), None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        p, dim, eps = ctx.args
        xp = namespace_of(x._data)
        a = x.abs()
        sign = constant(xp.sign(x._data))
        if p == float("inf"):
            _, n, _ = ctx.saved_tensors
            at_max = xp.abs(x._data) == n
            n = (a * constant(at_max.astype(x.dtype))).amax(dim=dim, keepdim=True) if x.shape[dim] else constant(n)
            dn = sign * constant((at_max / xp.maximum(at_max.sum(axis=dim, keepdims=True), 1)).astype(x.dtype))
        else:
            n = (a ** p).sum(dim=dim, keepdim=True) ** (1.0 / p)
        big = n._data >= eps
        c = keep_where(big, n) + constant(xp.where(big, 0, eps).astype(x.dtype))
        if p != float("inf"):
            pos = n._data > 0
            safe = keep_where(pos, n) + constant((~pos).astype(x.dtype))
            dn = keep_where(pos, sign * a ** (p - 1) / safe ** (p - 1))
        dot = (g * x).sum(dim=dim, keepdim=True)
        return g / c - keep_where(big, dot / (c * c) * dn), None, None, None


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """As ``torch.nn.functional.normalize``: each slice along ``dim`` scaled to unit p-norm
    (slices with norm below ``eps`` are divided by eps instead)."""
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported; use the returned tensor")
    if not isinstance(input, Tensor):
        raise TypeError(f"normalize: expected input to be a Tensor, got {type(input).__name__}")
    if input.dtype.kind != "f":
        raise RuntimeError(f"normalize: expected a floating point input, got dtype {input.dtype}")
    if not float(p) > 0:
        raise ValueError(f"normalize: expected p > 0, got p={p}")
    return Normalize.apply(input, float(p), check_dim(dim, input.ndim), float(eps))
