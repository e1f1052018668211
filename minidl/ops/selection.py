"""Selections along a dim that return ``(values, indices)``: max/min(dim), sort, topk,
kthvalue, median(dim), mode(dim); and median() of all elements.

Each result is a named tuple with ``.values`` and ``.indices`` (int64), as PyTorch's
``torch.return_types``. The indices are found first (not differentiable); the values are
then the elements of x at those indices, ``out = take_along(x, idx, dim)``, whose gradient
goes back to exactly the selected positions:

    dL/dx = zeros of x's shape with g written at idx along dim   (put_along)

No position is selected twice along one dim, so writing (not adding) is exact.
"""
from collections import namedtuple

import numpy as np

from .. import backends
from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ._broadcast import normalize_dim
from ._saved import keep_for_backward
from ._higher_order import add_at, along_axis_index

_FIELDS = ("values", "indices")
return_types = {name: namedtuple(name, _FIELDS)
                for name in ("max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode")}


class TakeAlong(Function):
    """out = x[..., idx, ...] along ``axis`` (idx has x's shape but k along axis);
    dL/dx = zeros with g put back at idx."""

    @staticmethod
    def forward(ctx, x, idx, axis, keepdim):
        xp = backends.namespace_of(x)
        ctx.shape, ctx.axis = x.shape, axis
        ctx.idx = keep_for_backward(ctx, idx)   # the indices returned to the caller may share idx's memory
        out = xp.take_along_axis(x, idx, axis)
        return out if keepdim else out.reshape(out.shape[:axis] + out.shape[axis + 1:])

    @staticmethod
    def backward(ctx, g):
        xp = backends.namespace_of(g)
        idx, axis = ctx.idx, ctx.axis
        gx = xp.zeros(ctx.shape, dtype=g.dtype)
        xp.put_along_axis(gx, idx, g.reshape(idx.shape), axis)
        return gx, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        idx = ctx.idx
        return add_at(g.reshape(idx.shape), along_axis_index(idx, ctx.axis), ctx.shape), None, None, None


def _host(x):
    return backends.get(x.device).to_host(x._data)


def _to_device(array, like):
    # (np.asarray with order="C", not np.ascontiguousarray, which makes a 0-d array 1-d)
    return array if like.device == "cpu" else backends.get(like.device).from_host(np.asarray(array, order="C"))


def _select(name, x, idx, axis, keepdim, squeeze_scalar):
    """The named (values, indices) of x at host indices ``idx`` (keepdim shape) along axis."""
    Tensor = _op_function.Tensor
    source = x.reshape(1) if squeeze_scalar else x
    dev_idx = _to_device(idx, x)
    values = TakeAlong.apply(source, dev_idx, axis, keepdim or squeeze_scalar)
    indices = idx if keepdim else idx.reshape(idx.shape[:axis] + idx.shape[axis + 1:])
    if squeeze_scalar:
        values, indices = values.reshape(()), indices.reshape(())
    return return_types[name](values, Tensor._wrap(_to_device(np.asarray(indices, np.int64, order="C"), x), None, 0))


def _prepare(x, dim, op, need_nonempty=True):
    """(host array with at least one dim, axis, whether x was 0-d)."""
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}(): dim must be one int, got {dim!r} (amax/amin reduce over several dims)")
    scalar = x.ndim == 0
    axis = normalize_dim(dim, max(x.ndim, 1), op)
    a = _host(x)
    if scalar:
        a = a.reshape(1)
    if need_nonempty and a.shape[axis] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {dim} to have non-zero size.")
    return a, axis, scalar


