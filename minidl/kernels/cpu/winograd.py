"""Winograd F(2x2, 3x3) tile transforms for conv2d (3x3, stride 1), forward and adjoint.

The math and the NumPy references are in ``minidl.ops.conv`` (see "Winograd" there); these
kernels compute the same four linear maps in one pass each:

    winograd_input          V[xi, t, c] = (B^T d_tc B)[xi]       d_tc: the 4x4 input tile t of channel c
    winograd_input_adjoint  dx = sum over tiles of B dV_tc B^T, added back where the tile was read
    winograd_output         y tile t of channel o = A^T M_to A  (2x2, cropped at odd output sizes)
    winograd_output_adjoint dM_to = A g_to A^T                   g_to: the 2x2 output-gradient tile

with B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]] and
A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]: additions only. Tiles are numbered t = (n*TH + th)*TW + tw;
tile (th, tw) reads input rows 2*th - ph .. 2*th - ph + 3 (columns likewise) (zero outside the image) and writes
output rows 2*th, 2*th + 1.

Layout: the transform domain is (16, T, channels), channels innermost, so that the 16 products
M[xi] = V[xi] @ U[xi]^T are plain BLAS GEMMs on contiguous matrices. The kernels compute one
image's tiles into a small buffer in which each tile's 16 values are one run, and move it to or
from the 16 planes in one contiguous run of tiles x channels per plane (``_scatter_planes``):
writing each tile straight into the planes (16 runs of one tile's channels, a megabyte apart)
made the transforms 3-5x slower, and the (T, 16, channels) layout, which needs no such move,
made BLAS read rows 16 * channels apart: the GEMMs ran 2-5x slower. Each image is first
copied into a zero-padded channels-last buffer (as im2col does), so tile reads need no bounds
checks. Work is split by image (prange), so the
adjoint's overlapping tiles (they share two rows/columns) never race. The GPU device keeps
im2col + GEMM (no cuda port of these transforms).

The ``*_serial`` entry points run the same serial cores on the calling thread, which they
leave to other Python threads meanwhile (``nogil``): conv2d's block workers call them, one
image block per thread (``minidl.runtime.block_workers``).
"""
import numpy as np
from numba import njit, prange

from ._threads import layer_parallel


