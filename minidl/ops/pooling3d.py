"""3-D pooling over (N, C, D, H, W) volumes: max, average, adaptive average and adaptive max,
with PyTorch's window geometry and signatures (``minidl.ops.pooling`` has the 2-D ops; this is
the same math with one more axis).

Window (od, oh, ow) covers voxels (od*sd - pd + a*dd, oh*sh - ph + i*dh, ow*sw - pw + j*dw) for
kernel offsets a < kd, i < kh, j < kw.

max_pool3d:  out = max over the window's voxels inside the input. The max is a selection, so
    dL/dx[v] = sum of g[o] over the windows o whose argmax is v      (a scatter-add)
    The argmax is PyTorch's: the first maximum in window order, or the last NaN if the window
    holds one (a NaN wins every comparison there); a window whose voxels are all -inf points at its
    first voxel inside, and one with no voxel inside (a dilated window stepping over the input)
    gets index -1 and sends no gradient. Indices are flat d*H*W + h*W + w positions in each volume.

avg_pool3d:  out = (sum over the window's voxels inside the input) / divisor, the divisor being
    the window's volume clipped to the padded input (count_include_pad=True, the default), the
    number of voxels inside (False), or ``divisor_override``; both are products of one factor
    per axis.
    dL/dx[v] = sum of g[o] / divisor[o] over the windows o containing v.

adaptive_avg_pool3d: bin i of an output of size O over an input of size S spans
    [floor(i*S/O), ceil((i+1)*S/O)). The mean over a box of bins is separable: the mean along
    D of the means along H of the means along W, each a small averaging map whose transpose
    (each bin's g / bin length spread over the bin) is the backward, taken in reverse order.

adaptive_max_pool3d: the max over each box of bins (boxes may overlap), with PyTorch's argmax;
    dL/dx[v] = sum of g[o] over the boxes o whose argmax is v.

The NumPy references below are the implementation on the CPU (there are no Numba kernels for
the 3-D pools); CUDA tensors raise NotImplementedError.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.allocation import check_allocation
from ..tensor.dtype import is_floating
from ..tensor.tensor import Tensor
from .adaptive_max_pool import _output_size, adaptive_windows
from .conv3d import check_on_cpu, int_triple
from .low_precision import float32_compute
from ._higher_order import constant, scatter_to_indices
from .pooling import (_bin_means, _bin_spread, _divisor, _first_inside, _reach, bin_spread, pool_output_size,
                      uniform_transposed_conv)
from .shape_error import ShapeError


def _windows(xpad, k, s, d, out):
    """The kd*kh*kw strided views xpad[:, :, a*dd + sd*od, i*dh + sh*oh, j*dw + sw*ow], in window order."""
    (kd, kh, kw), (sd, sh, sw), (dd, dh, dw), (OD, OH, OW) = k, s, d, out
    return [xpad[:, :, a * dd: a * dd + sd * (OD - 1) + 1: sd, i * dh: i * dh + sh * (OH - 1) + 1: sh,
                 j * dw: j * dw + sw * (OW - 1) + 1: sw]
            for a in range(kd) for i in range(kh) for j in range(kw)]


def _pad(x, k, s, p, d, out, value):
    """x padded by p at the start of each axis and enough at the end for every window."""
    end = [max((o - 1) * s_ + d_ * (k_ - 1) + 1 - n - p_, 0)
           for o, s_, d_, k_, n, p_ in zip(out, s, d, k, x.shape[2:], p)]
    return namespace_of(x).pad(x, ((0, 0), (0, 0)) + tuple(zip(p, end)), constant_values=value)


def torch_argmax(stack, axis=0):
    """PyTorch's pooling argmax along ``axis``: the first maximum, but the last NaN where there is
    one (its kernels take a value when ``val > max or isnan(val)``)."""
    first = stack.argmax(axis=axis)
    nan = stack != stack
    if not nan.any():
        return first
    last_nan = stack.shape[axis] - 1 - namespace_of(stack).flip(nan, axis=axis).argmax(axis=axis)
    return namespace_of(stack).where(nan.any(axis=axis), last_nan, first)


def max_pool3d_forward_reference(x, k, s, p, d, out):
    """(out, idx): the window maxima and their flat d*H*W + h*W + w indices (see the module docstring)."""
    xp = namespace_of(x)
    size = x.shape[2:]
    reach = tuple(_reach(k_, d_, n, p_) for k_, d_, n, p_ in zip(k, d, size, p))   # offsets that can land inside
    # no max is below it (bfloat16, which NumPy files under kind "V", has an -inf as the other floats)
    lowest = -xp.inf if is_floating(x.dtype) or x.dtype.kind == "c" else np.iinfo(x.dtype).min
    stack = xp.stack(_windows(_pad(x, reach, s, p, d, out, lowest), reach, s, d, out))
    kk = torch_argmax(stack)
    y = xp.take_along_axis(stack, kk[None], axis=0)[0]
    offsets = np.unravel_index(kk, reach)
    pos = [xp.arange(o).reshape(shape) * s_ - p_ + off * d_
           for o, shape, s_, p_, off, d_ in zip(out, ((-1, 1, 1), (1, -1, 1), (1, 1, -1)), s, p, offsets, d)]
    inside = np.logical_and.reduce([(q >= 0) & (q < n) for q, n in zip(pos, size)])
    D, H, W = size
    firsts = [_first_inside(o, s_, p_, d_, r, n) for o, s_, p_, d_, r, n in zip(out, s, p, d, reach, size)]
    fd, fh, fw = firsts[0][:, None, None], firsts[1][None, :, None], firsts[2][None, None, :]
    first = np.where((fd < 0) | (fh < 0) | (fw < 0), -1, (fd * H + fh) * W + fw)
    idx = xp.where(inside, (pos[0] * H + pos[1]) * W + pos[2], xp.asarray(first)).astype(np.int64)
    return y, idx


def scatter_to_argmax(g, idx, size):
    """dx (N, C, *size): each g added at its flat index in its (n, c) volume; index -1 sends nothing."""
    xp = namespace_of(g)
    N, C = g.shape[:2]
    L = int(np.prod(g.shape[2:]))
    dx = xp.zeros((N * C, int(np.prod(size))), dtype=g.dtype)
    valid = idx >= 0
    rows = xp.arange(N * C).reshape(N * C, 1)
    xp.add.at(dx, (rows, xp.where(valid, idx, 0).reshape(N * C, L)), xp.where(valid, g, 0).reshape(N * C, L))
    return dx.reshape((N, C) + tuple(size))


def avg_pool3d_divisor(size, k, s, p, out, count_include_pad, divisor_override):
    """(OD, OH, OW) divisors: the product of the per-axis window lengths (see the module docstring)."""
    if divisor_override:
        return np.full(tuple(out), divisor_override)
    fd, fh, fw = (_divisor(o, s_, p_, k_, n, count_include_pad, np) for o, s_, p_, k_, n in zip(out, s, p, k, size))
    return fd[:, None, None] * fh[None, :, None] * fw[None, None, :]


def avg_pool3d_forward_reference(x, k, s, p, out, count_include_pad, divisor_override):
    xp = namespace_of(x)
    size, ones = x.shape[2:], (1, 1, 1)
    reach = tuple(_reach(k_, 1, n, p_) for k_, n, p_ in zip(k, size, p))
    total = sum(_windows(_pad(x, reach, s, p, ones, out, 0), reach, s, ones, out))
    div = avg_pool3d_divisor(size, k, s, p, out, count_include_pad, divisor_override)
    return (total / xp.asarray(np.maximum(div, 1))).astype(x.dtype, copy=False)


def avg_pool3d_backward_reference(g, size, k, s, p, count_include_pad, divisor_override):
    xp = namespace_of(g)
    out, ones = g.shape[2:], (1, 1, 1)
    div = avg_pool3d_divisor(size, k, s, p, out, count_include_pad, divisor_override)
    v = (g / xp.asarray(np.maximum(div, 1))).astype(g.dtype, copy=False)
    reach = tuple(_reach(k_, 1, n, p_) for k_, n, p_ in zip(k, size, p))
    dxpad = _pad(xp.zeros(g.shape[:2] + tuple(size), dtype=g.dtype), reach, s, p, ones, out, 0)
    for view in _windows(dxpad, reach, s, ones, out):
        view += v
    return dxpad[(slice(None), slice(None)) + tuple(slice(p_, p_ + n) for p_, n in zip(p, size))]


class MaxPool3d(Function):
    """Max pooling; returns (out, indices). See the module docstring."""

    @staticmethod
    def forward(ctx, x, k, s, p, d, out):
        y, idx = max_pool3d_forward_reference(x, k, s, p, d, out)
        ctx.save_for_backward(idx)
        ctx.size = x.shape[2:]
        return y, idx

    @staticmethod
    def backward(ctx, g, _gidx):
        (idx,) = ctx.saved_tensors
        return scatter_to_argmax(g, idx, ctx.size), None, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g, _gidx):
        (idx,) = ctx.saved_tensors
        return scatter_to_indices(g, idx, ctx.size), None, None, None, None, None


@float32_compute   # float16/bfloat16 inputs: float32 sums, one rounding (low_precision.py)
class AvgPool3d(Function):
    """Average pooling. See the module docstring."""

    @staticmethod
    def forward(ctx, x, k, s, p, out, count_include_pad, divisor_override):
        ctx.args = (x.shape[2:], k, s, p, count_include_pad, divisor_override)
        return avg_pool3d_forward_reference(x, k, s, p, out, count_include_pad, divisor_override)

    @staticmethod
    def backward(ctx, g):
        return avg_pool3d_backward_reference(g, *ctx.args), None, None, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        # as AvgPool2d's: g / divisor through a transposed convolution with a ones kernel
        size, k, s, p, count_include_pad, divisor_override = ctx.args
        div = avg_pool3d_divisor(size, k, s, p, g.shape[2:], count_include_pad, divisor_override)
        v = g / constant(namespace_of(g._data).asarray(np.maximum(div, 1), dtype=g.dtype))
        return uniform_transposed_conv(v, k, s, p, size), None, None, None, None, None, None


@float32_compute   # float16/bfloat16 inputs: float32 sums, one rounding (low_precision.py)
class AdaptiveAvgPool3d(Function):
    """out = the mean over each box of bins, one axis at a time; backward spreads each g over its
    box, the axes in reverse order (the module docstring)."""

    @staticmethod
    def forward(ctx, x, output_size):
        ctx.size = x.shape[2:]
        if tuple(output_size) == (1, 1, 1):
            return x.mean(axis=(2, 3, 4), keepdims=True)
        y = x
        for axis, o in zip((4, 3, 2), output_size[::-1]):
            y = _bin_means(y, axis, o)
        return y.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        dx = g
        for axis, n in zip((2, 3, 4), ctx.size):
            dx = _bin_spread(dx, axis, n)
        return dx.astype(g.dtype, copy=False), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        dx = g
        for axis, n in zip((2, 3, 4), ctx.size):
            dx = bin_spread(dx, axis, n)
        return dx, None


class AdaptiveMaxPool3d(Function):
    """The max over each box of bins with PyTorch's argmax; returns (out, flat indices)."""

    @staticmethod
    def forward(ctx, x, output_size):
        xp = namespace_of(x)
        N, C, D, H, W = x.shape
        y = xp.empty((N, C) + tuple(output_size), dtype=x.dtype)
        idx = xp.empty((N, C) + tuple(output_size), dtype=xp.int64)
        bins = [list(enumerate(adaptive_windows(n, o))) for n, o in zip((D, H, W), output_size)]
        for a, (d0, d1) in bins[0]:
            for i, (h0, h1) in bins[1]:
                for j, (w0, w1) in bins[2]:
                    box = x[:, :, d0:d1, h0:h1, w0:w1].reshape(N, C, (d1 - d0) * (h1 - h0) * (w1 - w0))
                    k = torch_argmax(box, axis=2)
                    y[:, :, a, i, j] = xp.take_along_axis(box, k[..., None], axis=2)[..., 0]
                    kd, kh, kw = np.unravel_index(k, (d1 - d0, h1 - h0, w1 - w0))
                    idx[:, :, a, i, j] = ((d0 + kd) * H + h0 + kh) * W + w0 + kw
        ctx.save_for_backward(idx)
        ctx.size = x.shape[2:]
        return y, idx

    @staticmethod
    def backward(ctx, g, _gidx):
        (idx,) = ctx.saved_tensors
        return scatter_to_argmax(g, idx, ctx.size), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g, _gidx):
        (idx,) = ctx.saved_tensors
        return scatter_to_indices(g, idx, ctx.size), None


