"""Direct convolution kernels for small stride-1 conv2d layers on the CPU, forward and backward.

The math and the NumPy references are in ``minidl.ops.conv_direct``; these kernels compute
the same three sums without columns and without BLAS:

    y[n, o, oh, ow] = b[o] + sum_{c, i, j} w[o, c, i, j] xpad[n, c, oh + i, ow + j]
    dW[o, c, i, j]  = sum_{n, oh, ow} g[n, o, oh, ow] xpad[n, c, oh + i, ow + j]
    dxpad[n, c, h, w] = sum_{o, i, j} w[o, c, kh-1-i, kw-1-j] gpad[n, o, h + i, w + j]

(gpad: g with kh - 1 rows and kw - 1 columns of zeros on every side; dx is dxpad cropped).

The padded-width grid. Image n's channel c is copied, zero-padded, into one flat row X[c] of
Hp*Wp values (Hp = H + 2 ph, Wp = W + 2 pw; kw - 1 zeros after it), pixel (h, w) of the padded
image at h*Wp + w. On that grid a tap (i, j) is a constant shift: output pixel (oh, ow), at
q = oh*Wp + ow, reads X[c, q + i*Wp + j]. So the whole image's output, computed at every q
of the OH*Wp grid positions (the Wp - OW positions past each output row are computed and
dropped: rows never need a bounds check), is, per output channel, a sum of shifted rows:

    acc[o, q] = b[o] + sum_{c, i, j} w[o, c, i, j] X[c, q + i*Wp + j]

a loop over q that LLVM vectorises, one FMA per tap per position, with the image in L1/L2.
The loop takes the taps of a kernel row in runs of up to five (``_taps``, ``_taps1``) and two
output channels at once (four for runs of five when O is a multiple of four): each loaded X
value then serves up to twenty multiply-adds, and acc is loaded and stored once per run instead
of once per tap. (One tap per pass ran conv1 of LeNet 2.3x slower.) A 3x3 kernel goes a whole
window per pass (``_window3``, ``_window_sums3``): its three rows are shifts by 0, Wp and 2 Wp,
so acc is loaded and stored once per input channel (forward 12-21% faster than three runs of
three, backward 12-24%). The offsets are unsigned: a signed index makes Numba check for negative
wraparound, which turns every load into a gather. Small images go through in groups laid end to
end on the grid (image k of a group at k*Hp*Wp; the zeros between them are the padding), so that
a pass runs over about GROUP_POSITIONS positions and LLVM's scalar remainder loop is a small
part of it; large ones in blocks of BLOCK positions, so that the acc rows of a block stay in L1.

The gradients use the same grid: g is laid out with kh - 1 rows plus kw - 1 values of zeros
before it (F = (kh-1)*Wp + kw - 1) and zeros at the dropped positions, so that

    dW[o, c, i, j]   += sum_q G[o, F + q] X[c, q + i*Wp + j]              (``_tap_sums``)
    dxpad[c, r]       = sum_{o, i, j} wflip[c, o, i, j] G[o, r + i*Wp + j]   r < Hp*Wp

the second being the forward loop again, over the flipped, transposed filter. The dropped
positions are zeros in G, so they add nothing to either (they number Wp - OW = kw - 1 per row:
on the grid they are g's left and right padding at once). A zero times an infinite input is
NaN, though: where x or w holds an inf, dW or dx may be NaN where the exact sums are infinite
(Winograd's transforms, which subtract inputs, do the same).

``_correlate`` and ``_tap_sums`` are compiled on their own and called once per group of images,
not inlined into the kernels: the serial and parallel kernels, forward and dx, then share one
machine code (first-call compile of both dtypes 34 -> 21 s, the same speed; docs/performance.md).

Work is split by images: each chunk (one per thread of Numba's pool, or one on the calling
thread for small problems) owns its scratch rows and its float64 partial of dW and db, which
are summed at the end (no atomics). Each kernel is one source compiled twice
(``_threads.serial_and_parallel``). The GPU keeps im2col + GEMM: its GEMMs are fast at these
sizes, and these loops are written for a CPU's caches.
"""
import numpy as np
from numba import njit, prange

from ._threads import chunk_bounds, layer_parallel, serial_and_parallel

U = np.uintp   # unsigned offsets (see the module docstring)
GROUP_POSITIONS = 1024   # grid positions per pass of the loops over a group of images
BLOCK = 2048             # positions per block of the loops: two acc rows of it fit in L1
_SPLIT = serial_and_parallel(error_model="numpy", cache=True, fastmath={"contract"})
_SPLIT_SUMS = serial_and_parallel(error_model="numpy", cache=True, fastmath={"contract", "reassoc"})


