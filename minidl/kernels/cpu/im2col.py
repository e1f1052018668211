"""im2col / col2im for conv2d: the gather that lays every receptive field out as a row,
and its adjoint, the scatter-add back into the image.

Layout (the one ``minidl.ops.conv`` multiplies with a single GEMM, batch folded in), with
G groups of Cg = C/G channels and xpad the zero-padded input::

    cols[n, oh, ow, (g, i, j, cg)] = xpad[n, g*Cg + cg, oh*sh + i*dh, ow*sw + j*dw]

so ``cols`` is (N, OH, OW, C*kh*kw): one row per output pixel, and per group
``cols_g @ W_g^T`` (W_g's axes ordered (i, j, cg) to match) is the convolution. Two choices
make this fast: rows per pixel, because with few output channels BLAS is markedly faster on
a tall-skinny product than on a short-wide one; and channels innermost, so that each
(pixel, i, j) entry is a contiguous run of Cg values copied from a channels-last, padded
copy of one image (built per image, in cache). col2im is the transpose of that linear map:
every cols entry is added back into the xpad element it copied, then the padding is cropped.

The inner loops index whole arrays with the channel loop variable last (no per-pixel views:
a view costs an atomic reference-count update on the shared parent, and offset indices keep
LLVM from vectorising), so each run of Cg values is a SIMD copy. With one group and no
column dilation (the common case) the runs are kw*C long (see ``_im2col_images_dense``).
Work is split by image n,
so no two pieces write the same element and the scatter needs no atomics. Big problems run
chunks of images in parallel (prange) where the process allows the layer kernels to
(``minidl.runtime.layer_threads``), small ones the serial core. ``im2col_serial`` and
``col2im_serial`` run the serial core on the calling thread, which they leave to other Python
threads meanwhile (``nogil``): conv2d's block workers call them, one image block per thread.
"""
import numpy as np
from numba import njit, prange

from ._channels_last import from_channels_last, to_channels_last
from ._threads import layer_parallel, plane_chunks


@njit(error_model="numpy", cache=True, nogil=True)
def _im2col_images(x, cols, n0, n1, G, kh, kw, sh, sw, ph, pw, dh, dw):
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    OH, OW = cols.shape[1], cols.shape[2]
    Cg = C // G
    Wp = W + 2 * pw
    rows = cols.reshape(cols.shape[0], OH * OW, G * kh * kw, Cg)
    xh = np.zeros(((H + 2 * ph) * Wp, C), dtype=x.dtype)        # padded channels-last image
    xg = xh.reshape(xh.shape[0], G, Cg)
    for n in range(n0, n1):
        to_channels_last(x, n, xh.reshape(-1), ph, pw, Wp * C, C, 4 * C)
        for oh in range(OH):
            for ow in range(OW):
                p = oh * OW + ow
                for g in range(G):
                    for i in range(kh):
                        for j in range(kw):
                            q = (g * kh + i) * kw + j
                            r = (oh * sh + i * dh) * Wp + ow * sw + j * dw
                            for c in range(Cg):
                                rows[n, p, q, c] = xg[r, g, c]


