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
chunks of images on Numba's pool where the process allows the layer kernels to
(``minidl.runtime.layer_threads``), small ones on one thread: each kernel is one source
compiled twice (``_threads.serial_and_parallel``). ``im2col_serial`` and ``col2im_serial`` run
the serial compile on the calling thread, which they leave to other Python threads meanwhile
(``nogil``): conv2d's block workers call them, one image block per thread.
"""
import numpy as np
from numba import njit, prange

from ._threads import chunk_bounds, layer_parallel, plane_chunks, serial_and_parallel


@njit(error_model="numpy", cache=True)
def _to_padded_channels_last(x, n, xh, ph, pw):
    """Image n of x (N, C, H, W) into the interior of xh ((H + 2ph) * (W + 2pw), C)."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    Wp = W + 2 * pw
    for c in range(C):
        for h in range(H):
            for w in range(W):
                xh[(h + ph) * Wp + w + pw, c] = x[n, c, h, w]


@njit(error_model="numpy", cache=True)
def _from_padded_channels_last(dxh, dx, n, ph, pw):
    """The interior of dxh back into image n of dx (N, C, H, W): _to_padded_channels_last's inverse."""
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    Wp = W + 2 * pw
    for c in range(C):
        for h in range(H):
            for w in range(W):
                dx[n, c, h, w] = dxh[(h + ph) * Wp + w + pw, c]


def _im2col_images(x, cols, n0, n1, n_chunks, G, kh, kw, sh, sw, ph, pw, dh, dw):
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    OH, OW = cols.shape[1], cols.shape[2]
    Cg = C // G
    Wp = W + 2 * pw
    rows = cols.reshape(cols.shape[0], OH * OW, G * kh * kw, Cg)
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(n1 - n0, n_chunks, chunk)
        xh = np.zeros(((H + 2 * ph) * Wp, C), dtype=x.dtype)        # padded channels-last image
        xg = xh.reshape(xh.shape[0], G, Cg)
        for n in range(n0 + lo, n0 + hi):
            _to_padded_channels_last(x, n, xh, ph, pw)
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


