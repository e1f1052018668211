"""The two ops that keep a base tensor and its views in one history (PyTorch's CopySlices and
view regeneration).

A view ``v`` of a base ``x`` (a slice, transpose, reshape... sharing x's memory) is
described here by ``pos``: for each element of v, its flat (C-order) position in x.

- An in-place op on v that autograd records changes x too, so x's history must learn of
  it. With ``r`` the op's result (the new values of v, computed from a copy of v's old
  values and the op's other operands):

      x_new = CopySlices(x, r, pos):    x_new.flat[pos] = r, elsewhere x_new = x
      dL/dx = g with the positions pos zeroed   (those old values were overwritten)
      dL/dr = g.flat[pos]                       (each position is written once)

  The gradient of r then flows through the op to v's old history (a view of x's old
  history) and to the other operands, as PyTorch's CopySlices does.

- A view whose base was written in place since the view was made has a stale history;
  it is given the history of the base as it now is:

      v = ViewOf(x, pos):  v = x.flat[pos],   dL/dx = zeros with g added at pos

  (added, not written: an expanded view names one element of x several times).
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of

_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation.")


def _byte_offsets(a, start):
    """The byte offset of every element of ``a`` (an array of a's shape) from ``start``."""
    off = np.full((), start, dtype=np.int64)
    for n, stride in zip(a.shape, a.strides):
        off = off[..., None] + np.arange(n, dtype=np.int64) * stride
    return off


def view_positions(base, view, writing=False):
    """The flat C-order position in ``base`` of each element of ``view`` (two ndarrays over
    the same memory), as an int64 array of view's shape. With ``writing``, a view that
    names one element twice is refused, as PyTorch refuses to write through it."""
    if type(base) is not np.ndarray or type(view) is not np.ndarray:
        raise RuntimeError("an in-place write through a view that autograd has to record, or the use of a view "
                           "whose base was modified in place, is supported for CPU tensors only; clone() the "
                           "view, or write into the base tensor itself")
    if view.size == 0:
        return np.zeros(view.shape, dtype=np.int64)
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    offsets = _byte_offsets(view, start).ravel()
    item = base.itemsize
    if base.flags.c_contiguous:
        pos = offsets // item
        ok = bool(np.all((offsets % item == 0) & (pos >= 0) & (pos < base.size)))
    else:                              # find each offset among the base's own
        base_offsets = _byte_offsets(base, 0).ravel()
        order = np.argsort(base_offsets, kind="stable")
        ordered = base_offsets[order]
        k = np.minimum(np.searchsorted(ordered, offsets), ordered.size - 1)
        ok = base.size > 0 and bool(np.all(ordered[k] == offsets))
        pos = order[k]
    if not ok:
        raise RuntimeError("a view's elements were not found in its base tensor's memory")
    if writing and np.unique(pos).size != pos.size:
        raise RuntimeError(_OVERLAP)
    return pos.astype(np.int64, copy=False).reshape(view.shape)


class CopySlices(Function):
    """out = x with out.flat[pos] = r;  dL/dx = g zeroed at pos,  dL/dr = g.flat[pos]."""

    @staticmethod
    def forward(ctx, x, r, pos):
        ctx.pos, ctx.r_shape = pos.ravel(), r.shape   # pos was computed for this write: no one else holds it
        out = x.copy(order="C")
        out.reshape(-1)[ctx.pos] = r.ravel()
        return out

    @staticmethod
    def backward(ctx, g):
        nx, nr, _ = ctx.needs_input_grad
        pos = ctx.pos
        gx = gr = None
        if nx:
            gx = g.copy(order="C")
            gx.reshape(-1)[pos] = 0
        if nr:
            gr = g.reshape(-1)[pos].reshape(ctx.r_shape)
        return gx, gr, None


class ViewOf(Function):
    """out = x.flat[pos];  dL/dx = zeros of x's shape with g added at pos."""

    @staticmethod
    def forward(ctx, x, pos):
        ctx.shape, ctx.pos = x.shape, pos.ravel()
        return np.ascontiguousarray(x).reshape(-1)[ctx.pos].reshape(pos.shape)

    @staticmethod
    def backward(ctx, g):
        xp = namespace_of(g)
        gx = xp.zeros(int(np.prod(ctx.shape)), dtype=g.dtype)
        xp.add.at(gx, ctx.pos, g.ravel())
        return gx.reshape(ctx.shape), None