# acc[o, r] and acc[o + 1, r] (and + 2, + 3) += taps j .. j + m - 1 of kernel row i, r0 <= r < r1 -------
@njit(error_model="numpy", cache=True, inline="always")
def _five(w, o, c, i, j):
    """Taps j .. j + 4 of row i of w[o, c]."""
    return w[o, c, i, j], w[o, c, i, j + 1], w[o, c, i, j + 2], w[o, c, i, j + 3], w[o, c, i, j + 4]


@njit(error_model="numpy", cache=True, inline="always")
def _five_at(src, c, k):
    """src[c, k .. k + 4] (k unsigned)."""
    return src[c, k], src[c, k + U(1)], src[c, k + U(2)], src[c, k + U(3)], src[c, k + U(4)]


@njit(error_model="numpy", cache=True, inline="always")
def _dot5(a, v):
    return a[0] * v[0] + a[1] * v[1] + a[2] * v[2] + a[3] * v[3] + a[4] * v[4]


@njit(error_model="numpy", cache=True, inline="always")
def _dot3(a, v):
    return a[0] * v[0] + a[1] * v[1] + a[2] * v[2]


@njit(error_model="numpy", cache=True, inline="always")
def _taps(acc, o, src, c, base, r0, r1, w, i, j, take, take_at, dot):
    """A run of taps over two output channels: ``take`` reads the run's weights (``_five``,
    ``_three``), ``take_at`` the source values under them (``_five_at``, ``_three_at``), ``dot``
    sums their products (``_dot5``, ``_dot3``; spelled out: a loop over the tuple compiled 2 s
    slower)."""
    a, b = take(w, o, c, i, j), take(w, o + 1, c, i, j)
    for r in range(r0, r1):
        rr = U(r)
        v = take_at(src, c, rr + base)
        acc[o, rr] += dot(a, v)
        acc[o + 1, rr] += dot(b, v)


@njit(error_model="numpy", cache=True, inline="always")
def _taps5x4(acc, o, src, c, base, r0, r1, w, i, j):
    a, b = _five(w, o, c, i, j), _five(w, o + 1, c, i, j)
    d, e = _five(w, o + 2, c, i, j), _five(w, o + 3, c, i, j)
    for r in range(r0, r1):
        rr = U(r)
        v = _five_at(src, c, rr + base)
        acc[o, rr] += _dot5(a, v)
        acc[o + 1, rr] += _dot5(b, v)
        acc[o + 2, rr] += _dot5(d, v)
        acc[o + 3, rr] += _dot5(e, v)


@njit(error_model="numpy", cache=True, inline="always")
def _three(w, o, c, i, j):
    """Taps j .. j + 2 of row i of w[o, c]."""
    return w[o, c, i, j], w[o, c, i, j + 1], w[o, c, i, j + 2]


@njit(error_model="numpy", cache=True, inline="always")
def _three_at(src, c, k):
    """src[c, k .. k + 2] (k unsigned)."""
    return src[c, k], src[c, k + U(1)], src[c, k + U(2)]


@njit(error_model="numpy", cache=True, inline="always")
def _taps1(acc, o, src, c, base, r0, r1, w, i, j):
    a0, b0 = w[o, c, i, j], w[o + 1, c, i, j]
    for r in range(r0, r1):
        rr = U(r)
        v0 = src[c, rr + base]
        acc[o, rr] += a0 * v0
        acc[o + 1, rr] += b0 * v0


# A whole 3x3 window per pass (its rows at offsets 0, Wp, 2 Wp): nine loads serve 18
# multiply-adds and acc is loaded and stored once per input channel -----------------------
@njit(error_model="numpy", cache=True, inline="always")
def _window3(acc, o, src, c, Wp, r0, r1, w):
    """acc[o and o + 1, r] += the 3x3 window of w[o or o + 1, c] at src[c, r], r0 <= r < r1."""
    a0, a1, a2 = _three(w, o, c, 0, 0), _three(w, o, c, 1, 0), _three(w, o, c, 2, 0)
    b0, b1, b2 = _three(w, o + 1, c, 0, 0), _three(w, o + 1, c, 1, 0), _three(w, o + 1, c, 2, 0)
    s1, s2 = U(Wp), U(2 * Wp)
    for r in range(r0, r1):
        rr = U(r)
        v0, v1, v2 = _three_at(src, c, rr), _three_at(src, c, rr + s1), _three_at(src, c, rr + s2)
        acc[o, rr] += _dot3(a0, v0) + _dot3(a1, v1) + _dot3(a2, v2)
        acc[o + 1, rr] += _dot3(b0, v0) + _dot3(b1, v1) + _dot3(b2, v2)


