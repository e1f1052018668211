"""Winograd F(4x4, 3x3) tile transforms for conv2d (3x3, stride 1), forward and adjoint.

The math and the NumPy references are in ``minidl.ops.conv_winograd``; these
kernels compute the same four linear maps in one pass each:

    winograd_input          V[xi, t, c] = (B^T d_tc B)[xi]       d_tc: the 6x6 input tile t of channel c
    winograd_input_adjoint  dx = sum over tiles of B dV_tc B^T, added back where the tile was read
    winograd_output         y tile t of channel o = A^T M_to A  (4x4, cropped at the output's edge)
    winograd_output_adjoint dM_to = A g_to A^T                   g_to: the 4x4 output-gradient tile

with the 6x6 B^T and the 4x6 A^T of ``minidl.ops.conv_winograd`` (entries 0, +-1, +-2, +-4, +-5, +-8; their
1-D maps are the four helpers ``_bt``, ``_b``, ``_at``, ``_a`` below). Tiles are numbered
t = (n*TH + th)*TW + tw; tile (th, tw) reads input rows 4*th - ph .. 4*th - ph + 5 (columns
likewise) (zero outside the image) and writes output rows 4*th .. 4*th + 3.

Layout: the transform domain is (36, T, channels), channels innermost, so that the 36 products
M[xi] = V[xi] @ U[xi]^T are plain BLAS GEMMs on contiguous matrices ((T, 36, channels) made
BLAS read rows 36 * channels apart: the GEMMs ran 2-5x slower).

How the loops run. Each image is copied once into a zero-padded channels-last buffer whose
columns are split by phase mod 4, X[row, p, q, c] for column 4q + p (``to_channels_last``;
tile reads then need no bounds checks). In it, column 4tw + j of every tile of a tile row lies
at phase j % 4, q = tw + j // 4, so for fixed (row, j) the tiles' values over (tw, c) are one
contiguous run of TW * channels, and so are the tile row's values in each transform plane.
Each transform is then written as two separable 1-D stages (rows, then columns, or the
reverse) of loops over such runs, each loop one destination and at most five sources
(``_lin``), which LLVM vectorises. Computing a tile's values at once, a load and a store per
value and channel, does not vectorise (too many possible overlaps to check at run time; 1.3-2.9x
slower, measured on F(2x2, 3x3)'s kernels in docs/performance.md). The copies into and out of
the channels-last buffer go eight channels per pass (``_channels_last``). Work is split by
image (prange), so the adjoint's overlapping tiles (they share two rows/columns) never race.
The GPU device keeps im2col + GEMM (no cuda port of these transforms; the op's docstring says
why). The entry points check every shape against the tile geometry before a kernel runs
(``_check_*``): the kernels index without bounds checks.

The ``*_serial`` entry points run the same serial cores on the calling thread, which they
leave to other Python threads meanwhile (``nogil``): conv2d's block workers call them, one
image block per thread (``minidl.runtime.block_workers``).
"""
import numpy as np
from numba import njit, prange

from ._channels_last import from_channels_last, to_channels_last
from ._threads import layer_parallel

U = np.uintp   # the loops' offsets are unsigned (see below)
PLANES = 36    # the 6 x 6 positions xi of the transform domain


@njit(error_model="numpy", cache=True, inline="always")
def _lin(dst, d, src, offs, coefs, n, add):
    """dst[d + k] (+)= sum_i coefs[i] * src[offs[i] + k] for k < n: one run of a 1-D stage.
    ``offs`` and ``coefs`` are tuples (their length a compile-time constant, so the sum unrolls);
    one destination and at most five sources are few enough for LLVM to vectorise the loop
    after its runtime overlap checks. The offsets are made unsigned first: a signed index makes
    Numba handle negative wraparound, which turns every load into a gather."""
    d, n = U(d), U(n)
    for k in range(n):
        kk = U(k)
        acc = coefs[0] * src[U(offs[0]) + kk]
        for i in range(1, len(offs)):
            acc += coefs[i] * src[U(offs[i]) + kk]
        if add:
            acc += dst[d + kk]
        dst[d + kk] = acc


