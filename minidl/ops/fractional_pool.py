"""F.fractional_max_pool2d: max pooling with pseudo-random window starts (Graham, "Fractional
Max-Pooling", 2014), as ``torch.nn.functional.fractional_max_pool2d``.

Each (n, c) plane draws two numbers u_w, u_h in [0, 1) (``_random_samples[n, c]``, uniform
unless given). Along an axis of input size S, output size O and window k, the window starts

    a = (S - k) / (O - 1)
    start[i] = int((i + u) a) - int(u a)     for i < O - 1,     start[O - 1] = S - k

(computed in the input's dtype, as PyTorch, so that the same samples give the same windows);
the steps between starts are floor(a) or ceil(a), in a pseudo-random order. Output (i, j) is
the max over the k_h x k_w window at (start_h[i], start_w[j]), and its index is the flat
position h W + w of the max in the plane (the first maximum; a NaN wins, the last one, as
PyTorch's comparison ``v > max || isnan(v)``). Like max pooling, it is a selection:

    dL/dx[p] = sum of g over the outputs whose index is p          (a scatter-add)
"""
import numbers

import numpy as np

from .. import backends
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.tensor import Tensor
from ._broadcast import int_pair
from .pooling import max_pool2d_backward_reference


def window_starts(samples, size, out, k, dtype):
    """The starts (…, out) of the windows along one axis for the samples u (…) (module docstring)."""
    u = np.asarray(samples, dtype=dtype)[..., None]
    starts = np.empty(u.shape[:-1] + (out,), dtype=np.int64)
    if out > 1:
        alpha = dtype.type(size - k) / dtype.type(out - 1)
        i = np.arange(out - 1).astype(dtype)
        starts[..., :-1] = ((i + u) * alpha).astype(np.int64) - (u * alpha).astype(np.int64)
    if out > 0:
        starts[..., -1] = size - k
    return starts


def window_max(x, pos):
    """The max over each window and its flat index: ``pos`` (N, C, ..., K) holds the flat positions of
    the K entries of each window in the (N, C, S) planes of ``x``; the first maximum wins, or the last
    NaN (PyTorch's ``v > max || isnan(v)``)."""
    xp = namespace_of(x)
    N, C = x.shape[:2]
    v = xp.take_along_axis(x.reshape(N, C, -1), pos.reshape(N, C, -1), axis=2).reshape(pos.shape)
    nan = v != v
    last_nan = pos.shape[-1] - 1 - nan[..., ::-1].argmax(axis=-1)
    k = xp.where(nan.any(axis=-1), last_nan, v.argmax(axis=-1))
    return xp.take_along_axis(v, k[..., None], axis=-1)[..., 0], xp.take_along_axis(pos, k[..., None], axis=-1)[..., 0]


class FractionalMaxPool2d(Function):
    """See the module docstring. Returns the values and the flat h W + w indices."""

    @staticmethod
    def forward(ctx, x, samples, kernel, out_hw):
        xp = namespace_of(x)
        N, C, H, W = x.shape
        (kh, kw), (oh, ow) = kernel, out_hw
        host = backends.get(backends.device_of(samples)).to_host(samples)   # the starts are index arithmetic
        rows = window_starts(host[:N, :, 1], H, oh, kh, x.dtype)          # (N, C, oh)
        cols = window_starts(host[:N, :, 0], W, ow, kw, x.dtype)          # (N, C, ow)
        di, dj = np.divmod(np.arange(kh * kw), kw)
        pos = xp.asarray((rows[:, :, :, None, None] + di) * W + (cols[:, :, None, :, None] + dj))  # (N, C, oh, ow, K)
        out, idx = window_max(x, pos)
        ctx.save_for_backward(idx)
        ctx.hw = (H, W)
        return out, idx

    @staticmethod
    def backward(ctx, g, _gidx):
        (idx,) = ctx.saved_tensors
        return max_pool2d_backward_reference(g, idx, *ctx.hw), None, None, None


def _output_size(input, output_size, output_ratio):
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool2d requires specifying either an output_size or an output_ratio")
    if output_size is None:
        if isinstance(output_ratio, numbers.Real):
            output_ratio = (output_ratio, output_ratio)
        if len(output_ratio) > 2:
            raise ValueError("fractional_max_pool2d requires output_ratio to either be a single Int or tuple of Ints.")
        if len(output_ratio) == 1:
            output_ratio = (output_ratio[0], output_ratio[0])
        return int(input.shape[-2] * output_ratio[0]), int(input.shape[-1] * output_ratio[1])
    return int_pair(output_size, "output_size", "fractional_max_pool2d")