@njit(error_model="numpy", cache=True, fastmath={"contract"}, nogil=True)
def _correlate(acc, src, w, Wp, R):
    """acc[o, r] += sum_{c, i, j} w[o, c, i, j] src[c, r + i*Wp + j] for r < R; w has an even
    number of output channels (the callers pad it with a zero channel). In blocks of BLOCK
    positions, so that a block's two acc rows stay in L1 over all the taps."""
    O, C, kh, kw = w.shape
    for r0 in range(0, R, BLOCK):
        r1 = min(R, r0 + BLOCK)
        if kh == 3 and kw == 3:
            for o in range(0, O, 2):
                for c in range(C):
                    _window3(acc, o, src, c, Wp, r0, r1, w)
            continue
        step = 4 if O % 4 == 0 else 2
        for o in range(0, O, step):
            for c in range(C):
                for i in range(kh):
                    j = 0
                    while j < kw:
                        base = U(i * Wp + j)
                        if kw - j >= 5 and step == 4:
                            _taps5x4(acc, o, src, c, base, r0, r1, w, i, j)
                            j += 5
                        elif kw - j >= 5:
                            _taps(acc, o, src, c, base, r0, r1, w, i, j, _five, _five_at, _dot5)
                            j += 5
                        elif kw - j >= 3:
                            for p in range(o, o + step, 2):
                                _taps(acc, p, src, c, base, r0, r1, w, i, j, _three, _three_at, _dot3)
                            j += 3
                        else:
                            for p in range(o, o + step, 2):
                                _taps1(acc, p, src, c, base, r0, r1, w, i, j)
                            j += 1


@njit(error_model="numpy", cache=True, inline="always")
def _to_grid(x, n, X, first, ph, pw):
    """Image n of x (N, C, H, W) into the zero-padded grid rows X: x[n, c, h, w] at
    X[c, first + (h + ph)*Wp + w + pw]; X's other values are left as they are (zeros)."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    Wp = W + 2 * pw
    for c in range(C):
        for h in range(H):
            base = first + (h + ph) * Wp + pw
            for w in range(W):
                X[c, base + w] = x[n, c, h, w]


@njit(error_model="numpy", cache=True, inline="always")
def _from_grid(A, first, y, n, Wp):
    """y[n, o, a, b] = A[o, first + a*Wp + b] for every (o, a, b) of y's image n."""
    O, Ha, Wa = y.shape[1], y.shape[2], y.shape[3]
    for o in range(O):
        for a in range(Ha):
            base = first + a * Wp
            for b in range(Wa):
                y[n, o, a, b] = A[o, base + b]


def _forward_images(x, w, bias, ph, pw, y, group, n_chunks):
    """y = conv(x, w) + bias for every image; w (even O, C, kh, kw), bias (even O,). The images
    of a chunk go through in groups of ``group``, laid end to end on the grid (see the module
    docstring)."""
    N, C, H, W = x.shape
    O2, kw = w.shape[0], w.shape[3]
    Wp = W + 2 * pw
    L = (H + 2 * ph) * Wp
    Q = y.shape[2] * Wp
    for chunk in prange(n_chunks):
        n0, n1 = chunk_bounds(N, n_chunks, chunk)
        X = np.zeros((C, group * L + kw - 1), x.dtype)   # the padding stays zero; images overwrite the rest
        acc = np.empty((O2, (group - 1) * L + Q), x.dtype)
        for g0 in range(n0, n1, group):
            m = min(group, n1 - g0)
            R = (m - 1) * L + Q
            for k in range(m):
                _to_grid(x, g0 + k, X, k * L, ph, pw)
            for o in range(O2):
                for r in range(R):
                    acc[o, r] = bias[o]
            _correlate(acc, X, w, Wp, R)
            for k in range(m):
                _from_grid(acc, k * L, y, g0 + k, Wp)


_forward_images, _forward_images_parallel = _SPLIT(_forward_images)


