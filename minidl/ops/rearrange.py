"""Ops that move, copy or pick elements: flip, roll, tril/triu, diag, gather, index_select,
masked_select, repeat/tile, repeat_interleave. Each backward sends every output element's
gradient back to the input element it came from (summing where one fed several)."""
import numbers

import numpy as np

from .. import backends
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.size import as_ints
from ._broadcast import normalize_dim, normalize_dims
from ._saved import keep_for_backward
from .scatter import IndexOutOfRange
from .shape_error import broadcast_shape
from ._higher_order import add_at, keep_where, sum_to


class Flip(Function):
    """y = x reversed along ``axes``;  dL/dx = g reversed the same way."""

    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = axes
        return np.flip(x, axes).copy()

    @staticmethod
    def backward(ctx, g):
        return np.flip(g, ctx.axes).copy(), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return Flip.apply(g, ctx.axes), None


class Roll(Function):
    """y = x shifted cyclically by ``shifts`` along ``axes``;  dL/dx = g shifted back."""

    @staticmethod
    def forward(ctx, x, shifts, axes):
        ctx.args = (shifts, axes)
        return np.roll(x, shifts, axes)

    @staticmethod
    def backward(ctx, g):
        shifts, axes = ctx.args
        back = -shifts if axes is None else tuple(-s for s in shifts)
        return np.roll(g, back, axes), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        shifts, axes = ctx.args
        back = -shifts if axes is None else tuple(-s for s in shifts)
        return Roll.apply(g, back, axes), None, None


class Triangle(Function):
    """y = x where the (last two dims') mask keeps it, 0 elsewhere;  dL/dx = g * mask."""

    @staticmethod
    def forward(ctx, x, diagonal, upper):
        rows, cols = x.shape[-2:]
        keep = np.triu(np.ones((rows, cols), bool), diagonal) if upper else np.tril(np.ones((rows, cols), bool),
                                                                                       diagonal)
        xp = namespace_of(x)
        if xp is not np:      # the (rows, cols) mask is made on the host and moved once
            keep = backends.get(backends.device_of(x)).from_host(keep)
        ctx.save_for_backward(keep)
        return xp.where(keep, x, x.dtype.type(0))

    @staticmethod
    def backward(ctx, g):
        (keep,) = ctx.saved_tensors
        return g * keep, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (keep,) = ctx.saved_tensors
        return keep_where(keep, g), None, None


