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
M[xi] = V[xi] @ U[xi]^T are plain BLAS GEMMs on contiguous matrices ((T, 16, channels) made
BLAS read rows 16 * channels apart: the GEMMs ran 2-5x slower).

How the loops run. Each image is copied once into a zero-padded channels-last buffer whose
columns are split by parity, X[row, p, q, c] for column 2q + p (``_to_parity_rows``; tile reads
then need no bounds checks). In it, column 2tw + j of every tile of a tile row lies at parity
j % 2, q = tw + j // 2, so for fixed (row, j) the tiles' values over (tw, c) are one contiguous
run of TW * channels, and so are the tile row's values in each transform plane. Each transform
is then written as two separable 1-D stages (rows, then columns, or the reverse) of loops over
such runs, each loop one destination and at most three sources (``_set*``, ``_add*``), which
LLVM vectorises. Computing a tile's 16 values at once, 16 loads and 16 stores per channel, does
not vectorise (too many possible overlaps to check at run time) and ran 1.3-2.9x slower;
docs/performance.md has the A/B. The copies into and out of the channels-last buffer go eight
channels per pass (2.2x and 1.3x faster than one) and take a fifth to a third of each
transform's time. Work is split by image (prange), so the adjoint's overlapping tiles (they
share two rows/columns) never race. The GPU device keeps im2col + GEMM (no cuda port of these
transforms).