@njit(error_model="numpy", cache=True, inline="always")
def _axpy5(a, g, v):
    """a + g v for five-tuples a and v (one multiply-add per tap, kept in registers)."""
    return a[0] + g * v[0], a[1] + g * v[1], a[2] + g * v[2], a[3] + g * v[3], a[4] + g * v[4]


@njit(error_model="numpy", cache=True, inline="always")
def _axpy3(a, g, v):
    """a + g v for three-tuples."""
    return a[0] + g * v[0], a[1] + g * v[1], a[2] + g * v[2]


@njit(error_model="numpy", cache=True, inline="always")
def _add_run(dw, chunk, o, c, i, j, a):
    """dw[chunk, o, c, i, j .. j + len(a) - 1] += a."""
    for t in range(len(a)):
        dw[chunk, o, c, i, j + t] += a[t]


@njit(error_model="numpy", cache=True, inline="always")
def _sums(dw, chunk, o, c, i, j, G, f, X, base, q0, q1, take_at, axpy, zero):
    """dw[chunk, o and o + 1, c, i, j .. j + m - 1] += sum_q G[o or o + 1, f + q] X[c, base + q + (0 .. m - 1)]
    for a run of m taps: ``take_at`` reads the m values (``_five_at``, ``_three_at``), ``axpy``
    adds g times them to m sums (``_axpy5``, ``_axpy3``) that start at ``zero`` (m zeros)."""
    a = b = zero
    for q in range(q0, q1):
        qq = U(q)
        v = take_at(X, c, qq + base)
        a = axpy(a, G[o, f + qq], v)
        b = axpy(b, G[o + 1, f + qq], v)
    _add_run(dw, chunk, o, c, i, j, a)
    _add_run(dw, chunk, o + 1, c, i, j, b)


@njit(error_model="numpy", cache=True, inline="always")
def _sums5x4(dw, chunk, o, c, i, j, G, f, X, base, q0, q1):
    """As _sums for runs of five taps and output channels o .. o + 3."""
    z = X.dtype.type(0)
    a = b = d = e = (z, z, z, z, z)
    for q in range(q0, q1):
        qq = U(q)
        v = _five_at(X, c, qq + base)
        a = _axpy5(a, G[o, f + qq], v)
        b = _axpy5(b, G[o + 1, f + qq], v)
        d = _axpy5(d, G[o + 2, f + qq], v)
        e = _axpy5(e, G[o + 3, f + qq], v)
    _add_run(dw, chunk, o, c, i, j, a)
    _add_run(dw, chunk, o + 1, c, i, j, b)
    _add_run(dw, chunk, o + 2, c, i, j, d)
    _add_run(dw, chunk, o + 3, c, i, j, e)


@njit(error_model="numpy", cache=True, inline="always")
def _window_sums3(dw, chunk, o, c, G, f, X, Wp, q0, q1):
    """dw[chunk, o and o + 1, c] (3x3) += sum_q G[o or o + 1, f + q] X[c, q + i*Wp + j]: a whole
    3x3 window per pass, as _window3 (18 sums in registers, 11 loads per 18 multiply-adds)."""
    z = X.dtype.type(0)
    a0 = a1 = a2 = b0 = b1 = b2 = (z, z, z)
    s1, s2 = U(Wp), U(2 * Wp)
    for q in range(q0, q1):
        qq = U(q)
        v0, v1, v2 = _three_at(X, c, qq), _three_at(X, c, qq + s1), _three_at(X, c, qq + s2)
        g0, g1 = G[o, f + qq], G[o + 1, f + qq]
        a0, a1, a2 = _axpy3(a0, g0, v0), _axpy3(a1, g0, v1), _axpy3(a2, g0, v2)
        b0, b1, b2 = _axpy3(b0, g1, v0), _axpy3(b1, g1, v1), _axpy3(b2, g1, v2)
    for i, (a, b) in enumerate(((a0, b0), (a1, b1), (a2, b2))):
        _add_run(dw, chunk, o, c, i, 0, a)
        _add_run(dw, chunk, o + 1, c, i, 0, b)


@njit(error_model="numpy", cache=True, inline="always")
def _sums1(dw, chunk, o, c, i, j, G, f, X, base, q0, q1):
    """As _sums for one tap."""
    z = X.dtype.type(0)
    a0, b0 = z, z
    for q in range(q0, q1):
        qq = U(q)
        v0 = X[c, qq + base]
        a0 += G[o, f + qq] * v0
        b0 += G[o + 1, f + qq] * v0
    dw[chunk, o, c, i, j] += a0
    dw[chunk, o + 1, c, i, j] += b0


