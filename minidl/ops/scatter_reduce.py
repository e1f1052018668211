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
defined for floating dtypes only.
"""
import numpy as np

from ..autograd import function as _function
from ..autograd.function import Function
from ..tensor.dtype import check_same_dtype
from ._saved import keep_for_backward
from .scatter import _as_1d, _crop, _host_cpu, _like_input, _scatter_coords, _scatter_index

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _touched(shape, coords):
    mask = np.zeros(shape, bool)
    mask[coords] = True
    return mask


def _identity(dtype, reduce):
    """The value amax (amin) starts from: -inf (inf), or an integer dtype's least (greatest)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    if dtype.kind == "b":
        return reduce != "amax"
    return -np.inf if reduce == "amax" else np.inf


def _counts(shape, coords, include_self):
    n = np.zeros(shape, np.int64)
    np.add.at(n, coords, 1)
    return n + 1 if include_self else n


class ScatterReduce(Function):
    """out = x with src combined at index's positions along dim (see the module docstring)."""

    @staticmethod
    def forward(ctx, x, src, dim, idx, reduce, include_self):
        coords = _scatter_coords(dim, idx)
        values = src[_crop(idx.shape)]
        touched = _touched(x.shape, coords)
        out = x.copy()
        if reduce in ("sum", "mean"):
            if not include_self:
                out[touched] = 0
            np.add.at(out, coords, values)
            if reduce == "mean":
                n = np.maximum(_counts(x.shape, coords, include_self), 1).astype(out.dtype)
                out = out // n if out.dtype.kind in "iub" else out / n
                out = np.where(touched, out, x).astype(x.dtype, copy=False)
        elif reduce == "prod":
            if not include_self:
                out[touched] = 1
            np.multiply.at(out, coords, values)
        else:
            ufunc = np.maximum if reduce == "amax" else np.minimum
            if not include_self:
                out[touched] = _identity(out.dtype, reduce)
            ufunc.at(out, coords, values)
        ctx.reduce, ctx.include_self, ctx.src_shape = reduce, include_self, src.shape
        ctx.coords = tuple(keep_for_backward(ctx, c) for c in coords)
        ctx.save_for_backward(x, values, out, touched)
        return out

    @staticmethod
    def backward(ctx, g):
        x, values, out, touched = ctx.saved_tensors
        coords, reduce, include_self = ctx.coords, ctx.reduce, ctx.include_self
        if reduce in ("sum", "mean"):
            scale = 1.0
            if reduce == "mean":
                scale = 1.0 / np.maximum(_counts(x.shape, coords, include_self), 1)
            gx = g * scale
            gv = gx[coords]
            if not include_self:
                gx = np.where(touched, 0, g)
            elif reduce == "mean":
                gx = np.where(touched, gx, g)
        elif reduce == "prod":
            others = np.ones_like(x)
            np.multiply.at(others, coords, values)
            gx = np.where(touched, g * others, g) if include_self else np.where(touched, 0, g)
            gv = _prod_src_grad(g, x, values, out, coords, include_self)
        else:
            # x_c counts among the tied factors even without include_self (PyTorch's formula),
            # though its own gradient is then 0
            hits = (x == out) & touched
            src_hits = values == out[coords]
            n = hits.astype(np.int64)
            np.add.at(n, coords, src_hits.astype(np.int64))
            share = g / np.maximum(n, 1)
            gx = np.where(touched, np.where(hits & include_self, share, 0), g)
            gv = np.where(src_hits, share[coords], 0)
        gs = np.zeros(ctx.src_shape, dtype=g.dtype)
        gs[_crop(values.shape)] = gv
        return gx.astype(g.dtype, copy=False), gs, None, None, None, None


def _prod_src_grad(g, x, values, out, coords, include_self):
    """dL/dsrc_p for prod: g times the product of the other factors of its output position."""
    gc, oc = g[coords], out[coords]
    with np.errstate(divide="ignore", invalid="ignore"):
        gv = np.where(values != 0, gc * oc / np.where(values != 0, values, 1), 0)
    zeros = np.argwhere(values == 0)
    if len(zeros):
        flat_c = np.ravel_multi_index(tuple(np.broadcast_to(c, values.shape) for c in coords), x.shape)
        flat_v, flat_x = values.reshape(-1), x.reshape(-1)
        cells = flat_c.reshape(-1)
        for z in zeros:
            k = np.ravel_multi_index(tuple(z), values.shape)
            same = np.flatnonzero(cells == cells[k])
            rest = np.prod(flat_v[same[same != k]])
            if include_self:
                rest = rest * flat_x[cells[k]]
            gv[tuple(z)] = gc[tuple(z)] * rest
    return gv


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """As ``torch.scatter_reduce``: ``input`` with ``src`` combined at ``index`` along dim."""
    Tensor = _function.Tensor
    op = "scatter_reduce"
    if reduce not in REDUCTIONS:
        raise RuntimeError(f"{op}(): reduce argument must be one of {', '.join(REDUCTIONS)}, got {reduce!r}")
    if not isinstance(src, Tensor):
        raise TypeError(f"{op}(): src must be a Tensor, got {type(src).__name__}")
    _host_cpu(op, input, src)
    check_same_dtype(op, [("self", input), ("src", src)])
    x = _as_1d(input)
    s = _as_1d(src) if input.ndim == 0 else src
    d, idx = _scatter_index(op, input, x, dim, index, s.shape)
    return _like_input(ScatterReduce.apply(x, s, d, idx, reduce, bool(include_self)), input)