def _im2col_images_dense(x, cols, n0, n1, n_chunks, kh, kw, sh, sw, ph, pw, dh):
    """One group, column dilation 1: the kw*C entries of a (pixel, i) are one contiguous run
    of the channels-last image, copied as one. The run's start is an unsigned index, which
    tells LLVM it needs no negative-index wraparound, so the copy vectorises."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    OH, OW = cols.shape[1], cols.shape[2]
    Wp = W + 2 * pw
    run = kw * C
    rows = cols.reshape(cols.shape[0], OH * OW, kh, run)
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(n1 - n0, n_chunks, chunk)
        xh = np.zeros(((H + 2 * ph) * Wp, C), dtype=x.dtype)
        xf = xh.reshape(-1)
        for n in range(n0 + lo, n0 + hi):
            _to_padded_channels_last(x, n, xh, ph, pw)
            for oh in range(OH):
                for ow in range(OW):
                    p = oh * OW + ow
                    for i in range(kh):
                        start = np.uintp(((oh * sh + i * dh) * Wp + ow * sw) * C)
                        for e in range(run):
                            rows[n, p, i, e] = xf[start + np.uintp(e)]


def _col2im_images(cols, dx, n0, n1, n_chunks, G, kh, kw, sh, sw, ph, pw, dh, dw):
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    OH, OW = cols.shape[1], cols.shape[2]
    Cg = C // G
    Wp = W + 2 * pw
    rows = cols.reshape(cols.shape[0], OH * OW, G * kh * kw, Cg)
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(n1 - n0, n_chunks, chunk)
        dxh = np.empty(((H + 2 * ph) * Wp, C), dtype=dx.dtype)
        dxg = dxh.reshape(dxh.shape[0], G, Cg)
        for n in range(n0 + lo, n0 + hi):
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
            _from_padded_channels_last(dxh, dx, n, ph, pw)


def _col2im_images_dense(cols, dx, n0, n1, n_chunks, kh, kw, sh, sw, ph, pw, dh):
    """The adjoint of _im2col_images_dense."""
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    OH, OW = cols.shape[1], cols.shape[2]
    Wp = W + 2 * pw
    run = kw * C
    rows = cols.reshape(cols.shape[0], OH * OW, kh, run)
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(n1 - n0, n_chunks, chunk)
        dxh = np.empty(((H + 2 * ph) * Wp, C), dtype=dx.dtype)
        df = dxh.reshape(-1)
        for n in range(n0 + lo, n0 + hi):
            dxh[:] = 0
            for oh in range(OH):
                for i in range(kh):
                    for ow in range(OW):
                        p = oh * OW + ow
                        start = np.uintp(((oh * sh + i * dh) * Wp + ow * sw) * C)
                        for e in range(run):
                            df[start + np.uintp(e)] += rows[n, p, i, e]
            _from_padded_channels_last(dxh, dx, n, ph, pw)


_SPLIT = serial_and_parallel(error_model="numpy", cache=True)
_im2col_images, _im2col_images_parallel = _SPLIT(_im2col_images)
_im2col_images_dense, _im2col_images_dense_parallel = _SPLIT(_im2col_images_dense)
_col2im_images, _col2im_images_parallel = _SPLIT(_col2im_images)
_col2im_images_dense, _col2im_images_dense_parallel = _SPLIT(_col2im_images_dense)


def im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups=1, out=None):
    """x (N, C, H, W), C-contiguous -> cols (N, OH, OW, C*kh*kw) (written into ``out`` if given)."""
    return _im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups, out, serial=False)


def col2im(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups=1, out=None):
    """cols (N, OH, OW, C*kh*kw), C-contiguous -> dx (N, C, H, W), summing overlapping contributions
    (written into ``out``, C-contiguous, if given)."""
    return _col2im(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, out, serial=False)


# im2col and col2im on the calling thread only, with the GIL released: conv2d's block workers
# (minidl.runtime.block_workers) run one image block each, concurrently.
def im2col_serial(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups=1, out=None):
    """im2col on one thread."""
    return _im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups, out, serial=True)


def col2im_serial(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups=1, out=None):
    """col2im on one thread."""
    return _col2im(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, out, serial=True)


def _im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups, out, serial):
    N, C = x.shape[:2]
    cols = np.empty((N, OH, OW, C * kh * kw), dtype=x.dtype) if out is None else out
    if x.size == 0 or cols.size == 0:   # no image or no channel: only padding (or nothing) to copy
        cols[...] = 0
        return cols
    chunks = 1 if serial or N == 1 or not layer_parallel(cols.size) else plane_chunks(N)
    if groups == 1 and dw == 1:
        kernel = _im2col_images_dense if chunks == 1 else _im2col_images_dense_parallel
        kernel(x, cols, 0, N, chunks, kh, kw, sh, sw, ph, pw, dh)
    else:
        kernel = _im2col_images if chunks == 1 else _im2col_images_parallel
        kernel(x, cols, 0, N, chunks, groups, kh, kw, sh, sw, ph, pw, dh, dw)
    return cols


def _col2im(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups, out, serial):
    dx = np.empty((N, C, H, W), dtype=cols.dtype) if out is None else out
    if cols.size == 0 or dx.size == 0:  # nothing to scatter (or nowhere to)
        dx[...] = 0
        return dx
    chunks = 1 if serial or N == 1 or not layer_parallel(cols.size) else plane_chunks(N)
    if groups == 1 and dw == 1:
        kernel = _col2im_images_dense if chunks == 1 else _col2im_images_dense_parallel
        kernel(cols, dx, 0, N, chunks, kh, kw, sh, sw, ph, pw, dh)
    else:
        kernel = _col2im_images if chunks == 1 else _col2im_images_parallel
        kernel(cols, dx, 0, N, chunks, groups, kh, kw, sh, sw, ph, pw, dh, dw)
    return dx
