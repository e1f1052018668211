"""Direct convolution: conv2d of small stride-1 layers as the sums themselves, no columns.

For a stride-1, undilated, ungrouped convolution with padding (ph, pw) and xpad the input
with ph rows and pw columns of zeros on each side,

    y[n, o, oh, ow] = b[o] + sum_{c, i, j} w[o, c, i, j] xpad[n, c, oh + i, ow + j]

and, differentiating (g = dL/dy),

    dW[o, c, i, j] = sum_{n, oh, ow} g[n, o, oh, ow] xpad[n, c, oh + i, ow + j]
    db[o]          = sum_{n, oh, ow} g[n, o, oh, ow]
    dxpad[n, c, h, w] = sum_{o, i, j} g[n, o, h - i, w - j] w[o, c, i, j]          (g = 0 outside)
                      = sum_{o, i, j} gpad[n, o, h + i, w + j] w[o, c, kh-1-i, kw-1-j]

with gpad = g with kh - 1 rows and kw - 1 columns of zeros on each side (substitute
i -> kh - 1 - i): the input gradient is the forward correlation again, of the padded output
gradient with the filter flipped in both spatial axes and its two channel axes swapped; dx is
dxpad without its padding.

Where it pays (``use_direct``): layers with few channels (up to 16 in and 16 out), LeNet's
and a network's first layer, where the im2col or unfold GEMMs are too thin for BLAS and copying
the columns costs more than the products. A 3x3 layer with 16 in and 16 out channels goes to
Winograd instead, whose 36 GEMMs do 1/4 of the multiply-adds and win there, and a 1x1
layer to a GEMM on the input itself (2x faster). The functions below are the NumPy references;
the CPU kernels (``minidl.kernels.cpu.conv_direct``) compute the same sums image by image on a
padded-width grid. The GPU keeps im2col + GEMM.
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ._kernel_switch import LAYER
from .low_precision import keep_low


def _windows(a, kh, kw, ph, pw):
    """(N, C, OH, OW, kh, kw) views of a zero-padded by (ph, pw): window (oh, ow) of each plane."""
    a = np.pad(a, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    return sliding_window_view(a, (kh, kw), axis=(2, 3))


def conv_direct_forward_reference(x, w, b, ph, pw):
    """y = conv2d(x, w, b, stride=1, padding=(ph, pw)), (N, O, OH, OW)."""
    kh, kw = w.shape[2:]
    y = np.tensordot(_windows(x, kh, kw, ph, pw), w, axes=([1, 4, 5], [1, 2, 3]))    # (N, OH, OW, O)
    if b is not None:
        y = y + b
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2), dtype=x.dtype)


def conv_direct_backward_reference(g, x, w, ph, pw, need_dx=True, need_dw=True, need_db=True):
    """(dx, dW, db) of conv_direct_forward for the output gradient g (None where not needed)."""
    kh, kw = w.shape[2:]
    H, W = x.shape[2:]
    dw = db = dx = None
    if need_dw:
        dw = np.tensordot(g, _windows(x, kh, kw, ph, pw), axes=([0, 2, 3], [0, 2, 3])).astype(x.dtype)
    if need_db:
        db = g.sum(axis=(0, 2, 3)).astype(x.dtype)
    if need_dx:
        wflip = w[:, :, ::-1, ::-1]
        dxpad = np.tensordot(_windows(g, kh, kw, kh - 1, kw - 1), wflip, axes=([1, 4, 5], [0, 2, 3]))
        dx = np.ascontiguousarray(dxpad[:, ph: ph + H, pw: pw + W].transpose(0, 3, 1, 2), dtype=x.dtype)
    return dx, dw, db


DIRECT = LAYER.kernels(("conv_direct_forward", "conv_direct_backward"), __name__,
                       cpu="minidl.kernels.cpu.conv_direct")
USE_DIRECT = True          # small stride-1 convolutions of CPU float32/float64 arrays by the direct sums
DIRECT_MAX_IN_CHANNELS = 16    # measured: up to 16 input and 16 output channels the direct sums are
DIRECT_MAX_OUT_CHANNELS = 16   # faster than im2col/unfold + GEMM (docs/performance.md) ...
DIRECT_WINOGRAD_FROM = 256     # ... and than Winograd's 3x3 layers below this many channel pairs C*O


def use_direct(x, w, stride, dilation, groups, winograd=False):
    """Does conv2d take the direct sums for these arguments (see the module docstring)?
    ``winograd``: Winograd F(4x4, 3x3) could take them instead."""
    O, C = w.shape[:2]
    return (USE_DIRECT and type(x) is np.ndarray and x.dtype in (np.float32, np.float64)
            and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and groups == 1
            and C <= DIRECT_MAX_IN_CHANNELS and O <= DIRECT_MAX_OUT_CHANNELS and w.shape[2] * w.shape[3] > 1
            and not (winograd and C * O >= DIRECT_WINOGRAD_FROM))


def direct_forward(ctx, x, w, b, padding):
    """Conv2d.forward by the direct sums: saves x and w (exact in a float16/bfloat16 call's dtype)."""
    impl = ctx.impl = DIRECT.select(x)
    ctx.save_for_backward(x, w)
    keep_low(ctx, x, w)
    ctx.padding = tuple(padding)
    return impl.conv_direct_forward(x, w, b, *ctx.padding)


def direct_backward(ctx, g):
    """Conv2d.backward by the direct sums: (dx, dW, db), None where no gradient is needed."""
    x, w = ctx.saved_tensors
    nx, nw, nb = ctx.needs_input_grad[:3]
    return ctx.impl.conv_direct_backward(np.ascontiguousarray(g, dtype=x.dtype), x, w, *ctx.padding, nx, nw, nb)
