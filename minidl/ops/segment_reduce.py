"""Segment reduction, as torch.segment_reduce: ``data`` cut along ``axis`` into consecutive
segments of the given lengths, each reduced to one slice.

For a segment x_1 .. x_L (each a slice of ``data`` across ``axis``) and the optional
``initial`` value c, the output y and the gradient dL/dx_j given g = dL/dy are

    sum    y = c + sum_j x_j                   dx_j = g
    mean   y = (c + sum_j x_j) / L             dx_j = g / L
    prod   y = c prod_j x_j                    dx_j = g c prod_{k != j} x_k
    max    y = max(c, max_j x_j)               dx_j = g [x_j = y] / #{k : x_k = y}
    min    likewise with the minimum

(c is 0 for sum and mean, 1 for prod, -inf for max and +inf for min when not given). The
product of the others is taken from prefix and suffix products, so a zero in the segment needs
no division; ties at the maximum share the gradient equally, as PyTorch's. An empty segment
gives c, or for mean without ``initial`` NaN, and passes no gradient.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import device_of
from ..tensor.tensor import Tensor

REDUCTIONS = ("sum", "mean", "prod", "max", "min")
_EMPTY = {"sum": 0.0, "mean": np.nan, "prod": 1.0, "max": -np.inf, "min": np.inf}


def _segment_forward(seg, reduce, initial):
    """The reduction of one segment (L, *rest) -> (*rest)."""
    L = seg.shape[0]
    if L == 0:
        fill = _EMPTY[reduce] if initial is None else initial
        return np.full(seg.shape[1:], fill, seg.dtype)
    if reduce in ("sum", "mean"):
        y = seg.sum(0) + (0 if initial is None else initial)
        return y / L if reduce == "mean" else y
    if reduce == "prod":
        y = seg.prod(0)
        return y if initial is None else y * initial
    y = seg.max(0) if reduce == "max" else seg.min(0)
    if initial is not None:
        y = np.maximum(y, initial) if reduce == "max" else np.minimum(y, initial)
    return y


def _segment_backward(seg, y, g, reduce, initial):
    """dL/dseg (L, *rest) from the segment, its output and the output's gradient."""
    L = seg.shape[0]
    if L == 0:
        return np.zeros_like(seg)
    if reduce == "sum":
        return np.broadcast_to(g, seg.shape).copy()
    if reduce == "mean":
        return np.broadcast_to(g / L, seg.shape).copy()
    if reduce == "prod":
        ones = np.ones((1,) + seg.shape[1:], seg.dtype)
        before = np.cumprod(np.concatenate([ones, seg[:-1]]), axis=0)                   # prod_{k < j}
        after = np.cumprod(np.concatenate([ones, seg[:0:-1]]), axis=0)[::-1]            # prod_{k > j}
        others = before * after
        return g * (others if initial is None else others * initial)
    hit = seg == y
    count = hit.sum(0)
    return np.where(hit, g / np.maximum(count, 1), 0).astype(seg.dtype)


class SegmentReduce(Function):
    """Arguments: data, lengths (int array data.shape[:axis] + (S,)), reduce, axis, initial;
    see the module docstring for the math."""

    @staticmethod
    def forward(ctx, data, lengths, reduce, axis, initial):
        lead = data.shape[:axis]
        out = np.empty(lead + (lengths.shape[-1],) + data.shape[axis + 1:], data.dtype)
        starts = np.cumsum(lengths, axis=-1) - lengths
        for i in np.ndindex(*lead):
            for s in range(lengths.shape[-1]):
                a = starts[i + (s,)]
                out[i + (s,)] = _segment_forward(data[i][a:a + lengths[i + (s,)]], reduce, initial)
        ctx.save_for_backward(data, out)
        ctx.lengths, ctx.starts, ctx.reduce, ctx.initial = lengths, starts, reduce, initial
        return out

    @staticmethod
    def backward(ctx, g):
        data, out = ctx.saved_tensors
        lengths, starts = ctx.lengths, ctx.starts
        grad = np.zeros_like(data)
        for i in np.ndindex(*lengths.shape[:-1]):
            for s in range(lengths.shape[-1]):
                a, n = starts[i + (s,)], lengths[i + (s,)]
                grad[i][a:a + n] = _segment_backward(data[i][a:a + n], out[i + (s,)], g[i + (s,)], ctx.reduce,
                                                     ctx.initial)
        return grad, None, None, None, None


def _int_array(name, t):
    a = t.numpy(force=True) if isinstance(t, Tensor) else np.asarray(t)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"segment_reduce(): expected {name} to be an integer tensor, got dtype {a.dtype}")
    return a.astype(np.int64)


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """Reduce the segments of ``data`` along ``axis`` given by ``lengths`` (shape
    data.shape[:axis] + (S,)) or by ``offsets`` (their S + 1 boundaries); ``reduce`` is one of
    "sum", "mean", "prod", "max" ("amax"), "min" ("amin"). The result has S in place of the
    axis. Differentiable in ``data``; see the module docstring."""
    if not isinstance(data, Tensor):
        raise TypeError(f"segment_reduce(): argument 'data' must be Tensor, not {type(data).__name__}")
    name = {"amax": "max", "amin": "min"}.get(reduce, reduce)
    if name not in REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if device_of(data._data) != "cpu":
        raise NotImplementedError(f"segment_reduce: only CPU tensors are supported, got data on {data.device}")
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined")
    axis = axis + data.ndim if axis < 0 else axis
    if not 0 <= axis < max(data.ndim, 1):
        raise IndexError(f"segment_reduce(): axis {axis} is out of range for a {data.ndim}-D data tensor")
    if lengths is not None:
        lens = _int_array("lengths", lengths)
        what = "lengths"
    else:
        off = _int_array("offsets", offsets)
        if off.ndim == 0 or off.shape[-1] == 0:
            raise RuntimeError("segment_reduce(): offsets must have at least one boundary")
        lens = np.diff(off, axis=-1)
        what = "offsets"
    if lens.ndim != axis + 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of {what} but got {axis}.")
    if lens.shape[:-1] != data.shape[:axis]:
        raise RuntimeError(f"segment_reduce(): {what} of shape {list(lens.shape)} must have data's leading "
                           f"dims {list(data.shape[:axis])} before the segment dim")
    if (lens < 0).any():
        raise RuntimeError(f"segment_reduce(): {what} must describe segments of non-negative length")
    if not unsafe and (lens.sum(-1) != data.shape[axis]).any():
        raise RuntimeError(f"segment_reduce(): Expected all rows of lengths along axis to sum to data.size({axis}) "
                           f"= {data.shape[axis]} when !unsafe.")
    return SegmentReduce.apply(data, lens, name, axis, None if initial is None else float(initial))
