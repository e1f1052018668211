"""2-D pooling: max, average and adaptive average, with PyTorch's window geometry.

Window (oh, ow) covers rows oh*sh - ph + i*dh, i < kh (and the same for columns).

max_pool2d:  out = max over the window;  the max is a selection, so
    dL/dx[h, w] = sum of g[oh, ow] over the windows whose argmax is (h, w)   (a scatter-add)

relu_max_pool2d: max_pool2d(relu(x)) as one op. ReLU is monotone, so the max of the ReLUs is the
    ReLU of the max: out = relu(max over the window), and the gradient goes to the argmax only
    where out > 0 (or is NaN; ReLU's mask), so those windows get index -1, the sentinel the
    backward's scatter already skips. One pass over x instead of ReLU's two (forward and
    backward) over the full-size activations before the pool.

avg_pool2d:  out = (sum over the in-bounds window) / divisor, where the divisor is the window
    size clipped to the padded input (count_include_pad=True, the default), the number of
    in-bounds elements (False), or ``divisor_override``;
    dL/dx[h, w] = sum of g[oh, ow] / divisor[oh, ow] over the windows containing (h, w).

adaptive_avg_pool2d: bin i of an output of size O over an input of size S spans
    [floor(i*S/O), ceil((i+1)*S/O)). Averaging over a rectangle of bins is separable: the mean
    over each row bin of the means over each column bin (as the averaging matrices A_h (OH, H)
    and A_w (OW, W) would give, out = A_h x A_w^T, dL/dx = A_h^T g A_w, but bin by bin, so that an
    inf or NaN reaches only the outputs whose bins hold it, as PyTorch's; a product with the
    matrices' zeros would make it NaN everywhere).

The gathers and scatters of max/avg pooling run in Numba kernels on the CPU
(``minidl.kernels.cpu.pooling``); the array-namespace references below define them and run on
every other device.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.allocation import check_allocation
from ._broadcast import int_pair
from ._higher_order import constant, scatter_to_indices
from ._kernel_switch import LAYER
from .low_precision import float32_compute
from .shape_error import ShapeError


def pool_output_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape: floor (or ceil) division, and with ceil_mode the last
    window must start inside the input or its left padding."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _windows(xpad, kh, kw, sh, sw, dh, dw, OH, OW):
    """The kh*kw strided views xpad[:, :, i*dh + sh*oh, j*dw + sw*ow], in window order."""
    return [xpad[:, :, i * dh: i * dh + sh * (OH - 1) + 1: sh, j * dw: j * dw + sw * (OW - 1) + 1: sw]
            for i in range(kh) for j in range(kw)]


def _reach(k, d, size, p):
    """How many of a window's k offsets (step d) can land inside the input: offset i of every
    window lies at or below row -p + i*d, so once that passes size, it and all later ones read
    only the bottom/right padding (ceil_mode with a stride past the input lets a kernel
    overhang it by any amount; the padding holds -inf or 0, which changes no max or sum)."""
    return min(k, -(-(size + p) // d))


def _pad(x, ph, pw, OH, OW, kh, kw, sh, sw, dh, dw, value):
    """x padded by (ph, pw) on the left/top and enough on the right/bottom for every window."""
    xp = namespace_of(x)
    H, W = x.shape[2:]
    bottom = max((OH - 1) * sh + dh * (kh - 1) + 1 - H - ph, 0)
    right = max((OW - 1) * sw + dw * (kw - 1) + 1 - W - pw, 0)
    return xp.pad(x, ((0, 0), (0, 0), (ph, bottom), (pw, right)), constant_values=value)


def _first_inside(o, s, p, d, k, size):
    """Per output position along one axis: the first position of its window inside [0, size),
    or -1 where a dilated window steps over the whole input (padding on both sides)."""
    start = np.arange(o, dtype=np.int64) * s - p
    i0 = np.where(start >= 0, 0, (-start - 1) // d + 1)
    first = start + i0 * d
    return np.where((i0 < k) & (first < size), first, -1)


def max_pool2d_forward_reference(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, relu=False):
    xp = namespace_of(x)
    H, W = x.shape[2:]
    kh, kw = _reach(kh, dh, H, ph), _reach(kw, dw, W, pw)
    stack = xp.stack(_windows(_pad(x, ph, pw, OH, OW, kh, kw, sh, sw, dh, dw, -xp.inf), kh, kw, sh, sw, dh, dw, OH, OW))
    k = stack.argmax(axis=0)                                   # first maximum, in window order
    out = xp.take_along_axis(stack, k[None], axis=0)[0]
    i, j = k // kw, k % kw
    h = xp.arange(OH).reshape(OH, 1) * sh - ph + i * dh
    w = xp.arange(OW).reshape(1, OW) * sw - pw + j * dw
    # a max of -inf may sit in the padding: then the window's first element inside, as PyTorch;
    # a window with none gets -1 (no element, no gradient)
    fh, fw = _first_inside(OH, sh, ph, dh, kh, H), _first_inside(OW, sw, pw, dw, kw, W)
    first = np.where((fh[:, None] < 0) | (fw[None, :] < 0), -1, fh[:, None] * W + fw[None, :])
    inside = (h >= 0) & (h < H) & (w >= 0) & (w < W)
    idx = xp.where(inside, h * W + w, xp.asarray(first)).astype(np.int64)
    if relu:    # relu(max): 0 and no gradient where the max is not positive (a NaN stays)
        stop = ~((out > 0) | (out != out)) & (idx >= 0)
        out, idx = xp.where(stop, xp.zeros_like(out), out), xp.where(stop, -1, idx)
    return out, idx


def max_pool2d_backward_reference(g, idx, H, W):
    xp = namespace_of(g)
    N, C = g.shape[:2]
    dx = xp.zeros((N * C, H * W), dtype=g.dtype)
    rows = xp.arange(N * C).reshape(N * C, 1)
    L = g.shape[2] * g.shape[3]     # (not -1: ambiguous for an empty batch)
    valid = idx >= 0                 # -1: a window without an input element sends nothing
    xp.add.at(dx, (rows, xp.where(valid, idx, 0).reshape(N * C, L)), xp.where(valid, g, 0).reshape(N * C, L))
    return dx.reshape(N, C, H, W)


def _divisor(o, s, p, k, size, include_pad, xp):
    start = xp.arange(o) * s - p
    end = xp.minimum(start + k, size + p)
    if include_pad:
        return end - start
    return xp.minimum(end, size) - xp.maximum(start, 0)


def avg_pool2d_divisor(H, W, kh, kw, sh, sw, ph, pw, OH, OW, count_include_pad, divisor_override, xp=np):
    if divisor_override:
        return xp.full((OH, OW), divisor_override)
    return (_divisor(OH, sh, ph, kh, H, count_include_pad, xp).reshape(OH, 1)
            * _divisor(OW, sw, pw, kw, W, count_include_pad, xp).reshape(1, OW))


def avg_pool2d_forward_reference(x, kh, kw, sh, sw, ph, pw, OH, OW, count_include_pad, divisor_override):
    xp = namespace_of(x)
    H, W = x.shape[2:]
    rh, rw = _reach(kh, 1, H, ph), _reach(kw, 1, W, pw)
    total = sum(_windows(_pad(x, ph, pw, OH, OW, rh, rw, sh, sw, 1, 1, 0), rh, rw, sh, sw, 1, 1, OH, OW))
    div = avg_pool2d_divisor(H, W, kh, kw, sh, sw, ph, pw, OH, OW, count_include_pad, divisor_override, xp)
    return (total / xp.maximum(div, 1)).astype(x.dtype, copy=False)   # an empty window averages to 0


def avg_pool2d_backward_reference(g, H, W, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override):
    xp = namespace_of(g)
    N, C, OH, OW = g.shape
    div = avg_pool2d_divisor(H, W, kh, kw, sh, sw, ph, pw, OH, OW, count_include_pad, divisor_override, xp)
    v = (g / xp.maximum(div, 1)).astype(g.dtype, copy=False)
    rh, rw = _reach(kh, 1, H, ph), _reach(kw, 1, W, pw)
    dxpad = _pad(xp.zeros((N, C, H, W), dtype=g.dtype), ph, pw, OH, OW, rh, rw, sh, sw, 1, 1, 0)
    for view in _windows(dxpad, rh, rw, sh, sw, 1, 1, OH, OW):
        view += v
    return dxpad[:, :, ph: ph + H, pw: pw + W]


def _c(x):
    return x if x.flags.c_contiguous else x.copy()


POOLING = LAYER.kernels(("max_pool2d_forward", "max_pool2d_backward", "avg_pool2d_forward", "avg_pool2d_backward"),
                        __name__, cpu="minidl.kernels.cpu.pooling")


class MaxPool2d(Function):
    """Max pooling, of relu(x) with ``relu``; returns (out, indices). See the module docstring."""

    @staticmethod
    def forward(ctx, x, geom, relu=False):
        ctx.impl = POOLING.select(x)
        out, idx = ctx.impl.max_pool2d_forward(_c(x), *geom, relu=relu)
        ctx.save_for_backward(idx)
        ctx.hw = x.shape[2:]
        return out, idx

    @staticmethod
    def backward(ctx, g, _gidx):
        (idx,) = ctx.saved_tensors
        return ctx.impl.max_pool2d_backward(_c(g), idx, *ctx.hw), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g, _gidx):
        # the same scatter-add of g to the saved argmax (the indices are constants of the backward)
        (idx,) = ctx.saved_tensors
        return scatter_to_indices(g, idx, ctx.hw), None, None


class AvgPool2d(Function):
    """Average pooling. See the module docstring."""

    @staticmethod
    def forward(ctx, x, geom, count_include_pad, divisor_override):
        kh, kw, sh, sw, ph, pw, OH, OW = geom
        ctx.impl = POOLING.select(x)
        ctx.args = (x.shape[2], x.shape[3], kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override)
        return ctx.impl.avg_pool2d_forward(_c(x), *geom, count_include_pad, divisor_override)

    @staticmethod
    def backward(ctx, g):
        return ctx.impl.avg_pool2d_backward(_c(g), *ctx.args), None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        # g / divisor added over each window: a transposed convolution of the planes with a ones
        # kernel (same stride and padding), cropped to the input where ceil_mode lets a window
        # overhang the bottom/right padding
        H, W, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override = ctx.args
        N, C, OH, OW = g.shape
        xp = namespace_of(g._data)
        div = avg_pool2d_divisor(H, W, kh, kw, sh, sw, ph, pw, OH, OW, count_include_pad, divisor_override, np)
        v = g / constant(xp.asarray(np.maximum(div, 1), dtype=g.dtype))
        return uniform_transposed_conv(v, (kh, kw), (sh, sw), (ph, pw), (H, W)), None, None, None


def _adaptive_bins(size, out):
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _along(ndim, axis, index):
    """The index tuple selecting ``index`` (a slice or int) along ``axis``."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