# The 1-D maps, each from the runs at src[o[i]] to the runs at dst[d + a * ds]; k holds the
# constants (1, 2, 4, 5, 8) in the arrays' dtype.
@njit(error_model="numpy", cache=True, inline="always")
def _bt(dst, d, ds, src, o, n, k):
    """out_a = sum_i B^T[a, i] in_i, six from six (the input transform)."""
    one, two, four, five, _ = k
    o0, o1, o2, o3, o4, o5 = o
    _lin(dst, d, src, (o0, o2, o4), (four, -five, one), n, False)
    _lin(dst, d + ds, src, (o1, o2, o3, o4), (-four, -four, one, one), n, False)
    _lin(dst, d + 2 * ds, src, (o1, o2, o3, o4), (four, -four, -one, one), n, False)
    _lin(dst, d + 3 * ds, src, (o1, o2, o3, o4), (-two, -one, two, one), n, False)
    _lin(dst, d + 4 * ds, src, (o1, o2, o3, o4), (two, -one, -two, one), n, False)
    _lin(dst, d + 5 * ds, src, (o1, o3, o5), (four, -five, one), n, False)


@njit(error_model="numpy", cache=True, inline="always")
def _b(dst, d, ds, src, o, n, k, add):
    """out_i (+)= sum_a B^T[a, i] in_a, six from six (the input transform's adjoint)."""
    one, two, four, five, _ = k
    o0, o1, o2, o3, o4, o5 = o
    _lin(dst, d, src, (o0,), (four,), n, add)
    _lin(dst, d + ds, src, (o1, o2, o3, o4, o5), (-four, four, -two, two, four), n, add)
    _lin(dst, d + 2 * ds, src, (o0, o1, o2, o3, o4), (-five, -four, -four, -one, -one), n, add)
    _lin(dst, d + 3 * ds, src, (o1, o2, o3, o4, o5), (one, -one, two, -two, -five), n, add)
    _lin(dst, d + 4 * ds, src, (o0, o1, o2, o3, o4), (one, one, one, one, one), n, add)
    _lin(dst, d + 5 * ds, src, (o5,), (one,), n, add)


@njit(error_model="numpy", cache=True, inline="always")
def _at(dst, d, ds, src, o, n, k):
    """out_b = sum_i A^T[b, i] in_i, four from six (the output transform)."""
    one, two, four, _, eight = k
    o0, o1, o2, o3, o4, o5 = o
    _lin(dst, d, src, (o0, o1, o2, o3, o4), (one, one, one, one, one), n, False)
    _lin(dst, d + ds, src, (o1, o2, o3, o4), (one, -one, two, -two), n, False)
    _lin(dst, d + 2 * ds, src, (o1, o2, o3, o4), (one, one, four, four), n, False)
    _lin(dst, d + 3 * ds, src, (o1, o2, o3, o4, o5), (one, -one, eight, -eight, one), n, False)


@njit(error_model="numpy", cache=True, inline="always")
def _a(dst, d, ds, src, o, n, k):
    """out_i = sum_b A^T[b, i] in_b, six from four (the output transform's adjoint)."""
    one, two, four, _, eight = k
    o0, o1, o2, o3 = o
    _lin(dst, d, src, (o0,), (one,), n, False)
    _lin(dst, d + ds, src, (o0, o1, o2, o3), (one, one, one, one), n, False)
    _lin(dst, d + 2 * ds, src, (o0, o1, o2, o3), (one, -one, one, -one), n, False)
    _lin(dst, d + 3 * ds, src, (o0, o1, o2, o3), (one, two, four, eight), n, False)
    _lin(dst, d + 4 * ds, src, (o0, o1, o2, o3), (one, -two, four, -eight), n, False)
    _lin(dst, d + 5 * ds, src, (o3,), (one,), n, False)


@njit(error_model="numpy", cache=True, inline="always")
def _constants(dtype):
    t = dtype.type
    return t(1.0), t(2.0), t(4.0), t(5.0), t(8.0)


@njit(error_model="numpy", cache=True, inline="always")
def _every4(o, s):
    """The offsets of four runs s apart from o."""
    return o, o + s, o + 2 * s, o + 3 * s


@njit(error_model="numpy", cache=True, inline="always")
def _every6(o, s):
    """The offsets of six runs s apart from o."""
    return o, o + s, o + 2 * s, o + 3 * s, o + 4 * s, o + 5 * s


