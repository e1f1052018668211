"""Indexing and selection: x[index], where, masked_fill, and comparisons.

Gradients of a selection flow back only to the selected elements. With integer-array
indices an element can be picked several times; its gradient is then the *sum* of the
gradients of its copies (a scatter-add, ``np.add.at``).
"""
import numpy as np

from ..autograd import function as _function
from ..autograd.function import Function
from ..backends import namespace_of
from ._broadcast import shape_of, unbroadcast
from ._higher_order import constant, keep_where, sum_to
from ._saved import keep_for_backward
from .shape_error import ShapeError


def _normalize_index(index):
    """Turn Tensors and lists inside an index into arrays; report whether it is 'advanced'
    (has arrays, so elements may repeat) or 'basic' (ints, slices, None, Ellipsis)."""
    Tensor = _function.Tensor

    items = index if isinstance(index, tuple) else (index,)
    out, advanced = [], False
    for i in items:
        if isinstance(i, Tensor):
            i = i._data
        elif isinstance(i, list):
            i = np.asarray(i)
        if hasattr(i, "dtype"):
            if i.dtype.kind not in "iub":
                raise IndexError(f"tensors used as indices must be integer or bool, got dtype {i.dtype}")
            if i.ndim == 0 and i.dtype.kind in "iu":
                i = int(i)
            else:
                advanced = True
        if type(i) is int and not -2 ** 63 <= i < 2 ** 63:   # NumPy: an OverflowError, or an IndexError
            raise IndexError(f"index {i} is out of bounds (it does not fit in 64 bits)")
        out.append(i)
    return tuple(out), advanced


class GetItem(Function):
    """out = x[index];  dL/dx = zeros with g written (basic) or scatter-added (advanced)
    at the indexed positions."""

    @staticmethod
    def forward(ctx, x, index, advanced):
        ctx.shape, ctx.dtype, ctx.advanced = x.shape, x.dtype, advanced
        ctx.index = _own_index(ctx, index) if advanced else index
        out = x[index]
        if isinstance(out, np.generic):
            # integers in every axis: NumPy gives a scalar copy, PyTorch a 0-d view
            out = x[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]
        return out

    @staticmethod
    def backward(ctx, g):
        xp = namespace_of(g)
        gx = xp.zeros(ctx.shape, dtype=g.dtype)
        if ctx.advanced:
            xp.add.at(gx, ctx.index, g)
        else:
            gx[ctx.index] = g
        return gx, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        from .index_put import IndexPutAccumulate   # (they import this module)
        from .scatter_views import SliceScatter
        zeros = constant(namespace_of(g._data).zeros(ctx.shape, dtype=g.dtype))
        if ctx.advanced:
            return IndexPutAccumulate.apply(zeros, g, ctx.index), None, None
        index = ctx.index if isinstance(ctx.index, tuple) else (ctx.index,)
        if not any(i is Ellipsis for i in index):
            index += (Ellipsis,)    # a view even where every axis gets an int
        return SliceScatter.apply(zeros, g, lambda a: a[index]), None, None


class Where(Function):
    """out = a where cond else b;  dL/da = g where cond else 0,  dL/db = g where not cond else 0."""

    @staticmethod
    def forward(ctx, cond, a, b):
        xp = namespace_of(cond)
        ctx.save_for_backward(keep_for_backward(ctx, cond))
        ctx.shapes = shape_of(a), shape_of(b)
        return xp.where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        xp = namespace_of(g)
        _, na, nb = ctx.needs_input_grad
        ga = unbroadcast(xp.where(cond, g, 0), ctx.shapes[0]) if na else None
        gb = unbroadcast(xp.where(cond, 0, g), ctx.shapes[1]) if nb else None
        return None, ga, gb

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (cond,) = ctx.saved_tensors
        _, na, nb = ctx.needs_input_grad
        ga = sum_to(keep_where(cond, g), ctx.shapes[0]) if na else None
        gb = sum_to(keep_where(~cond, g), ctx.shapes[1]) if nb else None
        return None, ga, gb


class MaskedFill(Function):
    """out = value where mask else x;  dL/dx = 0 where mask else g."""

    @staticmethod
    def forward(ctx, x, mask, value):
        xp = namespace_of(x)
        ctx.save_for_backward(keep_for_backward(ctx, mask))
        return xp.where(mask, xp.asarray(value, dtype=x.dtype), x)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return unbroadcast(namespace_of(g).where(mask, 0, g), g.shape), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (mask,) = ctx.saved_tensors
        return sum_to(keep_where(~mask, g), g.shape), None, None


def _own_index(ctx, index):
    """The index with each of its arrays replaced by backward's private copy (the caller may
    still write to the arrays it indexed with)."""
    if isinstance(index, tuple):
        return tuple(keep_for_backward(ctx, i) if hasattr(i, "dtype") else i for i in index)
    return keep_for_backward(ctx, index) if hasattr(index, "dtype") else index


def getitem(x, index):
    index, advanced = _normalize_index(index)
    if len(index) == 1:
        index = index[0]
    return GetItem.apply(x, index, advanced)


def _as_bool(cond, op):
    Tensor = _function.Tensor
    c = cond._data if isinstance(cond, Tensor) else np.asarray(cond)
    if c.dtype.kind != "b":
        raise TypeError(f"{op}: expected a bool condition/mask, got dtype {c.dtype}")
    return c


def where(cond, a, b):
    cond = _as_bool(cond, "where")
    try:
        return Where.apply(cond, a, b)
    except ValueError as exc:
        if "broadcast" not in str(exc):
            raise
        raise ShapeError(f"where: shapes of condition {list(cond.shape)}, input {list(shape_of(_raw(a)))} and "
                         f"other {list(shape_of(_raw(b)))} cannot be broadcast together") from None


def _raw(x):
    return getattr(x, "_data", x)


def masked_fill(x, mask, value):
    mask = _as_bool(mask, "masked_fill")
    try:
        np.broadcast_shapes(mask.shape, x.shape)
    except ValueError:
        raise ValueError(f"masked_fill: mask of shape {list(mask.shape)} does not broadcast to "
                         f"the input's shape {list(x.shape)}") from None
    return MaskedFill.apply(x, mask, float(value))


def compare(name, a, b):
    """Elementwise comparison or logic (``name`` is a NumPy ufunc name); returns a bool
    Tensor outside the graph."""
    Tensor = _function.Tensor
    ra = a._data if isinstance(a, Tensor) else a
    rb = b._data if isinstance(b, Tensor) else b
    return Tensor._wrap(getattr(namespace_of(ra if hasattr(ra, "shape") else rb), name)(ra, rb), None, 0)


def logical_not(a):
    Tensor = _function.Tensor
    return Tensor._wrap(namespace_of(a._data).logical_not(a._data), None, 0)