class Diag(Function):
    """1-d x: y = the matrix with x on diagonal ``k``; 2-d x: y = x's diagonal ``k``.
    dL/dx = the diagonal of g (1-d x), or g placed on the diagonal of zeros (2-d x)."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.args = (x.shape, k)
        return np.diag(x, k).copy()

    @staticmethod
    def backward(ctx, g):
        shape, k = ctx.args
        if len(shape) == 1:
            return np.diag(g, k).copy(), None
        out = namespace_of(g).zeros(shape, g.dtype)
        rows = np.arange(g.shape[0]) + max(-k, 0)
        out[rows, rows + k] = g
        return out, None


class Gather(Function):
    """y[...i...] = x[...index[...i...]...] along ``axis``;  dL/dx = g added back at the
    gathered positions (np.add.at: an index taken twice receives both gradients)."""

    @staticmethod
    def forward(ctx, x, axis, index):
        ctx.args = (x.shape, axis, keep_for_backward(ctx, index))   # the caller may write to its index
        return np.take_along_axis(x, index, axis)

    @staticmethod
    def backward(ctx, g):
        shape, axis, index = ctx.args
        dx = namespace_of(g).zeros(shape, g.dtype)
        idx = list(np.indices(index.shape, sparse=True))
        idx[axis] = index
        np.add.at(dx, tuple(idx), g)
        return dx, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        from ._higher_order import along_axis_index
        shape, axis, index = ctx.args
        return add_at(g, along_axis_index(index, axis), shape), None, None


class IndexSelect(Function):
    """y = x's slices ``index`` along ``axis``;  dL/dx = g's slices added back there."""

    @staticmethod
    def forward(ctx, x, axis, index):
        ctx.args = (x.shape, axis, keep_for_backward(ctx, index))   # the caller may write to its index
        return np.take(x, index, axis=axis)

    @staticmethod
    def backward(ctx, g):
        shape, axis, index = ctx.args
        dx = namespace_of(g).zeros((shape[axis],) + np.moveaxis(g, axis, 0).shape[1:], g.dtype)
        np.add.at(dx, index, np.moveaxis(g, axis, 0))
        return np.moveaxis(dx, 0, axis), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        shape, axis, index = ctx.args
        return add_at(g, (slice(None),) * axis + (index,), shape), None, None


class MaskedSelect(Function):
    """y = the elements of x where the (broadcast) mask is True, as a 1-d tensor;
    dL/dx = g scattered back to those positions, summed over the broadcast."""

    @staticmethod
    def forward(ctx, x, mask):
        shape = np.broadcast_shapes(x.shape, mask.shape)
        own = keep_for_backward(ctx, mask)   # the caller may write to its mask before backward
        ctx.args = (x.shape, shape, np.broadcast_to(mask if own is None else own, shape))
        return np.broadcast_to(x, shape)[ctx.args[2]]

    @staticmethod
    def backward(ctx, g):
        from ._broadcast import unbroadcast
        xshape, shape, mask = ctx.args
        full = namespace_of(g).zeros(shape, g.dtype)
        full[mask] = g
        return unbroadcast(full, xshape), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        xshape, shape, mask = ctx.args
        return sum_to(add_at(g, tuple(namespace_of(mask).nonzero(mask)), shape), xshape), None


class Repeat(Function):
    """y = x tiled ``reps`` times per dim (x padded with leading 1-dims to len(reps));
    dL/dx = g summed over the copies."""

    @staticmethod
    def forward(ctx, x, reps):
        ctx.original = x.shape
        x = x.reshape((1,) * (len(reps) - x.ndim) + x.shape)
        ctx.args = (x.shape, reps)
        return np.tile(x, reps)

    @staticmethod
    def backward(ctx, g):
        shape, reps = ctx.args
        split = []
        for r, n in zip(reps, shape):
            split += [r, n]
        summed = g.reshape(split).sum(axis=tuple(range(0, 2 * len(shape), 2)))
        return summed.reshape(ctx.original), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        shape, reps = ctx.args
        split = []
        for r, n in zip(reps, shape):
            split += [r, n]
        return g.reshape(split).sum(dim=tuple(range(0, 2 * len(shape), 2))).reshape(ctx.original), None


class RepeatInterleave(Function):
    """y = each slice of x along ``axis`` repeated repeats[i] times in place;
    dL/dx_i = the sum of g over x_i's copies."""

    @staticmethod
    def forward(ctx, x, repeats, axis):
        ctx.args = (repeats, axis, x.shape[axis])
        return np.repeat(x, repeats, axis=axis)

    @staticmethod
    def backward(ctx, g):
        repeats, axis, n = ctx.args
        counts = np.broadcast_to(np.asarray(repeats), (n,))
        owner = np.repeat(np.arange(n), counts)
        dx = namespace_of(g).zeros((n,) + np.moveaxis(g, axis, 0).shape[1:], g.dtype)
        np.add.at(dx, owner, np.moveaxis(g, axis, 0))
        return np.moveaxis(dx, 0, axis), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        repeats, axis, n = ctx.args
        owner = np.repeat(np.arange(n), np.broadcast_to(np.asarray(repeats), (n,)))
        shape = g.shape[:axis] + (n,) + g.shape[axis + 1:]
        return add_at(g, (slice(None),) * axis + (owner,), shape), None, None


def _ints(values, op, name="dims"):
    values = tuple(values[0]) if len(values) == 1 and isinstance(values[0], (tuple, list)) else tuple(values)
    return as_ints(values, op, name)


def _index_array(index, op, ndim=None):
    data = np.asarray(index.numpy(force=True) if hasattr(index, "numpy") else index)
    if data.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): Expected dtype int64 for index, got {data.dtype}")
    if ndim is not None and data.ndim != ndim:
        raise RuntimeError(f"{op}(): Index should have the same number of dimensions as input "
                           f"({ndim}), got {data.ndim}")
    return data.astype(np.int64, copy=False)


def _check_range(index, n, op):
    """``index`` checked against a dim of size n: PyTorch's gather and index_select take no
    negative index (unlike NumPy's take, they do not count from the end)."""
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = int(index.min()) if index.min() < 0 else int(index.max())
        raise IndexOutOfRange(f"{op}(): index {bad} is out of bounds for a dim of size {n} (expected 0 <= index < {n})")
    return index


def flip(x, *dims, **kwargs):
    """``flip(x, dims)`` with dims an int or a sequence, or ``x.flip(0, 1)`` (PyTorch's method takes
    the dims as separate arguments too)."""
    if "dims" in kwargs:
        if dims:
            raise TypeError("flip(): got dims both as positional arguments and as a keyword")
        dims = (kwargs.pop("dims"),)
    if kwargs:
        raise TypeError(f"flip(): unexpected keyword arguments {sorted(kwargs)}")
    if not dims:
        raise TypeError("flip() missing required argument 'dims'")
    if len(dims) == 1 and not isinstance(dims[0], numbers.Integral):
        dims = dims[0]
    dims = _ints((dims,) if isinstance(dims, int) else dims, "flip")
    return Flip.apply(x, normalize_dims(dims, x.ndim, "flip") if dims else ())   # no dims: nothing flips