def _bin_means(x, axis, out):
    """The mean of x over each of the ``out`` adaptive bins along ``axis``."""
    xp = namespace_of(x)
    if out == 0:
        return x[_along(x.ndim, axis, slice(0, 0))]
    return xp.concatenate([x[_along(x.ndim, axis, slice(lo, hi))].mean(axis=axis, keepdims=True)
                           for lo, hi in _adaptive_bins(x.shape[axis], out)], axis=axis)


def _bin_spread(g, axis, n):
    """The transpose of _bin_means: each bin's g / (bin length) added over its bin, length n."""
    xp = namespace_of(g)
    shape = list(g.shape)
    shape[axis] = n
    dx = xp.zeros(tuple(shape), dtype=g.dtype)
    for i, (lo, hi) in enumerate(_adaptive_bins(n, g.shape[axis])):
        dx[_along(g.ndim, axis, slice(lo, hi))] += g[_along(g.ndim, axis, slice(i, i + 1))] / (hi - lo)
    return dx


@float32_compute   # float16/bfloat16 inputs: float32 sums, one rounding (low_precision.py)
class AdaptiveAvgPool2d(Function):
    """out = the mean over each bin's rectangle, separably (the module docstring);
    dL/dx = each output's g / (bin area) spread over its rectangle."""

    @staticmethod
    def forward(ctx, x, output_size):
        H, W = x.shape[2:]
        OH, OW = output_size
        ctx.hw = (H, W)
        if (OH, OW) == (1, 1):
            return x.mean(axis=(2, 3), keepdims=True)
        return _bin_means(_bin_means(x, 2, OH), 3, OW).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        H, W = ctx.hw
        return _bin_spread(_bin_spread(g, 3, W), 2, H).astype(g.dtype, copy=False), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        H, W = ctx.hw
        return bin_spread(bin_spread(g, 3, W), 2, H), None