@njit(error_model="numpy", cache=True, inline="always")
def _phase_columns(o, A, C):
    """The offsets of tile columns j = 0..5 in a row at o of phase-split columns: column
    4tw + j lies at phase j % 4 (A apart), q = tw + j // 4 (C apart)."""
    return o, o + A, o + 2 * A, o + 3 * A, o + C, o + A + C


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _input_images(x, Vf, ps, n0, n1, ph, pw, TH, TW):
    """V = B^T d B. Rows first, on whole padded rows: R[a] = sum_i B^T[a, i] X[4th + i];
    then columns: V[(a, b)] = sum_j B^T[b, j] R[a, column 4tw + j], one run of TW*C values per
    plane and tile row."""
    C = x.shape[1]
    Q = TW + 1                          # padded columns per phase
    A = Q * C
    row = 4 * A
    run = TW * C
    X = np.zeros((4 * TH + 2) * row, dtype=x.dtype)   # padding zeroed once; images overwrite the rest
    R = np.empty(6 * row, dtype=x.dtype)
    k = _constants(x.dtype)
    for n in range(n0, n1):
        to_channels_last(x, n, X, ph, pw, row, A, C)
        for th in range(TH):
            _bt(R, 0, row, X, _every6(4 * th * row, row), row, k)
            t = (n * TH + th) * run
            for a in range(6):
                _bt(Vf, 6 * a * ps + t, ps, R, _phase_columns(a * row, A, C), run, k)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _input_adjoint_images(Vf, ps, dx, n0, n1, ph, pw, TH, TW):
    """dd = B dV B^T, added where the tile was read. Columns first:
    Z[a, j] = sum_b B^T[b, j] dV[(a, b)]; then rows: X[4th + i, column 4tw + j] +=
    sum_a B^T[a, i] Z[a, j]. Within one run the tiles' columns 4tw + j are distinct, so the
    overlapping tiles add in order."""
    C = dx.shape[1]
    Q = TW + 1
    A = Q * C
    row = 4 * A
    run = TW * C
    X = np.empty((4 * TH + 2) * row, dtype=dx.dtype)
    Z = np.empty(36 * run, dtype=dx.dtype)       # Z[a, j] for one tile row
    k = _constants(dx.dtype)
    for n in range(n0, n1):
        X[:] = 0
        for th in range(TH):
            t = (n * TH + th) * run
            for a in range(6):
                _b(Z, 6 * a * run, run, Vf, _every6(6 * a * ps + t, ps), run, k, False)
            cols = _phase_columns(4 * th * row, A, C)
            for j in range(6):
                _b(X, cols[j], row, Z, _every6(j * run, 6 * run), run, k, True)
        from_channels_last(X, dx, n, ph, pw, row, A, C)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _output_images(Mf, ps, y, n0, n1, TH, TW):
    """y = A^T M A. Columns first: Z[a, b'] = sum_b A^T[b', b] M[(a, b)]; then rows:
    Y[4th + a', column phase b'] = sum_a A^T[a', a] Z[a, b'] (cropped at the edge)."""
    O = y.shape[1]
    run = TW * O
    row = 4 * run                       # one output row, its four column phases
    Y = np.empty(4 * TH * row, dtype=y.dtype)
    Z = np.empty(24 * run, dtype=y.dtype)   # Z[a, b'] for one tile row
    k = _constants(y.dtype)
    for n in range(n0, n1):
        for th in range(TH):
            t = (n * TH + th) * run
            for a in range(6):
                _at(Z, 4 * a * run, run, Mf, _every6(6 * a * ps + t, ps), run, k)
            for bp in range(4):
                _at(Y, 4 * th * row + bp * run, row, Z, _every6(bp * run, 4 * run), run, k)
        from_channels_last(Y, y, n, 0, 0, row, run, O)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _output_adjoint_images(g, Df, ps, n0, n1, TH, TW):
    """dM = A g A^T. Rows first, on whole rows: Zr[a] = sum_a' A^T[a', a] G[4th + a'];
    then columns: dM[(a, b)] = sum_b' A^T[b', b] Zr[a, column phase b']."""
    O = g.shape[1]
    run = TW * O
    row = 4 * run
    G = np.zeros(4 * TH * row, dtype=g.dtype)   # zero past OH, OW, set once
    Zr = np.empty(6 * row, dtype=g.dtype)
    k = _constants(g.dtype)
    for n in range(n0, n1):
        to_channels_last(g, n, G, 0, 0, row, run, O)
        for th in range(TH):
            _a(Zr, 0, row, G, _every4(4 * th * row, row), row, k)
            t = (n * TH + th) * run
            for a in range(6):
                _a(Df, 6 * a * ps + t, ps, Zr, _every4(a * row, run), run, k)


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
    arithmetic. P is (36, T, K) with contiguous rows: a C-contiguous array or a slice of
    tiles of one (conv2d's blocks write into the kept V through such slices)."""
    item = P.itemsize
    rows_ok = P.ndim == 3 and (P.shape[2] <= 1 or P.strides[2] == item) and (
        P.shape[1] <= 1 or P.strides[1] == P.shape[2] * item)
    if not rows_ok or P.shape[0] != PLANES or P.strides[0] < 0 or P.strides[0] % item:
        raise ValueError(f"winograd: expected ({PLANES}, tiles, channels) planes with contiguous rows, got shape "
                         f"{P.shape} and strides {P.strides}")
    ps = P.strides[0] // item
    if P.flags.c_contiguous:
        return P.reshape(-1), ps
    span = (PLANES - 1) * ps + P.shape[1] * P.shape[2]    # a slice of tiles: a view of its span (a few us)
    return np.lib.stride_tricks.as_strided(P, shape=(span,), strides=(item,)), ps


def _check_shape(what, a, shape):
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"winograd: expected {what} of shape {tuple(shape)}, got {tuple(a.shape)}")


