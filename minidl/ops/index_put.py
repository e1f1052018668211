"""index_put: ``x[indices] = values`` (or ``+=`` with accumulate) for a tuple of index tensors,
as torch.index_put.

``indices`` holds one tensor per leading dim of x (long or int positions, broadcast together;
a bool or byte mask stands for the positions of its true elements over as many dims as it
has); the dims after them are taken whole. With I the indexed positions and g = dL/dout:

- ``accumulate=False``: out = x with out[I] = values (ops/setitem.py's SetItem; of a position
  named twice, one write lands)
      dL/dx = g zeroed at I,   dL/dvalues = g[I] summed back to values' shape
- ``accumulate=True``: out = x with values added at I, a position named twice getting both
      dL/dx = g,               dL/dvalues = g[I] summed back to values' shape
"""
import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import legacy_type_name
from ._broadcast import shape_of, unbroadcast
from .indexing import _own_index
from .setitem import SetItem
from ._higher_order import sum_to


class IndexPutAccumulate(Function):
    """out = x with values added at index (repeats add up);
    dL/dx = g,  dL/dvalues = unbroadcast(g[index])."""

    @staticmethod
    def forward(ctx, x, values, index):
        ctx.index, ctx.v_shape = _own_index(ctx, index), shape_of(values)
        out = x.copy()
        xp = namespace_of(x)
        xp.add.at(out, index, xp.broadcast_to(values, out[index].shape) if np.ndim(values) else values)
        return out

    @staticmethod
    def backward(ctx, g):
        nx, nv = ctx.needs_input_grad[:2]
        return (g if nx else None), (unbroadcast(g[ctx.index], ctx.v_shape) if nv else None), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        nx, nv = ctx.needs_input_grad[:2]
        return (g if nx else None), (sum_to(g[ctx.index], ctx.v_shape) if nv else None), None


def _type_name(dtype):
    return legacy_type_name(dtype).replace("Tensor", "")


def index_arrays(op, input, indices):
    """The index tensors as a tuple of int64 position arrays (masks turned into the positions
    of their true elements), each checked against its dim."""
    Tensor = _op_function.Tensor
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}(): argument 'indices' must be tuple of Tensors, not {type(indices).__name__}")
    out, dim = [], 0
    for k, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 1, but got {type(t).__name__}")
        a = np.asarray(t.numpy(force=True))     # positions live on the host; a device's indexing takes them there
        if a.dtype not in (np.int64, np.int32, np.uint8, np.bool_):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if a.dtype in (np.uint8, np.bool_):
            shape = tuple(input.shape[dim:dim + a.ndim])
            if tuple(a.shape) != shape:
                raise IndexError(f"The shape of the mask {list(a.shape)} at index {dim} does not match the shape of "
                                 f"the indexed tensor {list(input.shape)} at index {dim}")
            out.extend(p.astype(np.int64) for p in np.nonzero(a.astype(bool)))
            dim += a.ndim
            continue
        if dim >= input.ndim:
            dim += 1
            break
        n = input.shape[dim]
        bad = (a < -n) | (a >= n)
        if bad.any():
            raise IndexError(f"index {int(a[bad].reshape(-1)[0])} is out of bounds for dimension {dim} with size {n}")
        out.append(a.astype(np.int64))
        dim += 1
    if dim > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim} (got {len(indices)})")
    if not out and not indices:
        raise RuntimeError(f"{op}(): expected at least one index tensor, got an empty tuple")
    return tuple(out)


def index_put(input, indices, values, accumulate=False):
    """``input`` with ``values`` written (added, with ``accumulate``) at ``indices`` (a tuple of
    index tensors, see the module docstring); differentiable in input and values."""
    Tensor = _op_function.Tensor
    op = "index_put"
    if not isinstance(values, Tensor):
        raise TypeError(f"{op}(): argument 'values' must be Tensor, not {type(values).__name__}")
    if values.dtype != input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_type_name(input.dtype)} for the destination and {_type_name(values.dtype)} for the "
                           "source.")
    if values.device != input.device:
        raise RuntimeError(f"{op}: expected values on the device of self ({input.device}), got {values.device}")
    index = index_arrays(op, input, indices)
    try:
        target = np.empty(input.shape, dtype=np.bool_)[index].shape
    except IndexError as e:      # index tensors that do not broadcast together
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together ({e})") from None
    try:
        ok = np.broadcast_shapes(tuple(values.shape), target) == target
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to "
                           f"indexing result of shape {list(target)}")
    if accumulate:
        return IndexPutAccumulate.apply(input, values, index)
    return SetItem.apply(input, values, index, None)