@njit(error_model="numpy", cache=True, inline="always")
def _padded_image(x, n, xh, ph, pw, Wp):
    """Image n into the channels-last buffer xh, whose padding the caller zeroed once."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    for c in range(C):
        for h in range(H):
            for w in range(W):
                xh[(h + ph) * Wp + w + pw, c] = x[n, c, h, w]


@njit(error_model="numpy", cache=True, inline="always")
def _scatter_planes(tb, P, t0):
    """P[xi, t0 + u, :] = tb[u, xi, :]: one image's tiles into the 16 planes, one contiguous run
    of tiles x channels per plane (not 16 short runs per tile, a megabyte apart)."""
    TT, K = tb.shape[0], tb.shape[2]
    for xi in range(16):
        for u in range(TT):
            for c in range(K):
                P[xi, t0 + u, c] = tb[u, xi, c]


@njit(error_model="numpy", cache=True, inline="always")
def _gather_planes(P, tb, t0):
    """tb[u, xi, :] = P[xi, t0 + u, :], the inverse of _scatter_planes."""
    TT, K = tb.shape[0], tb.shape[2]
    for xi in range(16):
        for u in range(TT):
            for c in range(K):
                tb[u, xi, c] = P[xi, t0 + u, c]


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _input_images(x, V, n0, n1, ph, pw, TH, TW):
    C = x.shape[1]
    Wp = 2 * TW + 2
    xh = np.zeros(((2 * TH + 2) * Wp, C), dtype=x.dtype)     # padding zeroed once; images overwrite the rest
    TT = TH * TW
    tb = np.empty((TT, 16, C), dtype=x.dtype)       # one image's tiles, each one contiguous run
    for n in range(n0, n1):
        _padded_image(x, n, xh, ph, pw, Wp)
        for th in range(TH):
            for tw in range(TW):
                u = th * TW + tw
                r = 2 * th * Wp + 2 * tw
                for c in range(C):
                    d00 = xh[r, c]
                    d01 = xh[r + 1, c]
                    d02 = xh[r + 2, c]
                    d03 = xh[r + 3, c]
                    d10 = xh[r + Wp, c]
                    d11 = xh[r + Wp + 1, c]
                    d12 = xh[r + Wp + 2, c]
                    d13 = xh[r + Wp + 3, c]
                    d20 = xh[r + 2 * Wp, c]
                    d21 = xh[r + 2 * Wp + 1, c]
                    d22 = xh[r + 2 * Wp + 2, c]
                    d23 = xh[r + 2 * Wp + 3, c]
                    d30 = xh[r + 3 * Wp, c]
                    d31 = xh[r + 3 * Wp + 1, c]
                    d32 = xh[r + 3 * Wp + 2, c]
                    d33 = xh[r + 3 * Wp + 3, c]
                    # rows: B^T d
                    a0, a1, a2, a3 = d00 - d20, d01 - d21, d02 - d22, d03 - d23
                    b0, b1, b2, b3 = d10 + d20, d11 + d21, d12 + d22, d13 + d23
                    e0, e1, e2, e3 = d20 - d10, d21 - d11, d22 - d12, d23 - d13
                    f0, f1, f2, f3 = d10 - d30, d11 - d31, d12 - d32, d13 - d33
                    # columns: (B^T d) B
                    tb[u, 0, c] = a0 - a2
                    tb[u, 1, c] = a1 + a2
                    tb[u, 2, c] = a2 - a1
                    tb[u, 3, c] = a1 - a3
                    tb[u, 4, c] = b0 - b2
                    tb[u, 5, c] = b1 + b2
                    tb[u, 6, c] = b2 - b1
                    tb[u, 7, c] = b1 - b3
                    tb[u, 8, c] = e0 - e2
                    tb[u, 9, c] = e1 + e2
                    tb[u, 10, c] = e2 - e1
                    tb[u, 11, c] = e1 - e3
                    tb[u, 12, c] = f0 - f2
                    tb[u, 13, c] = f1 + f2
                    tb[u, 14, c] = f2 - f1
                    tb[u, 15, c] = f1 - f3
        _scatter_planes(tb, V, n * TT)


@njit(error_model="numpy", cache=True, parallel=True)
def _input_parallel(x, V, n_chunks, ph, pw, TH, TW):
    N = x.shape[0]
    for k in prange(n_chunks):
        _input_images(x, V, k * N // n_chunks, (k + 1) * N // n_chunks, ph, pw, TH, TW)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _input_adjoint_images(dV, dx, n0, n1, ph, pw, TH, TW):
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    Wp = 2 * TW + 2
    dxh = np.empty(((2 * TH + 2) * Wp, C), dtype=dx.dtype)
    TT = TH * TW
    tb = np.empty((TT, 16, C), dtype=dx.dtype)
    for n in range(n0, n1):
        _gather_planes(dV, tb, n * TT)
        dxh[:] = 0
        for th in range(TH):
            for tw in range(TW):
                u = th * TW + tw
                r = 2 * th * Wp + 2 * tw
                for c in range(C):
                    v0, v1, v2, v3 = tb[u, 0, c], tb[u, 1, c], tb[u, 2, c], tb[u, 3, c]
                    v4, v5, v6, v7 = tb[u, 4, c], tb[u, 5, c], tb[u, 6, c], tb[u, 7, c]
                    v8, v9, v10, v11 = tb[u, 8, c], tb[u, 9, c], tb[u, 10, c], tb[u, 11, c]
                    v12, v13, v14, v15 = tb[u, 12, c], tb[u, 13, c], tb[u, 14, c], tb[u, 15, c]
                    # columns: dV B^T (B = (B^T)^T: rows [1, 0, 0, 0], [0, 1, -1, 1], [-1, 1, 1, 0], [0, 0, 0, -1])
                    a0, a1, a2, a3 = v0, v1 - v2 + v3, v1 + v2 - v0, -v3
                    b0, b1, b2, b3 = v4, v5 - v6 + v7, v5 + v6 - v4, -v7
                    e0, e1, e2, e3 = v8, v9 - v10 + v11, v9 + v10 - v8, -v11
                    f0, f1, f2, f3 = v12, v13 - v14 + v15, v13 + v14 - v12, -v15
                    # rows: B (dV B^T)
                    dxh[r, c] += a0
                    dxh[r + 1, c] += a1
                    dxh[r + 2, c] += a2
                    dxh[r + 3, c] += a3
                    dxh[r + Wp, c] += b0 - e0 + f0
                    dxh[r + Wp + 1, c] += b1 - e1 + f1
                    dxh[r + Wp + 2, c] += b2 - e2 + f2
                    dxh[r + Wp + 3, c] += b3 - e3 + f3
                    dxh[r + 2 * Wp, c] += b0 + e0 - a0
                    dxh[r + 2 * Wp + 1, c] += b1 + e1 - a1
                    dxh[r + 2 * Wp + 2, c] += b2 + e2 - a2
                    dxh[r + 2 * Wp + 3, c] += b3 + e3 - a3
                    dxh[r + 3 * Wp, c] -= f0
                    dxh[r + 3 * Wp + 1, c] -= f1
                    dxh[r + 3 * Wp + 2, c] -= f2
                    dxh[r + 3 * Wp + 3, c] -= f3
        for c in range(C):
            for h in range(H):
                for w in range(W):
                    dx[n, c, h, w] = dxh[(h + ph) * Wp + w + pw, c]


@njit(error_model="numpy", cache=True, parallel=True)
def _input_adjoint_parallel(dV, dx, n_chunks, ph, pw, TH, TW):
    N = dx.shape[0]
    for k in prange(n_chunks):
        _input_adjoint_images(dV, dx, k * N // n_chunks, (k + 1) * N // n_chunks, ph, pw, TH, TW)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _output_images(M, y, n0, n1, TH, TW):
    O, OH, OW = y.shape[1], y.shape[2], y.shape[3]
    yh = np.empty((2 * TH * 2 * TW, O), dtype=y.dtype)      # one image's output, channels-last
    Wo = 2 * TW
    TT = TH * TW
    tb = np.empty((TT, 16, O), dtype=y.dtype)
    for n in range(n0, n1):
        _gather_planes(M, tb, n * TT)
        for th in range(TH):
            for tw in range(TW):
                u = th * TW + tw
                r = 2 * th * Wo + 2 * tw
                for o in range(O):
                    m0, m1, m2, m3 = tb[u, 0, o], tb[u, 1, o], tb[u, 2, o], tb[u, 3, o]
                    m4, m5, m6, m7 = tb[u, 4, o], tb[u, 5, o], tb[u, 6, o], tb[u, 7, o]
                    m8, m9, m10, m11 = tb[u, 8, o], tb[u, 9, o], tb[u, 10, o], tb[u, 11, o]
                    m12, m13, m14, m15 = tb[u, 12, o], tb[u, 13, o], tb[u, 14, o], tb[u, 15, o]
                    # columns: M A
                    a0, a1 = m0 + m1 + m2, m1 - m2 - m3
                    b0, b1 = m4 + m5 + m6, m5 - m6 - m7
                    e0, e1 = m8 + m9 + m10, m9 - m10 - m11
                    f0, f1 = m12 + m13 + m14, m13 - m14 - m15
                    # rows: A^T (M A)
                    yh[r, o] = a0 + b0 + e0
                    yh[r + 1, o] = a1 + b1 + e1
                    yh[r + Wo, o] = b0 - e0 - f0
                    yh[r + Wo + 1, o] = b1 - e1 - f1
        for o in range(O):
            for h in range(OH):
                for w in range(OW):
                    y[n, o, h, w] = yh[h * Wo + w, o]


@njit(error_model="numpy", cache=True, parallel=True)
def _output_parallel(M, y, n_chunks, TH, TW):
    N = y.shape[0]
    for k in prange(n_chunks):
        _output_images(M, y, k * N // n_chunks, (k + 1) * N // n_chunks, TH, TW)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _output_adjoint_images(g, dM, n0, n1, TH, TW):
    O, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    Wo = 2 * TW
    gh = np.zeros((2 * TH * Wo, O), dtype=g.dtype)    # one image's gradient, channels-last, zero-padded
    TT = TH * TW
    tb = np.empty((TT, 16, O), dtype=g.dtype)
    for n in range(n0, n1):
        for o in range(O):
            for h in range(OH):
                for w in range(OW):
                    gh[h * Wo + w, o] = g[n, o, h, w]
        for th in range(TH):
            for tw in range(TW):
                u = th * TW + tw
                r = 2 * th * Wo + 2 * tw
                for o in range(O):
                    g00, g01 = gh[r, o], gh[r + 1, o]
                    g10, g11 = gh[r + Wo, o], gh[r + Wo + 1, o]
                    # rows: A g (A = (A^T)^T: rows [1, 0], [1, 1], [1, -1], [0, -1])
                    a0, a1 = g00, g01
                    b0, b1 = g00 + g10, g01 + g11
                    e0, e1 = g00 - g10, g01 - g11
                    f0, f1 = -g10, -g11
                    # columns: (A g) A^T
                    tb[u, 0, o], tb[u, 1, o], tb[u, 2, o], tb[u, 3, o] = a0, a0 + a1, a0 - a1, -a1
                    tb[u, 4, o], tb[u, 5, o], tb[u, 6, o], tb[u, 7, o] = b0, b0 + b1, b0 - b1, -b1
                    tb[u, 8, o], tb[u, 9, o], tb[u, 10, o], tb[u, 11, o] = e0, e0 + e1, e0 - e1, -e1
                    tb[u, 12, o], tb[u, 13, o], tb[u, 14, o], tb[u, 15, o] = f0, f0 + f1, f0 - f1, -f1
        _scatter_planes(tb, dM, n * TT)


@njit(error_model="numpy", cache=True, parallel=True)
def _output_adjoint_parallel(g, dM, n_chunks, TH, TW):
    N = g.shape[0]
    for k in prange(n_chunks):
        _output_adjoint_images(g, dM, k * N // n_chunks, (k + 1) * N // n_chunks, TH, TW)


def _chunks(n_images, size):
    """How many image chunks to split a transform into: one per image up to the thread count
    (serial below the layer kernels' threshold or where they may not run in parallel)."""
    import numba
    if n_images <= 1 or not layer_parallel(size):
        return 1
    return max(1, min(n_images, numba.get_num_threads()))


def winograd_input(x, ph, pw, TH, TW, out=None):
    """x (N, C, H, W), C-contiguous -> V (16, N*TH*TW, C) (written into ``out`` when given)."""
    N, C = x.shape[:2]
    V = np.empty((16, N * TH * TW, C), dtype=x.dtype) if out is None else out
    if V.size == 0:
        return V
    k = _chunks(N, V.size)
    if k == 1:
        return winograd_input_serial(x, ph, pw, TH, TW, V)
    _input_parallel(x, V, k, ph, pw, TH, TW)
    return V


def winograd_input_adjoint(dV, N, C, H, W, ph, pw, TH, TW, out=None):
    """dV (16, N*TH*TW, C), C-contiguous -> dx (N, C, H, W) (into ``out``, C-contiguous, when given)."""
    dx = np.empty((N, C, H, W), dtype=dV.dtype) if out is None else out
    if dx.size == 0:
        return dx
    k = _chunks(N, dV.size)
    if k == 1:
        return winograd_input_adjoint_serial(dV, N, C, H, W, ph, pw, TH, TW, dx)
    _input_adjoint_parallel(dV, dx, k, ph, pw, TH, TW)
    return dx


def winograd_output(M, N, O, OH, OW, TH, TW, out=None):
    """M (16, N*TH*TW, O), C-contiguous -> y (N, O, OH, OW) (into ``out``, C-contiguous, when given)."""
    y = np.empty((N, O, OH, OW), dtype=M.dtype) if out is None else out
    if y.size == 0:
        return y
    k = _chunks(N, M.size)
    if k == 1:
        return winograd_output_serial(M, N, O, OH, OW, TH, TW, y)
    _output_parallel(M, y, k, TH, TW)
    return y


def winograd_output_adjoint(g, TH, TW, out=None):
    """g (N, O, OH, OW), C-contiguous -> dM (16, N*TH*TW, O) (into ``out`` when given)."""
    N, O = g.shape[:2]
    dM = np.empty((16, N * TH * TW, O), dtype=g.dtype) if out is None else out
    if dM.size == 0:
        return dM
    k = _chunks(N, dM.size)
    if k == 1:
        return winograd_output_adjoint_serial(g, TH, TW, dM)
    _output_adjoint_parallel(g, dM, k, TH, TW)
    return dM


# The same four maps on the calling thread only, with the GIL released: conv2d's block workers
# (minidl.runtime.block_workers) run one image block each, concurrently.
def winograd_input_serial(x, ph, pw, TH, TW, out=None):
    """winograd_input on one thread."""
    N, C = x.shape[:2]
    V = np.empty((16, N * TH * TW, C), dtype=x.dtype) if out is None else out
    if V.size:
        _input_images(x, V, 0, N, ph, pw, TH, TW)
    return V


def winograd_input_adjoint_serial(dV, N, C, H, W, ph, pw, TH, TW, out=None):
    """winograd_input_adjoint on one thread."""
    dx = np.empty((N, C, H, W), dtype=dV.dtype) if out is None else out
    if dx.size:
        _input_adjoint_images(dV, dx, 0, N, ph, pw, TH, TW)
    return dx


def winograd_output_serial(M, N, O, OH, OW, TH, TW, out=None):
    """winograd_output on one thread."""
    y = np.empty((N, O, OH, OW), dtype=M.dtype) if out is None else out
    if y.size:
        _output_images(M, y, 0, N, TH, TW)
    return y


def winograd_output_adjoint_serial(g, TH, TW, out=None):
    """winograd_output_adjoint on one thread."""
    N, O = g.shape[:2]
    dM = np.empty((16, N * TH * TW, O), dtype=g.dtype) if out is None else out
    if dM.size:
        _output_adjoint_images(g, dM, 0, N, TH, TW)
    return dM
