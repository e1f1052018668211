"""scatter_reduce: combine ``src`` into a copy of ``x`` at index's positions along dim, by
"sum", "prod", "mean", "amax" or "amin", as torch.scatter_reduce.

For every position p of index, c(p) = p with its coordinate along dim replaced by index[p];
position c of the output combines the src[p] with c(p) = c, and x[c] too when include_self
(positions nothing is scattered to keep x[c]). With S_c the set of those p and g = dL/dout:

- sum:   out_c = [x_c] + sum_{p in S_c} src_p
         dL/dx_c = g_c (0 at a scattered position without include_self),  dL/dsrc_p = g_c(p)
- mean:  out_c = ([x_c] + sum src_p) / N_c, N_c = |S_c| (+1 with include_self)
         dL/dx_c = g_c / N_c,  dL/dsrc_p = g_c(p) / N_c(p)
- prod:  out_c = [x_c] * prod src_p
         dL/dx_c = g_c * prod_{p in S_c} src_p,  dL/dsrc_p = g_c(p) * (the product of the other
         factors of out_c), computed as out_c / src_p where src_p != 0 and by multiplying the
         others out where src_p == 0
- amax / amin: out_c = the largest (smallest) of the factors; the gradient is split evenly
         between the factors equal to out_c, as PyTorch's: each gets g_c / (their number), x_c
         counted among them when equal even without include_self (it then gets 0), as PyTorch.

Integer inputs are combined in their own dtype (mean rounds down, as PyTorch); the gradient is
defined for floating dtypes only. Every combination is ops/scatter_along.py's, so the op runs on
every device (cuda: atomics for sum, amax and amin, one thread per line along dim for prod).
"""
import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ._saved import keep_for_backward
from .scatter import _as_1d, _crop, _like_input, _same_device, _scatter_index
from .scatter_along import gather_along, scatter_along

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _touched(x, dim, idx):
    """True at every position some p names (c(p), for any p)."""
    return scatter_along(namespace_of(x).zeros(x.shape, bool), dim, idx, True, "set")


def _identity(dtype, reduce):
    """The value amax (amin) starts from: -inf (inf), or an integer dtype's least (greatest)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    if dtype.kind == "b":
        return reduce != "amax"
    return -np.inf if reduce == "amax" else np.inf


def _counts(x, dim, idx, include_self):
    """N_c: how many src values land at each position (+1 with include_self)."""
    n = scatter_along(namespace_of(x).zeros(x.shape, np.int64), dim, idx, 1, "add")
    return n + 1 if include_self else n


class ScatterReduce(Function):
    """out = x with src combined at index's positions along dim (see the module docstring)."""

    @staticmethod
    def forward(ctx, x, src, dim, idx, reduce, include_self):
        values = src[_crop(idx.shape)]
        touched = _touched(x, dim, idx)
        out = x.copy()
        if reduce in ("sum", "mean"):
            if not include_self:
                out[touched] = 0
            scatter_along(out, dim, idx, values, "add")
            if reduce == "mean":
                n = np.maximum(_counts(x, dim, idx, include_self), 1).astype(out.dtype)
                out = out // n if out.dtype.kind in "iub" else out / n
                out = np.where(touched, out, x).astype(x.dtype, copy=False)
        elif reduce == "prod":
            if not include_self:
                out[touched] = 1
            scatter_along(out, dim, idx, values, "multiply")
        else:
            if not include_self:
                out[touched] = _identity(out.dtype, reduce)
            scatter_along(out, dim, idx, values, "max" if reduce == "amax" else "min")
        ctx.reduce, ctx.include_self, ctx.src_shape, ctx.dim = reduce, include_self, src.shape, dim
        ctx.idx = keep_for_backward(ctx, idx)
        ctx.save_for_backward(x, values, out, touched)
        return out

    @staticmethod
    def backward(ctx, g):
        x, values, out, touched = ctx.saved_tensors
        dim, idx, reduce, include_self = ctx.dim, ctx.idx, ctx.reduce, ctx.include_self
        xp = namespace_of(g)
        if reduce in ("sum", "mean"):
            scale = 1.0
            if reduce == "mean":
                scale = 1.0 / np.maximum(_counts(x, dim, idx, include_self), 1)
            gx = g * scale
            gv = gather_along(gx, dim, idx)
            if not include_self:
                gx = np.where(touched, 0, g)
            elif reduce == "mean":
                gx = np.where(touched, gx, g)
        elif reduce == "prod":
            others = scatter_along(xp.ones_like(x), dim, idx, values, "multiply")
            gx = np.where(touched, g * others, g) if include_self else np.where(touched, 0, g)
            gv = _prod_src_grad(g, x, values, out, dim, idx, include_self)
        else:
            # x_c counts among the tied factors even without include_self (PyTorch's formula),
            # though its own gradient is then 0
            hits = (x == out) & touched
            src_hits = values == gather_along(out, dim, idx)
            n = scatter_along(hits.astype(np.int64), dim, idx, src_hits.astype(np.int64), "add")
            share = g / np.maximum(n, 1)
            gx = np.where(touched, np.where(hits, share, 0), g) if include_self else np.where(touched, 0, g)
            gv = np.where(src_hits, gather_along(share, dim, idx), 0)
        gs = xp.zeros(ctx.src_shape, dtype=g.dtype)
        gs[_crop(values.shape)] = gv
        return gx.astype(g.dtype, copy=False), gs, None, None, None, None


def _prod_src_grad(g, x, values, out, dim, idx, include_self):
    """dL/dsrc_p for prod: g_c times the product of the other factors of c = c(p). Where src_p != 0
    that is out_c / src_p; where src_p == 0 it is the product of c's non-zero factors if src_p is
    c's only zero factor, else 0 (both counted with one scatter each, exact with zeros)."""
    xp = namespace_of(g)
    gc, oc = gather_along(g, dim, idx), gather_along(out, dim, idx)
    zero = values == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        gv = np.where(zero, 0, gc * oc / np.where(zero, 1, values))
    if bool(zero.any()):
        zeros = scatter_along(((x == 0) if include_self else xp.zeros(x.shape, bool)).astype(np.int64), dim, idx,
                              zero.astype(np.int64), "add")
        rest = scatter_along(np.where(x != 0, x, 1) if include_self else xp.ones_like(x), dim, idx,
                             np.where(zero, 1, values), "multiply")
        alone = gather_along(zeros, dim, idx) == 1
        gv = np.where(zero & alone, gc * gather_along(rest, dim, idx), gv)
    return gv


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """As ``torch.scatter_reduce``: ``input`` with ``src`` combined at ``index`` along dim."""
    Tensor = _op_function.Tensor
    op = "scatter_reduce"
    if reduce not in REDUCTIONS:
        raise RuntimeError(f"{op}(): reduce argument must be one of {', '.join(REDUCTIONS)}, got {reduce!r}")
    if not isinstance(src, Tensor):
        raise TypeError(f"{op}(): src must be a Tensor, got {type(src).__name__}")
    _same_device(op, input, src)
    check_same_dtype(op, [("self", input), ("src", src)])
    x = _as_1d(input)
    s = _as_1d(src) if input.ndim == 0 else src
    d, idx = _scatter_index(op, input, x, dim, index, s.shape)
    return _like_input(ScatterReduce.apply(x, s, d, idx, reduce, bool(include_self)), input)
