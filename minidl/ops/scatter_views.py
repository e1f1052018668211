"""Writing a tensor into a view of a copy of another: select_scatter, slice_scatter and
diagonal_scatter, as PyTorch's (the out-of-place forms of ``x.select(d, i).copy_(src)``,
``x[..., a:b:c, ...] = src`` and ``x.diagonal(...).copy_(src)``); and narrow_copy.

With V the view (the selected slice, the strided slice, the diagonal) and g = dL/dout:

    out = x with V(out) = src      (src has exactly V's shape)
    dL/dx = g with V(g) zeroed     (those values of x were overwritten)
    dL/dsrc = V(g)

The view is a NumPy basic index for select and slice, so those two run on any device whose
arrays take one; the diagonal is NumPy's, so diagonal_scatter runs on the CPU.
"""
import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ._broadcast import normalize_dim
from .strided import _int, diagonal_view, narrow
from ._higher_order import view_scatter_grads


class _ViewScatter(Function):
    """out = x with where(out) = src;  dL/dx = g with where(g) = 0,  dL/dsrc = where(g).
    ``where`` maps an array to the view written (a basic index or the diagonal)."""

    @staticmethod
    def forward(ctx, x, src, where):
        ctx.where = where
        out = x.copy()
        where(out)[...] = src
        return out

    @staticmethod
    def backward(ctx, g):
        nx, ns = ctx.needs_input_grad[:2]
        gx = gs = None
        if nx:
            gx = g.copy()
            ctx.where(gx)[...] = 0
        if ns:
            gs = ctx.where(g).copy()
        return gx, gs, None


class SelectScatter(_ViewScatter):
    """select_scatter: the view is x.select(dim, index)."""

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return view_scatter_grads(ctx, g)


class SliceScatter(_ViewScatter):
    """slice_scatter: the view is x[..., start:end:step, ...] along dim."""

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return view_scatter_grads(ctx, g)


class DiagonalScatter(_ViewScatter):
    """diagonal_scatter: the view is x.diagonal(offset, dim1, dim2)."""


def _basic(index):
    return lambda a: a[index]


def _scatter_into(cls, op, input, src, where, view_shape):
    Tensor = _op_function.Tensor
    if not isinstance(src, Tensor):
        raise TypeError(f"{op}(): argument 'src' must be Tensor, not {type(src).__name__}")
    if tuple(src.shape) != tuple(view_shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(view_shape)}")
    if src.device != input.device:
        raise RuntimeError(f"{op}: expected src on the device of self ({input.device}), got {src.device}")
    if src.dtype != input.dtype:   # PyTorch copies src into the view, casting it
        src = src.to(input.dtype)
    return cls.apply(input, src, where)


def select_scatter(input, src, dim, index):
    """``input`` with src written at ``index`` along ``dim`` (src has the shape of that slice)."""
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, input.ndim, "select_scatter")
    i, n = _int(index, "index", "select_scatter"), input.shape[d]
    if not -n <= i < n:
        raise IndexError(f"select(): index {i} out of range for tensor of size {list(input.shape)} at dimension {d}")
    index = (slice(None),) * d + (i % n,)
    return _scatter_into(SelectScatter, "select_scatter", input, src, _basic(index),
                         input.shape[:d] + input.shape[d + 1:])


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """``input`` with src written into ``input[..., start:end:step, ...]`` along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("slice() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, input.ndim, "slice_scatter")
    step = _int(step, "step", "slice_scatter")
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    start = None if start is None else _int(start, "start", "slice_scatter")
    end = None if end is None else _int(end, "end", "slice_scatter")
    index = (slice(None),) * d + (slice(start, end, step),)
    view_shape = np.empty(input.shape, dtype=np.bool_)[index].shape
    return _scatter_into(SliceScatter, "slice_scatter", input, src, _basic(index), view_shape)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """``input`` with src written on the diagonal ``offset`` of the matrices over (dim1, dim2)
    (src has that diagonal's shape: the other dims, then the diagonal's length)."""
    if type(input._data) is not np.ndarray:
        raise NotImplementedError(f"diagonal_scatter is not implemented for device '{input.device}': it writes "
                                  "through NumPy's diagonal view; move the tensor to the CPU with .cpu()")
    d1, d2 = normalize_dim(dim1, input.ndim, "diagonal"), normalize_dim(dim2, input.ndim, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = _int(offset, "offset", "diagonal_scatter")
    view_shape = diagonal_view(np.empty(input.shape, dtype=np.bool_), offset, d1, d2).shape
    return _scatter_into(DiagonalScatter, "diagonal_scatter", input, src,
                         lambda a: diagonal_view(a, offset, d1, d2), view_shape)


def narrow_copy(input, dim, start, length):
    """A copy of ``input.narrow(dim, start, length)`` (its own memory, not a view)."""
    return narrow(input, dim, start, length).clone()