def _check_image(what, a, ph, pw, TH, TW):
    """An (N, C, H, W) input side (x or dx) the tiles' padded buffer holds: H + ph <= 4 TH + 2
    rows, W + pw <= 4 (TW + 1) columns."""
    if a.ndim != 4 or min(ph, pw, TH, TW) < 0 or a.shape[2] + ph > 4 * TH + 2 or a.shape[3] + pw > 4 * TW + 4:
        raise ValueError(f"winograd: expected {what} (N, C, H, W) with H + ph <= {4 * TH + 2} and W + pw <= "
                         f"{4 * TW + 4} for {TH} x {TW} tiles, got shape {tuple(a.shape)}, padding ({ph}, {pw})")


def _check_output(what, a, TH, TW):
    """An (N, O, OH, OW) output side (y or g) the tiles cover: OH <= 4 TH, OW <= 4 TW."""
    if a.ndim != 4 or min(TH, TW) < 0 or a.shape[2] > 4 * TH or a.shape[3] > 4 * TW:
        raise ValueError(f"winograd: expected {what} (N, O, OH, OW) with OH <= {4 * TH} and OW <= {4 * TW} for "
                         f"{TH} x {TW} tiles, got shape {tuple(a.shape)}")


def _input(x, ph, pw, TH, TW, out, parallel):
    _check_image("x", x, ph, pw, TH, TW)
    N, C = x.shape[:2]
    V = np.empty((PLANES, N * TH * TW, C), dtype=x.dtype) if out is None else out
    _check_shape("V", V, (PLANES, N * TH * TW, C))
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
    _check_shape("dV", dV, (PLANES, N * TH * TW, C))
    dx = np.empty((N, C, H, W), dtype=dV.dtype) if out is None else out
    _check_shape("dx", dx, (N, C, H, W))
    _check_image("dx", dx, ph, pw, TH, TW)
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
    _check_shape("M", M, (PLANES, N * TH * TW, O))
    y = np.empty((N, O, OH, OW), dtype=M.dtype) if out is None else out
    _check_shape("y", y, (N, O, OH, OW))
    _check_output("y", y, TH, TW)
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
    _check_output("g", g, TH, TW)
    N, O = g.shape[:2]
    dM = np.empty((PLANES, N * TH * TW, O), dtype=g.dtype) if out is None else out
    _check_shape("dM", dM, (PLANES, N * TH * TW, O))
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
    """x (N, C, H, W), C-contiguous -> V (36, N*TH*TW, C) (written into ``out`` when given)."""
    return _input(x, ph, pw, TH, TW, out, True)


def winograd_input_adjoint(dV, N, C, H, W, ph, pw, TH, TW, out=None):
    """dV (36, N*TH*TW, C) -> dx (N, C, H, W) (into ``out``, C-contiguous, when given)."""
    return _input_adjoint(dV, N, C, H, W, ph, pw, TH, TW, out, True)


def winograd_output(M, N, O, OH, OW, TH, TW, out=None):
    """M (36, N*TH*TW, O) -> y (N, O, OH, OW) (into ``out``, C-contiguous, when given)."""
    return _output(M, N, O, OH, OW, TH, TW, out, True)


def winograd_output_adjoint(g, TH, TW, out=None):
    """g (N, O, OH, OW), C-contiguous -> dM (36, N*TH*TW, O) (into ``out`` when given)."""
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