@njit(error_model="numpy", cache=True, nogil=True)
def _im2col_images_dense(x, cols, n0, n1, kh, kw, sh, sw, ph, pw, dh):
    """One group, column dilation 1: the kw*C entries of a (pixel, i) are one contiguous run
    of the channels-last image, copied as one. The run's start is an unsigned index, which
    tells LLVM it needs no negative-index wraparound, so the copy vectorises."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    OH, OW = cols.shape[1], cols.shape[2]
    Wp = W + 2 * pw
    run = kw * C
    rows = cols.reshape(cols.shape[0], OH * OW, kh, run)
    xh = np.zeros(((H + 2 * ph) * Wp, C), dtype=x.dtype)
    xf = xh.reshape(-1)
    for n in range(n0, n1):
        to_channels_last(x, n, xf, ph, pw, Wp * C, C, 4 * C)
        for oh in range(OH):
            for ow in range(OW):
                p = oh * OW + ow
                for i in range(kh):
                    start = np.uintp(((oh * sh + i * dh) * Wp + ow * sw) * C)
                    for e in range(run):
                        rows[n, p, i, e] = xf[start + np.uintp(e)]


@njit(error_model="numpy", cache=True, parallel=True)
def _im2col_parallel(x, cols, n_chunks, G, kh, kw, sh, sw, ph, pw, dh, dw):
    N = x.shape[0]
    for t in prange(n_chunks):
        if G == 1 and dw == 1:
            _im2col_images_dense(x, cols, t * N // n_chunks, (t + 1) * N // n_chunks, kh, kw, sh, sw, ph, pw, dh)
        else:
            _im2col_images(x, cols, t * N // n_chunks, (t + 1) * N // n_chunks, G, kh, kw, sh, sw, ph, pw, dh, dw)


def im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups=1, out=None):
    """x (N, C, H, W), C-contiguous -> cols (N, OH, OW, C*kh*kw) (written into ``out`` if given)."""
    N, C = x.shape[:2]
    cols = np.empty((N, OH, OW, C * kh * kw), dtype=x.dtype) if out is None else out
    if x.size == 0 or cols.size == 0:   # no image or no channel: only padding (or nothing) to copy
        cols[...] = 0
        return cols
    if N == 1 or not layer_parallel(cols.size):
        return im2col_serial(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups, cols)
    _im2col_parallel(x, cols, plane_chunks(N), groups, kh, kw, sh, sw, ph, pw, dh, dw)
    return cols


@njit(error_model="numpy", cache=True, nogil=True)
def _col2im_images(cols, dx, n0, n1, G, kh, kw, sh, sw, ph, pw, dh, dw):
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    OH, OW = cols.shape[1], cols.shape[2]
    Cg = C // G
    Wp = W + 2 * pw
    rows = cols.reshape(cols.shape[0], OH * OW, G * kh * kw, Cg)
    dxh = np.empty(((H + 2 * ph) * Wp, C), dtype=dx.dtype)
    dxg = dxh.reshape(dxh.shape[0], G, Cg)
    for n in range(n0, n1):
        dxh[:] = 0
        for oh in range(OH):
            for g in range(G):
                for i in range(kh):
                    for j in range(kw):
                        q = (g * kh + i) * kw + j
                        for ow in range(OW):
                            p = oh * OW + ow
                            r = (oh * sh + i * dh) * Wp + ow * sw + j * dw
                            for c in range(Cg):
                                dxg[r, g, c] += rows[n, p, q, c]
        from_channels_last(dxh.reshape(-1), dx, n, ph, pw, Wp * C, C, 4 * C)


@njit(error_model="numpy", cache=True, nogil=True)
def _col2im_images_dense(cols, dx, n0, n1, kh, kw, sh, sw, ph, pw, dh):
    """The adjoint of _im2col_images_dense."""
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    OH, OW = cols.shape[1], cols.shape[2]
    Wp = W + 2 * pw
    run = kw * C
    rows = cols.reshape(cols.shape[0], OH * OW, kh, run)
    dxh = np.empty(((H + 2 * ph) * Wp, C), dtype=dx.dtype)
    df = dxh.reshape(-1)
    for n in range(n0, n1):
        dxh[:] = 0
        for oh in range(OH):
            for i in range(kh):
                for ow in range(OW):
                    p = oh * OW + ow
                    start = np.uintp(((oh * sh + i * dh) * Wp + ow * sw) * C)
                    for e in range(run):
                        df[start + np.uintp(e)] += rows[n, p, i, e]
        from_channels_last(df, dx, n, ph, pw, Wp * C, C, 4 * C)


@njit(error_model="numpy", cache=True, parallel=True)
def _col2im_parallel(cols, dx, n_chunks, G, kh, kw, sh, sw, ph, pw, dh, dw):
    N = dx.shape[0]
    for t in prange(n_chunks):
        if G == 1 and dw == 1:
            _col2im_images_dense(cols, dx, t * N // n_chunks, (t + 1) * N // n_chunks, kh, kw, sh, sw, ph, pw, dh)
        else:
            _col2im_images(cols, dx, t * N // n_chunks, (t + 1) * N // n_chunks, G, kh, kw, sh, sw, ph, pw, dh, dw)


def col2im(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups=1, out=None):
    """cols (N, OH, OW, C*kh*kw), C-contiguous -> dx (N, C, H, W), summing overlapping contributions
    (written into ``out``, C-contiguous, if given)."""
    dx = np.empty((N, C, H, W), dtype=cols.dtype) if out is None else out
    if cols.size == 0 or dx.size == 0:  # nothing to scatter (or nowhere to)
        dx[...] = 0
        return dx
    if N == 1 or not layer_parallel(cols.size):
        return col2im_serial(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, dx)
    _col2im_parallel(cols, dx, plane_chunks(N), groups, kh, kw, sh, sw, ph, pw, dh, dw)
    return dx


# im2col and col2im on the calling thread only, with the GIL released: conv2d's block workers
# (minidl.runtime.block_workers) run one image block each, concurrently.
def im2col_serial(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups=1, out=None):
    """im2col on one thread."""
    N, C = x.shape[:2]
    cols = np.empty((N, OH, OW, C * kh * kw), dtype=x.dtype) if out is None else out
    if x.size == 0 or cols.size == 0:
        cols[...] = 0
    elif groups == 1 and dw == 1:
        _im2col_images_dense(x, cols, 0, N, kh, kw, sh, sw, ph, pw, dh)
    else:
        _im2col_images(x, cols, 0, N, groups, kh, kw, sh, sw, ph, pw, dh, dw)
    return cols


def col2im_serial(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups=1, out=None):
    """col2im on one thread."""
    dx = np.empty((N, C, H, W), dtype=cols.dtype) if out is None else out
    if cols.size == 0 or dx.size == 0:
        dx[...] = 0
    elif groups == 1 and dw == 1:
        _col2im_images_dense(cols, dx, 0, N, kh, kw, sh, sw, ph, pw, dh)
    else:
        _col2im_images(cols, dx, 0, N, groups, kh, kw, sh, sw, ph, pw, dh, dw)
    return dx