def _stable_argsort(a, axis, descending):
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    # descending and stable: sort the reversed array ascending, then reverse back, so that
    # equal elements keep their original order
    n = a.shape[axis]
    flipped = np.argsort(np.flip(a, axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(flipped, axis)


def max_dim(x, dim, keepdim=False, name="max"):
    a, axis, scalar = _prepare(x, dim, name)
    if a.dtype.kind == "b":
        a = a.astype(np.uint8)
    idx = (a.argmax if name == "max" else a.argmin)(axis=axis, keepdims=True)
    return _select(name, x, idx, axis, keepdim, scalar)


def min_dim(x, dim, keepdim=False):
    return max_dim(x, dim, keepdim, name="min")


def sort(x, dim=-1, descending=False, stable=False):
    a, axis, scalar = _prepare(x, dim, "sort", need_nonempty=False)
    idx = _stable_argsort(a, axis, descending)
    return _select("sort", x, idx, axis, True, scalar)


def argsort(x, dim=-1, descending=False, stable=False):
    return sort(x, dim, descending, stable).indices


def topk(x, k, dim=-1, largest=True, sorted=True):
    a, axis, scalar = _prepare(x, dim, "topk", need_nonempty=False)
    if a.dtype.kind == "b":
        raise RuntimeError("topk does not support bool dtypes (as PyTorch)")
    k = int(k)
    if not 0 <= k <= a.shape[axis]:
        raise RuntimeError(f"topk: selected index k out of range: k = {k} for a dim of size {a.shape[axis]}")
    idx = np.take(_stable_argsort(a, axis, largest), np.arange(k), axis=axis)
    return _select("topk", x, idx, axis, True, scalar)


def kthvalue(x, k, dim=-1, keepdim=False):
    a, axis, scalar = _prepare(x, dim, "kthvalue")
    k = int(k)
    if not 1 <= k <= a.shape[axis]:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}: k = {k}, "
                           f"size {a.shape[axis]}")
    idx = np.take(_stable_argsort(a, axis, False), [k - 1], axis=axis)
    return _select("kthvalue", x, idx, axis, keepdim, scalar)


def median_dim(x, dim, keepdim=False):
    """The lower median ((n - 1) // 2-th smallest) along dim, with its index; NaN, at the first NaN's
    index, where the row holds one (as PyTorch: NaN propagates)."""
    a, axis, scalar = _prepare(x, dim, "median")
    n = a.shape[axis]
    order = _stable_argsort(a, axis, False)       # NaNs last, in their original order
    idx = np.take(order, [(n - 1) // 2], axis=axis)
    if a.dtype.kind in "fV":
        nans = np.isnan(a).sum(axis=axis, keepdims=True)
        first_nan = np.take_along_axis(order, np.minimum(n - nans, n - 1), axis)
        idx = np.where(nans > 0, first_nan, idx)
    return _select("median", x, idx, axis, keepdim, scalar)


def mode(x, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest among equally frequent ones) and
    the index of its last occurrence, as PyTorch."""
    a, axis, scalar = _prepare(x, dim, "mode")
    moved = np.moveaxis(a, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    out = np.empty(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        values, counts = np.unique(row, return_counts=True)   # sorted, so ties go to the smallest
        best = values[np.argmax(counts)]
        out[r] = np.flatnonzero(row == best)[-1]
    idx = np.expand_dims(out.reshape(moved.shape[:-1]), axis)
    return _select("mode", x, idx, axis, keepdim, scalar)


class MedianAll(Function):
    """out = the lower median of all elements, NaN if any is NaN (as PyTorch). The gradient is
    split evenly between the elements equal to it (as PyTorch's median() and max()), the NaNs
    for a NaN median: dL/dx_i = g * [x_i == out] / (number of such elements)."""

    @staticmethod
    def forward(ctx, x):
        xp = backends.namespace_of(x)
        flat = backends.get(backends.device_of(x)).to_host(x).reshape(-1)
        value = np.sort(flat, kind="stable")[(flat.size - 1) // 2]   # NaNs sort last
        nan = flat.dtype.kind in "fV" and bool(np.isnan(flat).any())
        if nan:
            value = flat[np.isnan(flat)][0]
        out = xp.asarray(np.asarray(value, dtype=x.dtype)) if xp is not np else np.asarray(value, dtype=x.dtype)
        ctx.save_for_backward((x != x) if nan else (x == out))
        return out

    @staticmethod
    def backward(ctx, g):
        (hit,) = ctx.saved_tensors
        return g * hit / hit.sum()


def median(x, dim=None, keepdim=False):
    if dim is None:
        if x.numel() == 0:
            return x.reshape(-1).sum() * float("nan")
        return MedianAll.apply(x)
    return median_dim(x, dim, keepdim)