def bin_spread(g, axis, n):
    """_bin_spread for a Tensor: g / (bin length) scattered over each bin along ``axis``, as the
    adjoint of area resampling's gather (``resample.ScatterAxis``, whose backward is the bin sums)."""
    from .interpolate import _area_bins, _area_taps
    from .resample import ScatterAxis
    m = g.shape[axis]
    if m == 0 or n == 0:
        shape = list(g.shape)
        shape[axis] = n
        return constant(namespace_of(g._data).zeros(tuple(shape), dtype=g.dtype))
    lo, hi = _area_bins(n, m)
    length = namespace_of(g._data).asarray((hi - lo).reshape((m,) + (1,) * (g.ndim - 1 - axis)), dtype=g.dtype)
    return ScatterAxis.apply(g / constant(length), axis, _area_taps(n, m), n)


def uniform_transposed_conv(v, k, s, p, size):
    """sum over the windows (kernel k, stride s, padding p) containing each input position of v
    (N, C, *out): conv_transpose of each plane with a ones kernel, of the size ``size``."""
    from .conv3d import ConvTranspose3d
    from .conv_transpose import ConvTranspose2d
    N, C, out = v.shape[0], v.shape[1], tuple(v.shape[2:])
    xp = namespace_of(v._data)
    reach = tuple((o - 1) * s_ - 2 * p_ + k_ for o, s_, p_, k_ in zip(out, s, p, k))   # the last window's end
    full = tuple(max(n, r) for n, r in zip(size, reach))
    ones = constant(xp.ones((1, 1) + tuple(k), dtype=v.dtype))
    cls = ConvTranspose2d if len(k) == 2 else ConvTranspose3d
    one = (1,) * len(k)
    dx = cls.apply(v.reshape((N * C, 1) + out), ones, None, tuple(s), tuple(p), one, 1, full)
    if full != tuple(size):
        dx = dx[(slice(None), slice(None)) + tuple(slice(0, n) for n in size)]
    return dx.reshape((N, C) + tuple(size))