def random_samples(_random_samples, input, N, C, n_axes, op):
    """The (N, C, n_axes) samples in [0, 1): drawn when None, else the given ones, checked (PyTorch's
    messages)."""
    if _random_samples is None:
        from ..tensor.factories import rand
        return rand(N, C, n_axes, dtype=input.dtype, device=input.device)
    samples = _random_samples
    if not isinstance(samples, Tensor) or samples.ndim != 3:
        raise RuntimeError(f"{op}(): expected _random_samples to be a 3-D tensor (N, C, {n_axes}), got "
                           f"{list(getattr(samples, 'shape', [])) or type(samples).__name__}")
    if samples.dtype != input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    if samples.shape[0] < N:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != C:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != n_axes:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {n_axes}; got {samples.shape[2]}.")
    return samples


def as_batch(input, spatial, op, call):
    """``input`` as a batch (N, C, *spatial dims) (an unbatched one gets N = 1), checked to be of a
    floating dtype with no empty non-batch dimension (``call`` names the op in PyTorch's message)."""
    if input.dtype.kind != "f":
        raise NotImplementedError(f"{op}: expected a floating point input, got {input.dtype}")
    x = input if input.ndim == spatial + 2 else input.unsqueeze(0)
    for d in range(1, spatial + 2):
        if x.shape[d] == 0:
            raise RuntimeError(f"{call}: Expected input to have non-zero size for non-batch dimensions, but got"
                               f"{list(input.shape)} with dimension {d - (input.ndim == spatial + 1)} being empty.")
    return x


def pool(function, input, x, _random_samples, kernel, out_size, op):
    """``function.apply`` to the batch ``x`` of ``input`` (the values and indices; the caller gets a copy of
    the indices that backward's scatter reads), or empty results when there is no output; unbatched
    again when ``input`` is."""
    N, C = x.shape[:2]
    samples = random_samples(_random_samples, input, N, C, len(kernel), op)
    if 0 in (N,) + tuple(out_size):
        xp = namespace_of(x._data)
        out = Tensor._wrap(xp.zeros((N, C) + tuple(out_size), dtype=x._data.dtype), None, 0)
        idx = Tensor._wrap(xp.zeros((N, C) + tuple(out_size), dtype=np.int64), None, 0)
    else:
        out, idx = function.apply(x, samples._data, kernel, out_size)
        idx = idx.clone() if idx.grad_fn is not None else idx
    if input.ndim < x.ndim:
        out, idx = out.squeeze(0), idx.squeeze(0)
    return out, idx


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """As ``torch.nn.functional.fractional_max_pool2d_with_indices``: (out, indices)."""
    op = "fractional_max_pool2d"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, got {type(input).__name__}")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{op}(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    oh, ow = _output_size(input, output_size, output_ratio)
    if isinstance(kernel_size, (tuple, list)) and len(kernel_size) not in (1, 2):
        raise RuntimeError(f"{op}: kernel_size must either be a single Int or tuple of Ints")
    kh, kw = int_pair(kernel_size if not isinstance(kernel_size, (tuple, list)) or len(kernel_size) == 2
                      else kernel_size[0], "kernel_size", op)
    x = as_batch(input, 2, op, f"{op}()")
    H, W = x.shape[2:]
    if min(kh, kw) < 1 or min(oh, ow) < 0:
        raise RuntimeError(f"{op}(): expected a positive kernel_size and a non-negative output_size, got "
                           f"kernel_size={(kh, kw)}, output_size={(oh, ow)}")
    if oh + kh - 1 > H:
        raise RuntimeError(f"{op}(): pool height {kh} too large relative to input height {H}")
    if ow + kw - 1 > W:
        raise RuntimeError(f"{op}(): pool width {kw} too large relative to input width {W}")
    return pool(FractionalMaxPool2d, input, x, _random_samples, (kh, kw), (oh, ow), op)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """As ``torch.nn.functional.fractional_max_pool2d``: the pooled values, and the indices
    (for max_unpool2d) with ``return_indices``. See the module docstring."""
    out, idx = fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio, return_indices,
                                                  _random_samples)
    return (out, idx) if return_indices else out