The ``*_serial`` entry points run the same serial cores on the calling thread, which they
leave to other Python threads meanwhile (``nogil``): conv2d's block workers call them, one
image block per thread (``minidl.runtime.block_workers``).
"""
import numpy as np
from numba import njit, prange

from ._channels_last import from_channels_last, to_channels_last
from ._threads import layer_parallel

U = np.uintp   # the loops' offsets are unsigned (see below)


# Loops over one run of n values: dst[d + k] = sum of s * src[o + k] (s = +-1, exact), k < n.
# Each has one destination and at most three sources, few enough for LLVM to vectorise it
# after its runtime overlap checks (with the sixteen of a whole tile it gives up). The offsets
# are made unsigned first: a signed index makes Numba handle negative wraparound, which turns
# every load into a gather.
@njit(error_model="numpy", cache=True, inline="always")
def _set1(dst, d, src, o1, s1, n):
    d, o1, n = U(d), U(o1), U(n)
    for k in range(n):
        kk = U(k)
        dst[d + kk] = s1 * src[o1 + kk]


@njit(error_model="numpy", cache=True, inline="always")
def _set2(dst, d, src, o1, s1, o2, s2, n):
    d, o1, o2, n = U(d), U(o1), U(o2), U(n)
    for k in range(n):
        kk = U(k)
        dst[d + kk] = s1 * src[o1 + kk] + s2 * src[o2 + kk]


@njit(error_model="numpy", cache=True, inline="always")
def _set3(dst, d, src, o1, s1, o2, s2, o3, s3, n):
    d, o1, o2, o3, n = U(d), U(o1), U(o2), U(o3), U(n)
    for k in range(n):
        kk = U(k)
        dst[d + kk] = s1 * src[o1 + kk] + s2 * src[o2 + kk] + s3 * src[o3 + kk]


@njit(error_model="numpy", cache=True, inline="always")
def _add1(dst, d, src, o1, s1, n):
    d, o1, n = U(d), U(o1), U(n)
    for k in range(n):
        kk = U(k)
        dst[d + kk] += s1 * src[o1 + kk]


@njit(error_model="numpy", cache=True, inline="always")
def _add3(dst, d, src, o1, s1, o2, s2, o3, s3, n):
    d, o1, o2, o3, n = U(d), U(o1), U(o2), U(o3), U(n)
    for k in range(n):
        kk = U(k)
        dst[d + kk] += s1 * src[o1 + kk] + s2 * src[o2 + kk] + s3 * src[o3 + kk]


@njit(error_model="numpy", cache=True, inline="always")
def _to_parity_rows(x, n, X, r0, c0, Q):
    """Image n of x (N, K, H, W) into X, channels-last with the columns split by parity:
    x[n, c, h, w] goes to row h + r0, column w + c0 = 2q + p, at X[row, p, q, c] (rows of
    2 * Q * K values; how the copy runs: ``_channels_last``)."""
    K = x.shape[1]
    to_channels_last(x, n, X, r0, c0, 2 * Q * K, Q * K, K)


@njit(error_model="numpy", cache=True, inline="always")
def _from_parity_rows(X, y, n, r0, c0, Q):
    """The inverse of _to_parity_rows: y[n] (K, H, W) read back from X."""
    K = y.shape[1]
    from_channels_last(X, y, n, r0, c0, 2 * Q * K, Q * K, K)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _input_images(x, Vf, ps, n0, n1, ph, pw, TH, TW):
    """V = B^T d B. Rows first, on whole padded rows: R[a] = sum_i B^T[a, i] X[2th + i];
    then columns: V[(a, b)] = sum_j B^T[b, j] R[a, column 2tw + j], one run of TW*C values per
    plane and tile row."""
    C = x.shape[1]
    Q = TW + 1                          # padded columns per parity
    row = 2 * Q * C
    run = TW * C
    X = np.zeros((2 * TH + 2) * 2 * Q * C, dtype=x.dtype)   # padding zeroed once; images overwrite the rest
    R = np.empty(4 * 2 * Q * C, dtype=x.dtype)
    one = x.dtype.type(1.0)
    # column 2tw + j of R[a] starts at: parity j % 2, q = tw + j // 2
    j0, j1, j2, j3 = 0, Q * C, C, Q * C + C
    for n in range(n0, n1):
        _to_parity_rows(x, n, X, ph, pw, Q)
        for th in range(TH):
            r0 = 2 * th * row
            r1, r2, r3 = r0 + row, r0 + 2 * row, r0 + 3 * row
            _set2(R, 0, X, r0, one, r2, -one, row)       # a = 0: d0 - d2
            _set2(R, row, X, r1, one, r2, one, row)         # a = 1: d1 + d2
            _set2(R, 2 * row, X, r2, one, r1, -one, row)    # a = 2: d2 - d1
            _set2(R, 3 * row, X, r1, one, r3, -one, row)    # a = 3: d1 - d3
            t = (n * TH + th) * TW * C
            for a in range(4):
                ra = a * row
                v = 4 * a * ps + t
                _set2(Vf, v, R, ra + j0, one, ra + j2, -one, run)
                _set2(Vf, v + ps, R, ra + j1, one, ra + j2, one, run)
                _set2(Vf, v + 2 * ps, R, ra + j2, one, ra + j1, -one, run)
                _set2(Vf, v + 3 * ps, R, ra + j1, one, ra + j3, -one, run)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _input_adjoint_images(Vf, ps, dx, n0, n1, ph, pw, TH, TW):
    """dd = B dV B^T, added where the tile was read. Columns first:
    Z[a, j] = sum_b B^T[b, j] dV[(a, b)]; then rows: X[2th + i, column 2tw + j] +=
    sum_a B^T[a, i] Z[a, j]. Within one run the tiles' columns 2tw + j are distinct, so the
    overlapping tiles add in order."""
    C = dx.shape[1]
    Q = TW + 1
    row = 2 * Q * C
    run = TW * C
    X = np.empty((2 * TH + 2) * 2 * Q * C, dtype=dx.dtype)
    Z = np.empty(16 * TW * C, dtype=dx.dtype)       # Z[a, j] for one tile row
    one = dx.dtype.type(1.0)
    for n in range(n0, n1):
        X[:] = 0
        for th in range(TH):
            t = (n * TH + th) * TW * C
            for a in range(4):
                v0 = 4 * a * ps + t
                v1, v2, v3 = v0 + ps, v0 + 2 * ps, v0 + 3 * ps
                z = 4 * a * run
                _set1(Z, z, Vf, v0, one, run)                                  # j = 0: v0
                _set3(Z, z + run, Vf, v1, one, v2, -one, v3, one, run)         # j = 1: v1 - v2 + v3
                _set3(Z, z + 2 * run, Vf, v1, one, v2, one, v0, -one, run)     # j = 2: v1 + v2 - v0
                _set1(Z, z + 3 * run, Vf, v3, -one, run)                       # j = 3: -v3
            r0 = 2 * th * row
            for j in range(4):
                xj = r0 + ((j & 1) * Q + (j >> 1)) * C
                z0 = j * run
                z1, z2, z3 = z0 + 4 * run, z0 + 8 * run, z0 + 12 * run
                _add1(X, xj, Z, z0, one, run)                                  # i = 0: Z0
                _add3(X, xj + row, Z, z1, one, z2, -one, z3, one, run)         # i = 1: Z1 - Z2 + Z3
                _add3(X, xj + 2 * row, Z, z1, one, z2, one, z0, -one, run)     # i = 2: Z1 + Z2 - Z0
                _add1(X, xj + 3 * row, Z, z3, -one, run)                       # i = 3: -Z3
        _from_parity_rows(X, dx, n, ph, pw, Q)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _output_images(Mf, ps, y, n0, n1, TH, TW):
    """y = A^T M A. Columns first: Z[a, b'] = sum_b A^T[b', b] M[(a, b)]; then rows:
    Y[2th + a', column parity b'] = sum_a A^T[a', a] Z[a, b'] (cropped at odd sizes)."""
    O = y.shape[1]
    run = TW * O
    row = 2 * run                       # one output row, both column parities
    Y = np.empty(2 * TH * 2 * TW * O, dtype=y.dtype)
    Z = np.empty(8 * TW * O, dtype=y.dtype)   # Z[a, b'] for one tile row
    one = y.dtype.type(1.0)
    for n in range(n0, n1):
        for th in range(TH):
            t = (n * TH + th) * TW * O
            for a in range(4):
                m0 = 4 * a * ps + t
                m1, m2, m3 = m0 + ps, m0 + 2 * ps, m0 + 3 * ps
                z = 2 * a * run
                _set3(Z, z, Mf, m0, one, m1, one, m2, one, run)           # b' = 0: m0 + m1 + m2
                _set3(Z, z + run, Mf, m1, one, m2, -one, m3, -one, run)   # b' = 1: m1 - m2 - m3
            y0 = 2 * th * row
            for bp in range(2):
                z0 = bp * run
                z1, z2, z3 = z0 + 2 * run, z0 + 4 * run, z0 + 6 * run
                _set3(Y, y0 + z0, Z, z0, one, z1, one, z2, one, run)          # a' = 0: Z0 + Z1 + Z2
                _set3(Y, y0 + row + z0, Z, z1, one, z2, -one, z3, -one, run)  # a' = 1: Z1 - Z2 - Z3
        _from_parity_rows(Y, y, n, 0, 0, TW)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _output_adjoint_images(g, Df, ps, n0, n1, TH, TW):
    """dM = A g A^T. Rows first, on whole rows: Zr[a] = sum_a' A^T[a', a] G[2th + a'];
    then columns: dM[(a, b)] = sum_b' A^T[b', b] Zr[a, column parity b']."""
    O = g.shape[1]
    run = TW * O
    row = 2 * run
    G = np.zeros(2 * TH * 2 * TW * O, dtype=g.dtype)   # zero past OH, OW (odd sizes), set once
    Zr = np.empty(4 * 2 * TW * O, dtype=g.dtype)
    one = g.dtype.type(1.0)
    for n in range(n0, n1):
        _to_parity_rows(g, n, G, 0, 0, TW)
        for th in range(TH):
            g0 = 2 * th * row
            g1 = g0 + row
            _set1(Zr, 0, G, g0, one, row)                 # a = 0: g0
            _set2(Zr, row, G, g0, one, g1, one, row)         # a = 1: g0 + g1
            _set2(Zr, 2 * row, G, g0, one, g1, -one, row)    # a = 2: g0 - g1
            _set1(Zr, 3 * row, G, g1, -one, row)             # a = 3: -g1
            t = (n * TH + th) * TW * O
            for a in range(4):
                z0 = a * row
                z1 = z0 + run
                d = 4 * a * ps + t
                _set1(Df, d, Zr, z0, one, run)
                _set2(Df, d + ps, Zr, z0, one, z1, one, run)
                _set2(Df, d + 2 * ps, Zr, z0, one, z1, -one, run)
                _set1(Df, d + 3 * ps, Zr, z1, -one, run)


@njit(error_model="numpy", cache=True, parallel=True)
def _input_parallel(x, Vf, ps, n_chunks, ph, pw, TH, TW):
    N = x.shape[0]
    for k in prange(n_chunks):
        _input_images(x, Vf, ps, k * N // n_chunks, (k + 1) * N // n_chunks, ph, pw, TH, TW)


@njit(error_model="numpy", cache=True, parallel=True)
def _input_adjoint_parallel(Vf, ps, dx, n_chunks, ph, pw, TH, TW):
    N = dx.shape[0]
    for k in prange(n_chunks):
        _input_adjoint_images(Vf, ps, dx, k * N // n_chunks, (k + 1) * N // n_chunks, ph, pw, TH, TW)


@njit(error_model="numpy", cache=True, parallel=True)
def _output_parallel(Mf, ps, y, n_chunks, TH, TW):
    N = y.shape[0]
    for k in prange(n_chunks):
        _output_images(Mf, ps, y, k * N // n_chunks, (k + 1) * N // n_chunks, TH, TW)


@njit(error_model="numpy", cache=True, parallel=True)
def _output_adjoint_parallel(g, Df, ps, n_chunks, TH, TW):
    N = g.shape[0]
    for k in prange(n_chunks):
        _output_adjoint_images(g, Df, ps, k * N // n_chunks, (k + 1) * N // n_chunks, TH, TW)


def _chunks(n_images, size, parallel):
    """How many image chunks to split a transform into: one per image up to the thread count
    (one on the calling thread for the serial entry points, below the layer kernels' threshold
    or where they may not run in parallel)."""
    import numba
    if not parallel or n_images <= 1 or not layer_parallel(size):
        return 1
    return max(1, min(n_images, numba.get_num_threads()))


def _flat_planes(P):
    """(P's memory as one flat view, its plane stride in elements) for the kernels' offset
    arithmetic. P is (16, T, K) with contiguous rows: a C-contiguous array or a slice of
    tiles of one (conv2d's blocks write into the kept V through such slices)."""
    item = P.itemsize
    rows_ok = P.ndim == 3 and (P.shape[2] <= 1 or P.strides[2] == item) and (
        P.shape[1] <= 1 or P.strides[1] == P.shape[2] * item)
    if not rows_ok or P.shape[0] != 16 or P.strides[0] < 0 or P.strides[0] % item:
        raise ValueError(f"winograd: expected (16, tiles, channels) planes with contiguous rows, got shape "
                         f"{P.shape} and strides {P.strides}")
    ps = P.strides[0] // item
    if P.flags.c_contiguous:
        return P.reshape(-1), ps
    span = 15 * ps + P.shape[1] * P.shape[2]    # a slice of tiles: a view of its span (a few us)
    return np.lib.stride_tricks.as_strided(P, shape=(span,), strides=(item,)), ps


def _input(x, ph, pw, TH, TW, out, parallel):
    N, C = x.shape[:2]
    V = np.empty((16, N * TH * TW, C), dtype=x.dtype) if out is None else out
    if V.size == 0:
        return V
    Vf, ps = _flat_planes(V)
    k = _chunks(N, V.size, parallel)
    if k == 1:
        _input_images(x, Vf, ps, 0, N, ph, pw, TH, TW)
    else:
        _input_parallel(x, Vf, ps, k, ph, pw, TH, TW)
    return V


def _input_adjoint(dV, N, C, H, W, ph, pw, TH, TW, out, parallel):
    dx = np.empty((N, C, H, W), dtype=dV.dtype) if out is None else out
    if dx.size == 0:
        return dx
    Vf, ps = _flat_planes(dV)
    k = _chunks(N, dV.size, parallel)
    if k == 1:
        _input_adjoint_images(Vf, ps, dx, 0, N, ph, pw, TH, TW)
    else:
        _input_adjoint_parallel(Vf, ps, dx, k, ph, pw, TH, TW)
    return dx


def _output(M, N, O, OH, OW, TH, TW, out, parallel):
    y = np.empty((N, O, OH, OW), dtype=M.dtype) if out is None else out
    if y.size == 0:
        return y
    Mf, ps = _flat_planes(M)
    k = _chunks(N, M.size, parallel)
    if k == 1:
        _output_images(Mf, ps, y, 0, N, TH, TW)
    else:
        _output_parallel(Mf, ps, y, k, TH, TW)
    return y


def _output_adjoint(g, TH, TW, out, parallel):
    N, O = g.shape[:2]
    dM = np.empty((16, N * TH * TW, O), dtype=g.dtype) if out is None else out
    if dM.size == 0:
        return dM
    Df, ps = _flat_planes(dM)
    k = _chunks(N, dM.size, parallel)
    if k == 1:
        _output_adjoint_images(g, Df, ps, 0, N, TH, TW)
    else:
        _output_adjoint_parallel(g, Df, ps, k, TH, TW)
    return dM


def winograd_input(x, ph, pw, TH, TW, out=None):
    """x (N, C, H, W), C-contiguous -> V (16, N*TH*TW, C) (written into ``out`` when given)."""
    return _input(x, ph, pw, TH, TW, out, True)


def winograd_input_adjoint(dV, N, C, H, W, ph, pw, TH, TW, out=None):
    """dV (16, N*TH*TW, C) -> dx (N, C, H, W) (into ``out``, C-contiguous, when given)."""
    return _input_adjoint(dV, N, C, H, W, ph, pw, TH, TW, out, True)


def winograd_output(M, N, O, OH, OW, TH, TW, out=None):
    """M (16, N*TH*TW, O) -> y (N, O, OH, OW) (into ``out``, C-contiguous, when given)."""
    return _output(M, N, O, OH, OW, TH, TW, out, True)


def winograd_output_adjoint(g, TH, TW, out=None):
    """g (N, O, OH, OW), C-contiguous -> dM (16, N*TH*TW, O) (into ``out`` when given)."""
    return _output_adjoint(g, TH, TW, out, True)


# The same four maps on the calling thread only, with the GIL released: conv2d's block workers
# (minidl.runtime.block_workers) run one image block each, concurrently.
def winograd_input_serial(x, ph, pw, TH, TW, out=None):
    """winograd_input on one thread."""
    return _input(x, ph, pw, TH, TW, out, False)


def winograd_input_adjoint_serial(dV, N, C, H, W, ph, pw, TH, TW, out=None):
    """winograd_input_adjoint on one thread."""
    return _input_adjoint(dV, N, C, H, W, ph, pw, TH, TW, out, False)


def winograd_output_serial(M, N, O, OH, OW, TH, TW, out=None):
    """winograd_output on one thread."""
    return _output(M, N, O, OH, OW, TH, TW, out, False)


def winograd_output_adjoint_serial(g, TH, TW, out=None):
    """winograd_output_adjoint on one thread."""
    return _output_adjoint(g, TH, TW, out, False)
