"""F.fractional_max_pool3d: fractional max pooling over (N, C, T, H, W) volumes, as
``torch.nn.functional.fractional_max_pool3d`` (the 2-D op, ``fractional_pool.py``, with one more axis).

Each (n, c) volume draws three numbers in [0, 1) (``_random_samples[n, c]`` = (u_t, u_h, u_w),
in that order, unlike the 2-D op's (u_w, u_h)); along each axis the window starts are the 2-D
op's ``window_starts`` of that axis's sample. Output (i, j, l) is the max over the
k_t x k_h x k_w window at (start_t[i], start_h[j], start_w[l]) and its index the flat position
t H W + h W + w of the max in the volume (the first maximum, or the last NaN, as PyTorch's
``v > max || isnan(v)``). The max is a selection, so

    dL/dx[p] = sum of g over the outputs whose index is p          (a scatter-add)

which is max_pool3d's backward (``scatter_to_argmax``). PyTorch requires each window to leave
room: output + kernel - 1 < input along every axis (strictly, unlike the 2-D op's <=).
"""
import numbers

import numpy as np

from .. import backends
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.tensor import Tensor
from .conv3d import int_triple
from .fractional_pool import as_batch, pool, window_max, window_starts
from .pooling3d import scatter_to_argmax

_AXES = ("time", "height", "width")


class FractionalMaxPool3d(Function):
    """See the module docstring. Returns the values and the flat t H W + h W + w indices."""

    @staticmethod
    def forward(ctx, x, samples, kernel, out_size):
        xp = namespace_of(x)
        N, C, T, H, W = x.shape
        host = backends.get(backends.device_of(samples)).to_host(samples)    # the starts are index arithmetic
        st, sh, sw = (window_starts(host[:N, :, a], n, o, k, x.dtype)         # (N, C, o) per axis
                      for a, n, o, k in zip(range(3), (T, H, W), out_size, kernel))
        dt, dh, dw = (a.reshape(-1) for a in np.indices(kernel))               # window offsets, t-major
        pos = ((st[:, :, :, None, None, None] + dt) * H + (sh[:, :, None, :, None, None] + dh)) * W \
            + (sw[:, :, None, None, :, None] + dw)                              # (N, C, ot, oh, ow, K)
        out, idx = window_max(x, xp.asarray(pos))
        ctx.save_for_backward(idx)
        ctx.size = (T, H, W)
        return out, idx

    @staticmethod
    def backward(ctx, g, _gidx):
        (idx,) = ctx.saved_tensors
        return scatter_to_argmax(g, idx, ctx.size), None, None, None


def _output_size(input, output_size, output_ratio, op):
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
    if output_size is not None:
        return int_triple(output_size, "output_size", op)
    ratio = (output_ratio,) * 3 if isinstance(output_ratio, numbers.Real) else tuple(output_ratio)
    if len(ratio) == 1:
        ratio = ratio * 3
    if len(ratio) != 3:
        raise ValueError(f"{op} requires output_ratio to be a single number or a tuple of three, got {output_ratio!r}")
    return tuple(int(n * r) for n, r in zip(input.shape[-3:], ratio))


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """As ``torch.nn.functional.fractional_max_pool3d_with_indices``: (out, indices)."""
    op = "fractional_max_pool3d"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, got {type(input).__name__}")
    if input.ndim not in (4, 5):
        raise RuntimeError(f"{op}_out(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    if isinstance(kernel_size, (tuple, list)) and len(kernel_size) not in (1, 3):
        raise RuntimeError(f"{op}: kernel_size must either be a single Int or tuple of three Ints")
    kernel = int_triple(kernel_size, "kernel_size", op)
    out = _output_size(input, output_size, output_ratio, op)
    x = as_batch(input, 3, op, f"{op}_out()")
    if min(kernel) < 1 or min(out) < 0:
        raise RuntimeError(f"{op}(): expected a positive kernel_size and a non-negative output_size, got "
                           f"kernel_size={kernel}, output_size={out}")
    for axis, o, k, n in zip(_AXES, out, kernel, x.shape[2:]):
        if not o + k - 1 < n:
            raise RuntimeError(f"{op}_out(): pool {axis} {k} too large relative to input {axis} {n}")
    return pool(FractionalMaxPool3d, input, x, _random_samples, kernel, out, op)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """As ``torch.nn.functional.fractional_max_pool3d``: the pooled values, and the indices
    (for max_unpool3d) with ``return_indices``. See the module docstring."""
    out, idx = fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio, return_indices,
                                                  _random_samples)
    return (out, idx) if return_indices else out