# functional entry points -----------------------------------------------------------------

def _batched(input, op, message):
    if not isinstance(input, Tensor) or input.ndim not in (4, 5):
        raise ShapeError(f"{op}: {message}, got input of shape "
                         f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
    check_on_cpu(op, input)
    return input if input.ndim == 5 else input.unsqueeze(0)


def _unbatch(t, input):
    return t if input.ndim == 5 else t.squeeze(0)


def _geometry(x, kernel_size, stride, padding, dilation, ceil_mode, op):
    """PyTorch's checks of a 3-D pooling window; (kernel, stride, padding, dilation, output size)."""
    if 0 in x.shape[1:]:   # only the batch may be empty, as PyTorch
        raise ShapeError(f"{op}: expected an input whose non-batch dimensions have positive length, got shape "
                         f"{list(x.shape)}")
    k = int_triple(kernel_size, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else int_triple(
        stride, "stride", op)
    p, d = int_triple(padding, "padding", op), int_triple(dilation, "dilation", op)
    if min(k + s + d) < 1 or min(p) < 0:
        raise ShapeError(f"{op}: kernel_size, stride and dilation must be >= 1 and padding >= 0, got "
                         f"kernel_size={k}, stride={s}, padding={p}, dilation={d}")
    if any(2 * p_ > d_ * (k_ - 1) + 1 for p_, d_, k_ in zip(p, d, k)):
        raise ShapeError(f"{op}: pad should be at most half of effective kernel size, got padding={p} for "
                         f"kernel_size={k} and dilation={d}")
    size = x.shape[2:]
    check_allocation(op, x.shape[:2] + tuple(n + 2 * p_ for n, p_ in zip(size, p)), x.dtype)   # the padded input
    out = tuple(pool_output_size(n, k_, s_, p_, d_, ceil_mode) for n, k_, s_, p_, d_ in zip(size, k, s, p, d))
    if min(out) < 1:
        raise ShapeError(f"{op}: given input size {tuple(size)}, the calculated output size {out} is too small "
                         f"(kernel_size={k}, stride={s}, padding={p}, dilation={d})")
    return k, s, p, d, out


_NDIM = "expected a non-empty 4-D (C, D, H, W) or 5-D (N, C, D, H, W) input"


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """As ``torch.nn.functional.max_pool3d``; indices are flat d*H*W + h*W + w positions in each
    volume (-1 for a dilated window that steps over the whole input: its max is -inf)."""
    x = _batched(input, "max_pool3d", _NDIM)
    k, s, p, d, out = _geometry(x, kernel_size, stride, padding, dilation, ceil_mode, "max_pool3d")
    y, idx = MaxPool3d.apply(x, k, s, p, d, out)
    if not return_indices:
        return _unbatch(y, input)
    if idx.grad_fn is not None:   # backward's scatter trusts the saved indices: the caller gets a copy
        idx = idx.clone()
    return _unbatch(y, input), _unbatch(idx, input)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """As ``torch.nn.functional.avg_pool3d``."""
    x = _batched(input, "avg_pool3d", _NDIM)
    k, s, p, _, out = _geometry(x, kernel_size, stride, padding, 1, ceil_mode, "avg_pool3d")
    if divisor_override is not None and int(divisor_override) <= 0:
        raise ShapeError(f"avg_pool3d: divisor must be not zero (a positive divisor_override), got {divisor_override}")
    y = AvgPool3d.apply(x, k, s, p, out, bool(count_include_pad), int(divisor_override or 0))
    return _unbatch(y, input)


def _adaptive(input, output_size, op):
    x = _batched(input, op, "Expected 4D or 5D tensor")
    out = _output_size(output_size, x.shape[2:], op)
    return x, out


def adaptive_avg_pool3d(input, output_size):
    """As ``torch.nn.functional.adaptive_avg_pool3d``; ``output_size`` is an int or a triple
    (None in a triple keeps that input size)."""
    op = "adaptive_avg_pool3d"
    x, out = _adaptive(input, output_size, op)
    if 0 in x.shape[1:] and out != (1, 1, 1):   # PyTorch's rule: a 1x1x1 mean of no voxels is NaN
        raise ShapeError(f"{op}: expected an input with non-zero size for non-batch dimensions for an output of "
                         f"size {out}, got shape {list(x.shape)}")
    return _unbatch(AdaptiveAvgPool3d.apply(x, out), input)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """As ``torch.nn.functional.adaptive_max_pool3d``; indices are flat d*H*W + h*W + w positions."""
    op = "adaptive_max_pool3d"
    x, out = _adaptive(input, output_size, op)
    if 0 in x.shape[1:]:
        raise ShapeError(f"{op}: expected an input with non-zero size for non-batch dimensions, got shape "
                         f"{list(x.shape)}")
    y, idx = AdaptiveMaxPool3d.apply(x, out)   # (an output size of 0 is an empty output, as PyTorch's)
    if return_indices and idx.grad_fn is not None:   # backward reads the saved indices: the caller gets a copy
        idx = idx.clone()
    y, idx = _unbatch(y, input), _unbatch(idx, input)
    return (y, idx) if return_indices else y
