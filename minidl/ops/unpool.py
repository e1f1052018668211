"""F.max_unpool1d and F.max_unpool2d: the partial inverse of max pooling, as
``torch.nn.functional.max_unpool{1,2}d``.

The indices that max_pool returns with ``return_indices=True`` are flat positions h W + w in
each (n, c) plane of the pooled input. Unpooling writes each value back at its position in a
zero plane of the output size (OH, OW):

    y[n, c, idx[n, c, k]] = x[n, c, k],    y = 0 elsewhere

(where two values share a position the later one in the plane stays, as PyTorch's loop). The
map is linear in x and its adjoint is the gather at the same positions,

    dL/dx[n, c, k] = g[n, c, idx[n, c, k]],

which is also what PyTorch's backward computes (every value at a shared position gets the
gradient of that position). 1-D unpooling is 2-D unpooling of a width-1 image, as PyTorch.
The default output size along each axis is (in - 1) stride + kernel - 2 padding; an explicit
one (of 2 or 4 entries in 2-D) must lie strictly within a stride of it.
"""
import math

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.size import as_ints
from ..tensor.tensor import Tensor
from ._broadcast import int_pair
from .pooling1d import _one


class MaxUnpool2d(Function):
    """See the module docstring: a scatter of x to its indices forward, a gather backward."""

    @staticmethod
    def forward(ctx, x, idx, out_hw):
        xp = namespace_of(x)
        N, C = x.shape[:2]
        L = x.shape[2] * x.shape[3]
        size = out_hw[0] * out_hw[1]
        flat = idx.reshape(N * C, L)
        y = xp.zeros((N * C, size), dtype=x.dtype)
        if flat.size:
            xp.put_along_axis(y, flat, x.reshape(N * C, L), axis=1)
        ctx.save_for_backward(flat)
        ctx.in_shape = x.shape
        return y.reshape((N, C) + tuple(out_hw))

    @staticmethod
    def backward(ctx, g):
        (flat,) = ctx.saved_tensors
        xp = namespace_of(g)
        N, C = ctx.in_shape[:2]
        gm = g.reshape(N * C, g.shape[2] * g.shape[3])
        dx = xp.take_along_axis(gm, flat, axis=1) if flat.size else xp.zeros(flat.shape, dtype=g.dtype)
        return dx.reshape(ctx.in_shape), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        from .selection import TakeAlong
        (flat,) = ctx.saved_tensors
        N, C = ctx.in_shape[:2]
        dx = TakeAlong.apply(g.reshape(N * C, g.shape[2] * g.shape[3]), flat, 1, True)
        return dx.reshape(ctx.in_shape), None, None


def unpool_output_size(in_spatial, kernel_size, stride, padding, output_size):
    """PyTorch's _unpool_output_size: the default size, or the checked explicit one."""
    k = len(kernel_size)
    default = [(n - 1) * s + kk - 2 * p for n, kk, s, p in zip(in_spatial, kernel_size, stride, padding)]
    if output_size is None:
        out = default
    else:
        output_size = list(as_ints(list(output_size), "max_unpool", "output_size"))
        if len(output_size) == k + 2:
            output_size = output_size[2:]
        if len(output_size) != k:
            raise ValueError(f"output_size should be a sequence containing {k} or {k + 2} elements, but it has a "
                             f"length of '{len(output_size)}'")
        for d in range(k):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < output_size[d] < hi:
                raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {d} must be between {lo} and '
                                 f'{hi})')
        out = output_size
    for d in range(k):
        if out[d] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{d}]={out[d]}")
    return out


def check_unpool_inputs(input, indices, out, op):
    """PyTorch's checks of max_unpooling{2,3}d: ``input`` with a batch dim or without (out's rank
    + 1 or + 2 dims), int64 ``indices`` of input's shape, a floating input, and every index
    inside one output plane of size ``out``."""
    n = len(out)
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d Tensor, but got a tensor "
                           f"with {input.ndim} dimensions.")
    if not isinstance(indices, Tensor) or indices.dtype != np.int64:
        got = indices.dtype if isinstance(indices, Tensor) else type(indices).__name__
        raise RuntimeError(f"elements in indices should be type int64 but got: {got}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    if input.dtype.kind not in "fV":   # V: bfloat16
        raise NotImplementedError(f'"{op}" not implemented for {input.dtype}: expected a floating point input')
    data = indices._data
    if data.size:
        bad = (data < 0) | (data >= math.prod(out))
        if bool(bad.any()):
            first = int(data.reshape(-1)[int(bad.reshape(-1).argmax())])
            raise RuntimeError(f"Found an invalid max index: {first} (output volumes are of size "
                               f"{'x'.join(map(str, out))})")


def _unpool(input, indices, out_hw, op):
    """Checks as PyTorch's max_unpooling2d, then the op on a 4-D view."""
    check_unpool_inputs(input, indices, out_hw, op)
    x, i = (input, indices) if input.ndim == 4 else (input.unsqueeze(0), indices.unsqueeze(0))
    y = MaxUnpool2d.apply(x, i._data, tuple(out_hw))
    return y if input.ndim == 4 else y.squeeze(0)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """As ``torch.nn.functional.max_unpool2d``: ``indices`` as max_pool2d(..., return_indices=True)
    gives them; output_size (H, W) or (N, C, H, W) picks among the sizes a pooling could have come from."""
    if not isinstance(input, Tensor):
        raise TypeError(f"max_unpool2d(): argument 'input' must be a Tensor, got {type(input).__name__}")
    k = int_pair(kernel_size, "kernel_size", "max_unpool2d")
    s = int_pair(stride, "stride", "max_unpool2d") if stride is not None else k
    p = int_pair(padding, "padding", "max_unpool2d")
    out = unpool_output_size(input.shape[-2:], k, s, p, output_size)
    return _unpool(input, indices, out, "max_unpool2d")


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """As ``torch.nn.functional.max_unpool1d`` (2-D unpooling of a width-1 image)."""
    op = "max_unpool1d"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, got {type(input).__name__}")
    k = _one(kernel_size, "kernel_size", op)
    s = _one(stride, "stride", op)
    p = _one(padding, "padding", op)
    out = unpool_output_size(input.shape[-1:], (k,), (k if s is None else s,), (p,), output_size)
    if not isinstance(indices, Tensor):
        raise RuntimeError(f"elements in indices should be type int64 but got: {type(indices).__name__}")
    return _unpool(input.unsqueeze(-1), indices.unsqueeze(-1), (out[0], 1), op).squeeze(-1)