@njit(error_model="numpy", cache=True, fastmath={"contract", "reassoc"}, nogil=True)
def _tap_sums(dw, chunk, G, F, X, Wp, Q):
    """dw[chunk, o, c, i, j] += sum_{q < Q} G[o, F + q] X[c, q + i*Wp + j], each sum over a block
    of BLOCK positions in the data's dtype (vectorised), added to the float64 partial; taps in
    runs of up to five and output channels in pairs (fours for runs of five where O allows), as
    _correlate (G and dw have an even number of them)."""
    O, C, kh, kw = dw.shape[1], dw.shape[2], dw.shape[3], dw.shape[4]
    f = U(F)
    z = X.dtype.type(0)
    z5, z3 = (z, z, z, z, z), (z, z, z)
    for q0 in range(0, Q, BLOCK):
        q1 = min(Q, q0 + BLOCK)
        if kh == 3 and kw == 3:
            for o in range(0, O, 2):
                for c in range(C):
                    _window_sums3(dw, chunk, o, c, G, f, X, Wp, q0, q1)
            continue
        step = 4 if O % 4 == 0 else 2
        for o in range(0, O, step):
            for c in range(C):
                for i in range(kh):
                    j = 0
                    while j < kw:
                        base = U(i * Wp + j)
                        if kw - j >= 5 and step == 4:
                            _sums5x4(dw, chunk, o, c, i, j, G, f, X, base, q0, q1)
                            j += 5
                        elif kw - j >= 5:
                            _sums(dw, chunk, o, c, i, j, G, f, X, base, q0, q1, _five_at, _axpy5, z5)
                            j += 5
                        elif kw - j >= 3:
                            for p in range(o, o + step, 2):
                                _sums(dw, chunk, p, c, i, j, G, f, X, base, q0, q1, _three_at, _axpy3, z3)
                            j += 3
                        else:
                            for p in range(o, o + step, 2):
                                _sums1(dw, chunk, p, c, i, j, G, f, X, base, q0, q1)
                            j += 1


def _backward_images(g, x, wflip, ph, pw, dx, dw, db, need_dx, group, n_chunks):
    """Per chunk of images: dW and db partials into dw[chunk] and db[chunk] (float64; dw with an
    even number of output channels, a last zero one for an odd O, or none when not wanted) and,
    with ``need_dx``, dx from the flipped, transposed filter wflip (even C, O, kh, kw). Images
    in groups of ``group`` laid end to end, as in _forward_images."""
    N, C, H, W = x.shape
    O, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    kh, kw = wflip.shape[2], wflip.shape[3]
    Hp, Wp = H + 2 * ph, W + 2 * pw
    L = Hp * Wp
    F = (kh - 1) * Wp + kw - 1
    Q = OH * Wp
    need_dw = dw.shape[1] > 0
    for chunk in prange(n_chunks):
        n0, n1 = chunk_bounds(N, n_chunks, chunk)
        # g on the grid after F zeros, zeros past each row and between images (and in a last row
        # for an odd O)
        G = np.zeros((O + O % 2, F + group * L), g.dtype)
        X = np.zeros((C if need_dw else 0, group * L + kw - 1), x.dtype)
        D = np.empty((wflip.shape[0] if need_dx else 0, group * L), g.dtype)
        for o in range(O):
            db[chunk, o] = 0.0
        for g0 in range(n0, n1, group):
            m = min(group, n1 - g0)
            for k in range(m):
                for o in range(O):
                    s = 0.0
                    for a in range(OH):
                        base = F + k * L + a * Wp
                        for b in range(OW):
                            v = g[g0 + k, o, a, b]
                            G[o, base + b] = v
                            s += v
                    db[chunk, o] += s
            if need_dw:
                for k in range(m):
                    _to_grid(x, g0 + k, X, k * L, ph, pw)
                _tap_sums(dw, chunk, G, F, X, Wp, (m - 1) * L + Q)
            if need_dx:
                D[:] = 0
                _correlate(D, G, wflip, Wp, m * L)
                for k in range(m):
                    _from_grid(D, k * L + ph * Wp + pw, dx, g0 + k, Wp)


_backward_images, _backward_images_parallel = _SPLIT_SUMS(_backward_images)


