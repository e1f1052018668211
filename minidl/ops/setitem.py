"""Index assignment as a differentiable op: what ``x[index] = v`` computes.

    out = x with out[index] = v (v broadcast to the indexed shape)
    dL/dx = g with the overwritten positions zeroed (their old values are gone)
    dL/dv = g[index] summed back over the axes v was broadcast along

Tensor.__setitem__ writes ``out`` into x's memory and records this op in the graph
(tensor/inplace.py). With an integer-array index that names one position twice, the last
write wins in the forward, and each copy of v receives the gradient of that position.
"""
import math
import numbers

import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ._broadcast import shape_of, unbroadcast
from .indexing import _own_index, assign, split_index, take


class SetItem(Function):
    """out = x with v written at x[first][second];  dL/dx = g zeroed there,
    dL/dv = unbroadcast(g[first][second]). ``second`` is None for an index applied in one step;
    otherwise the index is one PyTorch applies in two (ops/indexing.py's split_index)."""

    @staticmethod
    def forward(ctx, x, v, first, second):
        # backward's own copy of index arrays (the caller may still write to them)
        ctx.first, ctx.second, ctx.v_shape = _own_index(ctx, first), _own_index(ctx, second), shape_of(v)
        out = x.copy()
        assign(out, first, second, v)
        return out

    @staticmethod
    def backward(ctx, g):
        nx, nv = ctx.needs_input_grad[:2]
        gx = gv = None
        if nx:
            gx = g.copy()
            assign(gx, ctx.first, ctx.second, 0)
        if nv:
            gv = unbroadcast(take(g, ctx.first, ctx.second), ctx.v_shape)
        return gx, gv, None, None


def setitem(x, index, value):
    """The out-of-place result of ``x[index] = value``; checks that value broadcasts to the
    indexed shape."""
    return setitem_split(x, *split_index(index, x.ndim), value)


def setitem_overlap(x, first, second, value):
    """How ``x[first][second] = value`` judges a value over x's memory, as PyTorch: through a basic
    index alone it is a copy_ into the view (copy_'s rule, "partial"), or a fill_ when the value is
    broadcast to the view (nothing to judge: an expanded value is read as it is); with index arrays
    or a mask it is index_put_ into the view the basic part selects (tensor/inplace_overlap.py)."""
    from ..tensor.inplace_overlap import index_put_overlap
    view = take(x._data, first, None)
    if second is None:
        if not isinstance(value, _op_function.Tensor):
            return "partial"
        shape = tuple(value.shape)
        while len(shape) > view.ndim and shape[0] == 1:
            shape = shape[1:]
        return "partial" if shape == tuple(view.shape) else None
    return index_put_overlap(view, second, value, "index assignment")


def write_indexed(memory, result, first, second):
    """Write into ``memory`` the positions of ``result`` that ``x[first][second] = value`` set."""
    assign(memory, first, second, take(result, first, second))


def setitem_split(x, first, second, value):
    """setitem with the index already split by ops/indexing.py's split_index."""
    Tensor = _op_function.Tensor
    if not isinstance(value, Tensor):
        value = _scalar_value(value, x)
    if second is None:
        index = first[0] if len(first) == 1 else first
    target = take(np.empty(x.shape, dtype=np.bool_) if x.device == "cpu" else x._data, first, second).shape
    if isinstance(value, Tensor):
        while value.ndim > len(target) and value.shape[0] == 1:   # PyTorch drops leading dims of length 1
            value = value.reshape(value.shape[1:])
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
    return SetItem.apply(x, value, index if second is None else first, second)


def _scalar_value(value, x):
    """A value that is not a Tensor must be a number that x's dtype holds (as PyTorch: no None or
    string, no value a signed integer or a float dtype would overflow on; a negative integer wraps
    around in an unsigned dtype, a float too large for float16 is inf). Returns the value to write."""
    if isinstance(value, (list, tuple, np.ndarray)) and np.asarray(value).dtype.kind in "biuf":
        return value      # (PyTorch refuses a sequence of numbers; minidl writes it, as NumPy does)
    if not isinstance(value, (numbers.Number, np.generic)) or isinstance(value, np.void):
        kind = type(value)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        raise TypeError(f"can't assign a {name} to a {x.type()}")
    dt = np.dtype(x._data.dtype)
    overflow = RuntimeError(f"value cannot be converted to type {x.dtype} without overflow")
    if isinstance(value, (complex, np.complexfloating)):
        if value.imag:
            raise overflow
        value = value.real
    if isinstance(value, (bool, np.bool_)) or dt.kind not in "iuf":
        return value
    if dt.kind in "iu":
        if isinstance(value, (float, np.floating)) and not math.isfinite(value):
            raise overflow
        info = np.iinfo(dt)
        if dt.kind == "u" and isinstance(value, (int, np.integer)) and -2 ** 63 <= value < 0:
            return int(value) % (int(info.max) + 1)
        if not info.min <= value <= info.max:
            raise overflow
        return value
    if math.isfinite(value) and abs(value) > float(np.finfo(dt).max):
        if dt.itemsize >= 4:
            raise overflow
        return math.copysign(math.inf, value)
    return value
