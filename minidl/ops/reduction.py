"""Reductions over one or more dims: sum, mean, var, max/min, and argmax (not differentiable).

The backward of a reduction spreads dL/dout back over the reduced axes: it reshapes g
to the ``keepdim`` shape so that it broadcasts against the input.
"""
import builtins

import numpy as np

from ..autograd import function as _function
from ..autograd.function import Function
from ..backends import namespace_of
from ._broadcast import normalize_dim, normalize_dims


def _keepdim_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _spread(g, shape, axes):
    """g (reduced over ``axes``) copied back over them to ``shape``.

    Written as an assignment into a fresh array rather than ``broadcast_to``: for small
    tensors NumPy's broadcast_to costs several microseconds of Python, and a fresh array is
    one the engine may hand to a leaf without copying it again."""
    out = namespace_of(g).empty(shape, dtype=g.dtype)
    out[...] = g.reshape(_keepdim_shape(shape, axes))
    return out


def _mean(x, axes, keepdim):
    if x.dtype.itemsize == 2 and type(x) is np.ndarray and x.dtype.kind in "fV":
        # float16/bfloat16 accumulated in float32 (the cuda reductions already do)
        return x.mean(axis=axes, dtype=np.float32, keepdims=keepdim).astype(x.dtype)
    if x.dtype.itemsize < 4:
        return x.mean(axis=axes, keepdims=keepdim)
    # sum / N is what x.mean computes, minus several microseconds of Python around it
    return x.sum(axis=axes, keepdims=keepdim) / _count(x.shape, axes)


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


class Sum(Function):
    """out = sum_i x_i over ``axes``;  dL/dx_i = g (the same for every summed element)."""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.shape, ctx.axes = x.shape, axes
        if x.dtype.itemsize == 2 and type(x) is np.ndarray and x.dtype.kind in "fV":
            # float16/bfloat16 summed in float32, as PyTorch (the cuda reductions already do)
            return x.sum(axis=axes, dtype=np.float32, keepdims=keepdim).astype(x.dtype)
        return x.sum(axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        return _spread(g, ctx.shape, ctx.axes), None, None


class Mean(Function):
    """out = (1/N) sum_i x_i;  dL/dx_i = g / N."""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.shape, ctx.axes = x.shape, axes
        return _mean(x, axes, keepdim)

    @staticmethod
    def backward(ctx, g):
        return _spread(g / _count(ctx.shape, ctx.axes), ctx.shape, ctx.axes), None, None


class Var(Function):
    """out = sum_i (x_i - m)**2 / (N - c), m the mean, c = 1 if unbiased else 0.

    dL/dx_i = g * 2 (x_i - m) / (N - c): the term through m vanishes because
    sum_i (x_i - m) = 0.
    """

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        ctx.dtype = x.dtype
        if x.dtype.itemsize == 2 and x.dtype.kind in "fV":   # float16/bfloat16: computed in float32
            x = x.astype(np.float32)
        d = x - _mean(x, axes, True)  # two passes: stable for large means
        denom = builtins.max(_count(x.shape, axes) - correction, 0)
        ctx.save_for_backward(d)
        ctx.axes, ctx.denom = axes, denom
        out = (d * d).sum(axis=axes, keepdims=keepdim) / denom
        return out if out.dtype == ctx.dtype else out.astype(ctx.dtype)

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        g = g.reshape(_keepdim_shape(d.shape, ctx.axes))
        dx = g * (2 / ctx.denom) * d
        return (dx if dx.dtype == ctx.dtype else dx.astype(ctx.dtype)), None, None, None


class Max(Function):
    """out = max_i x_i.  The gradient goes to the maximal elements, split evenly between
    ties (as torch.amax): dL/dx_i = g * [x_i == out] / (number of maxima)."""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        out = x.max(axis=axes, keepdims=True)
        ctx.save_for_backward(x == out)
        ctx.axes = axes
        return out if keepdim else out.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))

    @staticmethod
    def backward(ctx, g):
        (is_max,) = ctx.saved_tensors
        g = g.reshape(_keepdim_shape(is_max.shape, ctx.axes))
        return g * is_max / is_max.sum(axis=ctx.axes, keepdims=True), None, None


def sum(x, dim=None, keepdim=False):
    return Sum.apply(x, normalize_dims(dim, x.ndim, "sum"), keepdim)


def mean(x, dim=None, keepdim=False):
    if x.dtype.kind != "f":
        raise RuntimeError(f"mean: expected a floating point tensor, got dtype {x.dtype}")
    return Mean.apply(x, normalize_dims(dim, x.ndim, "mean"), keepdim)


def var(x, dim=None, unbiased=True, keepdim=False):
    if x.dtype.kind != "f":
        raise RuntimeError(f"var: expected a floating point tensor, got dtype {x.dtype}")
    return Var.apply(x, normalize_dims(dim, x.ndim, "var"), int(unbiased), keepdim)


def max(x, dim=None, keepdim=False):
    axes = normalize_dims(dim, x.ndim, "max")
    if x.numel() == 0:   # an empty tensor has a max along a dim of non-zero length (an empty result), as PyTorch
        if dim is None:
            raise RuntimeError(f"max: expected a non-empty tensor, or a dim to reduce, got shape {list(x.shape)}")
        for a in axes:
            if x.shape[a] == 0:
                raise IndexError(f"max: expected reduction dim {a} to have non-zero size, got shape {list(x.shape)}")
    return Max.apply(x, axes, keepdim)


def min(x, dim=None, keepdim=False):
    return -max(-x, dim, keepdim)


def argmax(x, dim=None, keepdim=False):
    Tensor = _function.Tensor
    data = x._data
    if dim is None:
        out = data.argmax()
        return Tensor._wrap(out.reshape((1,) * data.ndim) if keepdim else out, None, 0)
    dim = normalize_dim(dim, builtins.max(data.ndim, 1), "argmax")   # a 0-d tensor takes dim 0 or -1, as PyTorch
    if data.ndim == 0:
        return Tensor._wrap(data.reshape(1).argmax(axis=0), None, 0)
    return Tensor._wrap(data.argmax(axis=dim, keepdims=keepdim), None, 0)


def argmin(x, dim=None, keepdim=False):
    return argmax(-x.detach(), dim, keepdim)
