"""im2col / col2im for conv2d on cuda: one thread per output element, one launch each.

cols[n, oh, ow, (g, i, j, cg)] = xpad[n, g*Cg + cg, oh*sh + i*dh, ow*sw + j*dw]  (the layout of
minidl/ops/conv.py's reference), zero where the window hangs over the padding. Thread t of
im2col decodes its cols element and reads the one input element it copies (x may have any
strides). col2im is the adjoint, a scatter-add; written as a *gather* instead, so that no two
threads write the same element and no atomics are needed: the thread for dx[n, c, h, w] visits
the kh*kw kernel offsets (i, j), keeps those for which (h + ph - i*dh) lands on the stride grid
of a valid output row oh (and likewise for w), and sums the matching cols entries.
"""
import numba
import numpy as np
from numba import cuda

from ._common import grid_for, kernel_cache
from .bfloat16 import is_bfloat16
from .reduce import accumulator_dtype


@cuda.jit
def _im2col(cols, x, xs, x_off, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G, total):
    t = cuda.grid(1)
    if t < total:
        Cg = C // G
        r = t
        cg = r % Cg
        r //= Cg
        j = r % kw
        r //= kw
        i = r % kh
        r //= kh
        g = r % G
        r //= G
        ow = r % OW
        r //= OW
        oh = r % OH
        n = r // OH
        h = oh * sh + i * dh - ph
        w = ow * sw + j * dw - pw
        if 0 <= h < H and 0 <= w < W:
            cols[t] = x[x_off + n * xs[0] + (g * Cg + cg) * xs[1] + h * xs[2] + w * xs[3]]
        else:
            cols[t] = 0


def _build_col2im(acc):
    acc_t = numba.from_dtype(acc)

    @cuda.jit
    def kernel(dx, cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G, total):
        t = cuda.grid(1)
        if t < total:
            w = t % W
            r = t // W
            h = r % H
            r //= H
            c = r % C
            n = r // C
            Cg = C // G
            g = c // Cg
            cg = c % Cg
            K = G * kh * kw * Cg
            s = acc_t(0)
            for i in range(kh):
                a = h + ph - i * dh
                if a >= 0 and a % sh == 0 and a // sh < OH:
                    oh = a // sh
                    for j in range(kw):
                        b = w + pw - j * dw
                        if b >= 0 and b % sw == 0 and b // sw < OW:
                            ow = b // sw
                            s += cols[((n * OH + oh) * OW + ow) * K + ((g * kh + i) * kw + j) * Cg + cg]
            dx[t] = s
    return kernel


_col2im = kernel_cache(_build_col2im)


def im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups=1, out=None):
    """x (N, C, H, W) CudaArray, any strides -> cols (N, OH, OW, C*kh*kw). Only moves elements (the
    padding is 0, also the bits of bfloat16's +0), so bfloat16's uint16 storage runs as it is."""
    N, C, H, W = x.shape
    shape = (N, OH, OW, C * kh * kw)
    cols = out if out is not None and out.is_contiguous() else type(x).empty(shape, x.dtype)
    total = cols.size
    if total:
        _im2col[grid_for(total)](cols._buf[cols._off:cols._off + total], x._buf, x.elem_strides, x._off,
                                            N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups, total)
    if out is not None and cols is not out:
        out[...] = cols
        return out
    return cols


def col2im(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups=1, out=None):
    """cols (N, OH, OW, C*kh*kw) -> dx (N, C, H, W), overlapping windows summed."""
    if is_bfloat16(cols.dtype) or (out is not None and is_bfloat16(out.dtype)):   # summed in float32, rounded once
        dx = col2im(cols.astype(np.float32), N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups)
        if out is None:
            return dx.astype(cols.dtype)
        out[...] = dx
        return out
    if not cols.is_contiguous():
        cols = cols.copy()
    OH, OW = cols.shape[1:3]
    dx = out if out is not None and out.is_contiguous() else type(cols).empty((N, C, H, W), cols.dtype)
    total = N * C * H * W
    if total:
        _col2im(accumulator_dtype(cols.dtype))[grid_for(total)](
            dx._buf[dx._off:dx._off + total], cols._buf[cols._off:cols._off + cols.size],
            N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups, total)
    if out is not None and dx is not out:
        out[...] = dx
        return out
    return dx