def _check(x, w, ph, pw, g=None):
    """The shapes the kernels index by, checked before they run (Numba does no bounds checks)."""
    if x.ndim != 4 or w.ndim != 4 or w.shape[1] != x.shape[1] or x.dtype != w.dtype:
        raise ValueError(f"conv_direct: expected x (N, C, H, W) and w (O, C, kh, kw) of one dtype, got "
                         f"{x.shape} {x.dtype} and {w.shape} {w.dtype}")
    if ph < 0 or pw < 0:
        raise ValueError(f"conv_direct: expected non-negative padding, got ({ph}, {pw})")
    OH, OW = x.shape[2] + 2 * ph - w.shape[2] + 1, x.shape[3] + 2 * pw - w.shape[3] + 1
    if OH < 1 or OW < 1:
        raise ValueError(f"conv_direct: a {w.shape[2]}x{w.shape[3]} kernel does not fit the padded input "
                         f"{x.shape[2] + 2 * ph}x{x.shape[3] + 2 * pw}")
    if g is not None and (g.shape != (x.shape[0], w.shape[0], OH, OW) or g.dtype != x.dtype):
        raise ValueError(f"conv_direct: expected an output gradient of shape {(x.shape[0], w.shape[0], OH, OW)} "
                         f"and dtype {x.dtype}, got {g.shape} and {g.dtype}")
    return OH, OW


def _even(a):
    """a (k, ...) with a zero slice appended when k is odd: the loops take output channels in pairs."""
    if a.shape[0] % 2 == 0:
        return np.ascontiguousarray(a)
    return np.concatenate([a, np.zeros((1,) + a.shape[1:], a.dtype)])


def _chunks(N, work):
    """How many chunks of images: one (on the calling thread) for small problems, else one per
    thread of Numba's pool (at least one image each)."""
    import numba
    return 1 if not layer_parallel(work) else max(1, min(N, numba.get_num_threads()))


def _group(N, grid_size):
    """Images per group: enough that the grid loops run over about GROUP_POSITIONS positions."""
    return max(1, min(N, GROUP_POSITIONS // max(grid_size, 1)))


def conv_direct_forward(x, w, b, ph, pw):
    """conv2d(x, w, b, stride=1, padding=(ph, pw)) for C-contiguous float32/float64 x and w."""
    OH, OW = _check(x, w, ph, pw)
    N, O = x.shape[0], w.shape[0]
    y = np.empty((N, O, OH, OW), x.dtype)
    if y.size == 0:
        return y
    x = np.ascontiguousarray(x)
    bias = np.zeros(O, x.dtype) if b is None else np.ascontiguousarray(b, dtype=x.dtype)
    if bias.shape != (O,):
        raise ValueError(f"conv_direct: expected a bias of shape ({O},), got {bias.shape}")
    chunks = _chunks(N, y.size * x.shape[1] * w.shape[2] * w.shape[3])
    group = _group(N, (x.shape[2] + 2 * ph) * (x.shape[3] + 2 * pw))
    (_forward_images if chunks == 1 else _forward_images_parallel)(x, _even(w), _even(bias), ph, pw, y, group, chunks)
    return y


def conv_direct_backward(g, x, w, ph, pw, need_dx=True, need_dw=True, need_db=True):
    """(dx, dW, db) of conv_direct_forward for the output gradient g (None where not needed)."""
    OH, OW = _check(x, w, ph, pw, g)
    N, C = x.shape[:2]
    O, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    dx = np.zeros(x.shape, x.dtype) if need_dx else None
    if N == 0 or g.size == 0 or x.size == 0:
        return (dx, np.zeros(w.shape, x.dtype) if need_dw else None,
                (np.zeros(O, x.dtype) if N == 0 else g.sum(axis=(0, 2, 3))) if need_db else None)
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    chunks = _chunks(N, g.size * C * kh * kw)
    wflip = _even(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)) if need_dx else np.zeros((0, O, kh, kw), x.dtype)
    dwp = np.zeros((chunks, O + O % 2 if need_dw else 0, C, kh, kw))
    dbp = np.empty((chunks, O))
    (_backward_images if chunks == 1 else _backward_images_parallel)(
        g, x, wflip, ph, pw, dx if need_dx else np.empty((N, 0, 1, 1), x.dtype), dwp, dbp, bool(need_dx),
        _group(N, (x.shape[2] + 2 * ph) * (x.shape[3] + 2 * pw)), chunks)
    dw = dwp[:, :O].sum(axis=0).astype(x.dtype) if need_dw else None
    db = dbp.sum(axis=0).astype(x.dtype) if need_db else None
    return dx, dw, db