# functional entry points -----------------------------------------------------------------

def _batched(x, op):
    if x.ndim == 3:
        from .shape import unsqueeze
        return unsqueeze(x, 0), True
    if x.ndim != 4:
        raise ShapeError(f"{op}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {list(x.shape)}")
    return x, False


def _unbatch(t, unbatched):
    if not unbatched:
        return t
    from .shape import squeeze
    return squeeze(t, 0)


def _geometry(x, kernel_size, stride, padding, dilation, ceil_mode, op):
    if 0 in x.shape[1:]:   # only the batch may be empty (PyTorch's rule, and its error type)
        raise RuntimeError(f"{op}: expected an input with non-zero channels, height and width (only the batch "
                           f"dim may be 0), got shape {list(x.shape)}")
    kh, kw = int_pair(kernel_size, "kernel_size", op)
    sh, sw = int_pair(kernel_size if stride is None or stride == [] else stride, "stride", op)
    ph, pw = int_pair(padding, "padding", op)
    dh, dw = int_pair(dilation, "dilation", op)
    if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ShapeError(f"{op}: kernel_size, stride and dilation must be >= 1 and padding >= 0, got "
                         f"kernel_size={(kh, kw)}, stride={(sh, sw)}, padding={(ph, pw)}, dilation={(dh, dw)}")
    if 2 * ph > dh * (kh - 1) + 1 or 2 * pw > dw * (kw - 1) + 1:
        raise ShapeError(f"{op}: padding should be at most half of the effective kernel size, got "
                         f"padding={(ph, pw)} for kernel_size={(kh, kw)}")
    H, W = x.shape[2:]
    check_allocation(op, (x.shape[0], x.shape[1], H + 2 * ph, W + 2 * pw), x.dtype)   # the padded input
    OH = pool_output_size(H, kh, sh, ph, dh, ceil_mode)
    OW = pool_output_size(W, kw, sw, pw, dw, ceil_mode)
    if OH < 1 or OW < 1:
        raise ShapeError(f"{op}: input of spatial size {(H, W)} is too small for kernel_size={(kh, kw)}, "
                         f"padding={(ph, pw)}, dilation={(dh, dw)} (output would be {(OH, OW)})")
    return kh, kw, sh, sw, ph, pw, dh, dw, OH, OW


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """As ``torch.nn.functional.max_pool2d``; indices are flat h*W + w positions in each plane
    (-1 for a dilated window that steps over the whole input: its max is -inf)."""
    x, unbatched = _batched(input, "max_pool2d")
    geom = _geometry(x, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d")
    out, idx = MaxPool2d.apply(x, geom, False)
    out = _unbatch(out, unbatched)
    if not return_indices:
        return out
    if idx.grad_fn is not None:   # backward's scatter trusts the saved indices: the caller gets a copy
        idx = idx.clone()
    return out, _unbatch(idx, unbatched)


def relu_max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """``max_pool2d(relu(input), ...)`` as one op (not in PyTorch; see the module docstring):
    the same values and gradients (a zero output is +0 here), without ReLU's passes over the
    full-size input."""
    x, unbatched = _batched(input, "relu_max_pool2d")
    geom = _geometry(x, kernel_size, stride, padding, dilation, ceil_mode, "relu_max_pool2d")
    out, _ = MaxPool2d.apply(x, geom, True)
    return _unbatch(out, unbatched)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """As ``torch.nn.functional.avg_pool2d``."""
    x, unbatched = _batched(input, "avg_pool2d")
    kh, kw, sh, sw, ph, pw, _, _, OH, OW = _geometry(x, kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d")
    if divisor_override is not None and int(divisor_override) <= 0:
        raise ShapeError(f"avg_pool2d: divisor_override must be positive, got {divisor_override}")
    out = AvgPool2d.apply(x, (kh, kw, sh, sw, ph, pw, OH, OW), bool(count_include_pad), int(divisor_override or 0))
    return _unbatch(out, unbatched)


def adaptive_avg_pool2d(input, output_size):
    """As ``torch.nn.functional.adaptive_avg_pool2d``; ``output_size`` is an int or a pair
    (None in a pair keeps that input size)."""
    x, unbatched = _batched(input, "adaptive_avg_pool2d")
    H, W = x.shape[2:]
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    oh, ow = output_size
    oh, ow = int(H if oh is None else oh), int(W if ow is None else ow)
    if oh < 0 or ow < 0:   # a size 0 is an empty output, as PyTorch (and adaptive_max_pool2d)
        raise RuntimeError(f"adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0, "
                           f"got {output_size}")
    if 0 in (H, W) and (oh, ow) != (1, 1):   # PyTorch's rule: a 1x1 output of no positions is their mean, NaN
        raise RuntimeError(f"adaptive_avg_pool2d: expected an input with non-zero height and width for an output "
                           f"of size {(oh, ow)}, got shape {list(x.shape)}")
    return _unbatch(AdaptiveAvgPool2d.apply(x, (oh, ow)), unbatched)
