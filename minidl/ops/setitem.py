"""Index assignment as a differentiable op: what ``x[index] = v`` computes.

    out = x with out[index] = v (v broadcast to the indexed shape)
    dL/dx = g with the overwritten positions zeroed (their old values are gone)
    dL/dv = g[index] summed back over the axes v was broadcast along

Tensor.__setitem__ writes ``out`` into x's memory and records this op in the graph
(tensor/inplace.py). With an integer-array index that names one position twice, the last
write wins in the forward, and each copy of v receives the gradient of that position.
"""
import numpy as np

from ..autograd import function as _function
from ..autograd.function import Function
from ._broadcast import shape_of, unbroadcast
from .indexing import _normalize_index, _own_index


class SetItem(Function):
    """out = x with v written at index;  dL/dx = g zeroed at index,  dL/dv = unbroadcast(g[index])."""

    @staticmethod
    def forward(ctx, x, v, index):
        ctx.index, ctx.v_shape = _own_index(ctx, index), shape_of(v)   # backward's own copy of index arrays
        out = x.copy()
        out[index] = v
        return out

    @staticmethod
    def backward(ctx, g):
        nx, nv = ctx.needs_input_grad[:2]
        gx = gv = None
        if nx:
            gx = g.copy()
            gx[ctx.index] = 0
        if nv:
            gv = unbroadcast(g[ctx.index], ctx.v_shape)
        return gx, gv, None


def setitem(x, index, value):
    """The out-of-place result of ``x[index] = value``; checks that value broadcasts to the
    indexed shape."""
    Tensor = _function.Tensor
    index, _ = _normalize_index(index)
    if len(index) == 1:
        index = index[0]
    target = np.empty(x.shape, dtype=np.bool_)[index].shape if x.device == "cpu" else x._data[index].shape
    v_shape = value.shape if isinstance(value, Tensor) else np.shape(value)
    try:
        ok = np.broadcast_shapes(tuple(v_shape), tuple(target)) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(v_shape)} cannot be broadcast to indexing "
                           f"result of shape {list(target)}")
    if isinstance(value, Tensor) and value.device != x.device:
        value = value.to(x.device)
    if isinstance(value, Tensor) and value.dtype != x.dtype:
        value = value.to(x.dtype)
    return SetItem.apply(x, value, index)