def roll(x, shifts, dims=None):
    if dims is None:
        if not isinstance(shifts, numbers.Integral):
            shifts = _ints(shifts, "roll", "shifts")
            if len(shifts) != 1:
                raise RuntimeError("roll: without dims, shifts must be one int (the flattened tensor rolls)")
            shifts = shifts[0]
        return Roll.apply(x.reshape(-1), int(shifts), None).reshape(x.shape)
    shifts = _ints((shifts,) if isinstance(shifts, numbers.Integral) else shifts, "roll", "shifts")
    dims = _ints((dims,) if isinstance(dims, numbers.Integral) else dims, "roll")
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: {len(dims)}")
    return Roll.apply(x, shifts, tuple(normalize_dim(d, x.ndim, "roll") for d in dims))


def _triangle(x, diagonal, upper, op):
    if x.ndim < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got {x.ndim}")
    return Triangle.apply(x, int(diagonal), upper)


def tril(x, diagonal=0):
    return _triangle(x, diagonal, False, "tril")


def triu(x, diagonal=0):
    return _triangle(x, diagonal, True, "triu")


def diag(x, diagonal=0):
    if x.ndim not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    return Diag.apply(x, int(diagonal))


def gather(x, dim, index, *, sparse_grad=False):
    """out[i][j] = x[index[i][j]][j] (dim 0; likewise for the others). A 0-d tensor, input or index,
    counts as one with one element, as in PyTorch. ``sparse_grad`` is accepted: the gradient is
    dense here either way."""
    axis = normalize_dim(dim, max(x.ndim, 1), "gather")
    idx = _index_array(index, "gather")
    if x.ndim <= 1 and idx.ndim <= 1 and (x.ndim == 0 or idx.ndim == 0):
        return gather(x.reshape(-1), 0, idx.reshape(-1)).reshape(idx.shape)
    idx = _index_array(idx, "gather", x.ndim)
    for d in range(x.ndim):
        if d != axis and idx.shape[d] > x.shape[d]:
            raise RuntimeError(f"gather(): Size does not match at dimension {d} expected index {list(idx.shape)} "
                               f"to be no larger than self {list(x.shape)} apart from dimension {axis}")
    idx = _check_range(idx, x.shape[axis], "gather")
    # take_along_axis needs the other dims equal: gather reads from x's leading part there
    if any(idx.shape[d] != x.shape[d] for d in range(x.ndim) if d != axis):
        x = x[tuple(slice(0, n) if d != axis else slice(None) for d, n in enumerate(idx.shape))]
    return Gather.apply(x, axis, idx)


def index_select(x, dim, index):
    idx = _index_array(index, "index_select")
    if idx.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector, got {idx.ndim} dims")
    axis = normalize_dim(dim, max(x.ndim, 1), "index_select")
    if x.ndim == 0:
        return Gather.apply(x.reshape(1), 0, _check_range(idx.reshape(-1), 1, "index_select")).reshape(idx.shape)
    return IndexSelect.apply(x, axis, _check_range(idx.reshape(-1), x.shape[axis], "index_select"))


def masked_select(x, mask):
    m = np.asarray(mask.numpy(force=True) if hasattr(mask, "numpy") else mask)
    if m.dtype != np.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {m.dtype}")
    broadcast_shape("masked_select", m.shape, x.shape, "mask", "input")
    return MaskedSelect.apply(x, m)


def repeat(x, *sizes):
    reps = _ints(sizes, "repeat", "repeats")
    if len(reps) < x.ndim:
        raise RuntimeError(f"Number of dimensions of repeat dims ({len(reps)}) can not be smaller than number of "
                           f"dimensions of tensor ({x.ndim})")
    if any(r < 0 for r in reps):
        raise RuntimeError(f"repeat: Trying to create tensor with negative dimension: {list(reps)}")
    return Repeat.apply(x, reps)


def tile(x, dims):
    reps = _ints(dims if isinstance(dims, (tuple, list)) else (dims,), "tile")
    return repeat(x, *((1,) * (x.ndim - len(reps)) + reps))


def repeat_interleave(x, repeats, dim=None, *, output_size=None):
    if dim is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = normalize_dim(dim, max(x.ndim, 1), "repeat_interleave")
    if hasattr(repeats, "numpy"):
        repeats = _index_array(repeats, "repeat_interleave")
        if repeats.ndim == 0 or repeats.size == 1:
            repeats = int(repeats.reshape(-1)[0])
        elif repeats.shape != (x.shape[axis],):
            raise RuntimeError(f"repeat_interleave: repeats must have the same size as input along dim, got "
                               f"{repeats.size} and {x.shape[axis]}")
    if np.any(np.asarray(repeats) < 0):
        raise RuntimeError("repeat_interleave: repeats can not be negative")
    return RepeatInterleave.apply(x, repeats, axis)
