"""Numba kernels for 2-D max and average pooling, forward and backward.

Work is split by (n, c) image planes, so the backward scatters (several windows may share an
input element) never race. Window geometry is PyTorch's: the window of output (oh, ow)
starts at (oh*sh - ph, ow*sw - pw); padding is -inf for max pooling and zero for average
pooling. Big problems run chunks of planes on Numba's pool where the process allows the layer
kernels to (``minidl.runtime.layer_threads``), small ones on one thread: each kernel is one
source compiled twice (``_threads.serial_and_parallel``). References: ``minidl.ops.pooling``.
"""
import numpy as np
from numba import njit, prange

from ._threads import chunk_bounds, layer_parallel, plane_chunks, serial_and_parallel


_SPLIT = serial_and_parallel(error_model="numpy", cache=True)


def _chunks(x, planes):
    """How many chunks of planes a kernel over x runs in: one (on the calling thread) for a
    small x, else a few per thread of Numba's pool."""
    return 1 if not layer_parallel(x.size) else plane_chunks(planes)


@njit(error_model="numpy", cache=True)
def _inside(start, d, k, size):
    """[i0, i1): the offsets i < k of a window whose position start + i*d lies in [0, size).
    Arithmetic, not a scan over k: with ceil_mode and a stride past the input, a kernel may
    overhang the input by any amount. (Ceilings as (a - 1) // d + 1: no a + d to overflow.)"""
    i0 = 0 if start >= 0 else (-start - 1) // d + 1
    i1 = min(k, (size - start - 1) // d + 1) if size > start else 0
    return i0, max(i1, i0)


@njit(error_model="numpy", cache=True, inline="always")
def _take(v, best):
    """Does v replace the window's best so far: a greater value, or a NaN (so a NaN propagates,
    the last one in window order, as PyTorch's loop). The callers spell it as selects, not
    branches: on data like a layer's activations a branch mispredicts about half the time,
    which made the kernel 3-4x slower. LLVM may still turn a select between loaded values
    into a branch, which is why the 2x2 path computes its max another way."""
    return (v > best) | (v != v)


@njit(error_model="numpy", cache=True, inline="always")
def _floored(best, arg, relu, zero):
    """With ``relu``, relu(max) instead of the max: a window whose max is not positive gives 0
    and index -1 (no gradient, as ReLU's mask); a window with no input element keeps -inf."""
    keep = not relu or best > 0 or best != best or arg < 0
    return (best if keep else zero), (arg if keep else -1)


def _max_fwd_planes(x, out, idx, p0, p1, n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, relu):
    """Planes p0..p1 of x (P, H, W) into out and idx (P, OH, OW), any geometry."""
    H, W = x.shape[1], x.shape[2]
    OH, OW = out.shape[1], out.shape[2]
    zero = x.dtype.type(0)
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(p1 - p0, n_chunks, chunk)
        for p in range(p0 + lo, p0 + hi):
            for oh in range(OH):
                h0 = oh * sh - ph
                i0, i1 = _inside(h0, dh, kh, H)
                hs = h0 + i0 * dh
                for ow in range(OW):
                    w0 = ow * sw - pw
                    j0, j1 = _inside(w0, dw, kw, W)
                    ws = w0 + j0 * dw
                    best = -np.inf
                    # the first in-bounds element, as PyTorch; -1 when a dilated window holds none
                    # (padding on both sides of it): its output is -inf and it sends no gradient
                    arg = hs * W + ws if i0 < i1 and j0 < j1 else -1
                    for i in range(i0, i1):
                        h = h0 + i * dh
                        for j in range(j0, j1):
                            w = w0 + j * dw
                            v = x[p, h, w]
                            t = _take(v, best)
                            best = v if t else best
                            arg = h * W + w if t else arg
                    out[p, oh, ow], idx[p, oh, ow] = _floored(best, arg, relu, zero)


_max_fwd_planes, _max_fwd_planes_parallel = _SPLIT(_max_fwd_planes)


@njit(error_model="numpy", cache=True, inline="always")
def _window_order_2x2(a, b, c, d, k, W):
    """(best, arg) of the 2x2 window a, b / c, d (a at flat position k) by _take's rule, in
    window order: the path of a window that holds a NaN."""
    best, arg = a, k
    t = _take(b, best)
    best, arg = (b if t else best), (k + 1 if t else arg)
    t = _take(c, best)
    best, arg = (c if t else best), (k + W if t else arg)
    t = _take(d, best)
    best, arg = (d if t else best), (k + W + 1 if t else arg)
    return best, arg


def _max_fwd_planes_2x2(x, out, idx, p0, p1, n_chunks, relu):
    """_max_fwd_planes for 2x2 windows at stride 2 that all lie inside the input (the common
    CNN pool), with no data-dependent branch for a window without a NaN: its max is a chain of
    ``v if v > m else m`` (which LLVM lowers to maxss), and its index that of the first of the
    four equal to the max, in integer arithmetic on the comparisons. Both give exactly what
    _take's window order gives when no NaN is present (ties and -0.0 included: only a strictly
    greater value replaces the max). A window with a NaN, rare and so a predicted branch, takes
    _take's order. (The running selects of _max_fwd_planes between loaded values are compiled
    into branches, which mispredict on about half of a layer's windows: 4x slower here,
    docs/performance.md.)"""
    W = x.shape[2]
    OH, OW = out.shape[1], out.shape[2]
    zero = x.dtype.type(0)
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(p1 - p0, n_chunks, chunk)
        for p in range(p0 + lo, p0 + hi):
            for oh in range(OH):
                r0, r1 = x[p, 2 * oh], x[p, 2 * oh + 1]
                o, ii = out[p, oh], idx[p, oh]
                k0 = 2 * oh * W
                for ow in range(OW):
                    k = k0 + 2 * ow
                    a, b, c, d = r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1]
                    m = b if b > a else a
                    m = c if c > m else m
                    m = d if d > m else m
                    # the offset of the first of a, b, c, d equal to m: 0, 1, W or W + 1
                    arg = k + np.int64(a != m) * (1 + np.int64(b != m) * (W - 1 + np.int64(c != m)))
                    if (a != a) | (b != b) | (c != c) | (d != d):
                        m, arg = _window_order_2x2(a, b, c, d, k, W)
                    o[ow], ii[ow] = _floored(m, arg, relu, zero)


_max_fwd_planes_2x2, _max_fwd_planes_2x2_parallel = _SPLIT(_max_fwd_planes_2x2)


def _max_fwd(x, out, idx, p0, p1, n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, relu, two_by_two):
    """Planes p0..p1 in n_chunks chunks: on the calling thread (1) or on Numba's pool."""
    if two_by_two:
        (_max_fwd_planes_2x2 if n_chunks == 1 else _max_fwd_planes_2x2_parallel)(x, out, idx, p0, p1, n_chunks, relu)
    else:
        kernel = _max_fwd_planes if n_chunks == 1 else _max_fwd_planes_parallel
        kernel(x, out, idx, p0, p1, n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, relu)


def max_pool2d_forward(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, relu=False):
    """-> (out, idx): idx is the flat h*W + w position of each maximum in its plane, the
    first one in window order on ties (-1 for a window with no input element); a NaN is
    propagated, as in PyTorch. With ``relu``, relu(out) (= max_pool2d(relu(x)), up to the
    sign of a zero) with index -1 where the ReLU stops the gradient."""
    N, C = x.shape[:2]
    out = np.empty((N, C, OH, OW), dtype=x.dtype)
    idx = np.empty((N, C, OH, OW), dtype=np.int64)
    if out.size == 0:
        return out, idx
    H, W = x.shape[2:]
    two_by_two = (kh == kw == sh == sw == 2 and ph == pw == 0 and dh == dw == 1
                  and 2 * OH <= H and 2 * OW <= W)
    planes = (x.reshape(N * C, H, W), out.reshape(N * C, OH, OW), idx.reshape(N * C, OH, OW))
    args = (kh, kw, sh, sw, ph, pw, dh, dw, bool(relu), two_by_two)
    _max_fwd(*planes, 0, N * C, _chunks(x, N * C), *args)
    return out, idx


def _max_bwd_planes(g, idx, dx, p0, p1, n_chunks):
    C, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(p1 - p0, n_chunks, chunk)
        for p in range(p0 + lo, p0 + hi):
            n = p // C
            c = p % C
            for k in range(dx.shape[2]):
                dx[n, c, k] = 0
            for oh in range(OH):
                for ow in range(OW):
                    k = idx[n, c, oh, ow]
                    if k >= 0:   # -1: a window without an input element
                        dx[n, c, k] += g[n, c, oh, ow]


_max_bwd_planes, _max_bwd_planes_parallel = _SPLIT(_max_bwd_planes)


def max_pool2d_backward(g, idx, H, W):
    """dx[n, c].flat[idx] += g: each output's gradient goes to the element it selected."""
    N, C = g.shape[:2]
    dx = np.empty((N, C, H * W), dtype=g.dtype)
    if dx.size == 0 or g.size == 0:     # no plane, or no output to take a gradient from
        dx[...] = 0
        return dx.reshape(N, C, H, W)
    chunks = _chunks(dx, N * C)
    (_max_bwd_planes if chunks == 1 else _max_bwd_planes_parallel)(g, idx, dx, 0, N * C, chunks)
    return dx.reshape(N, C, H, W)


@njit(error_model="numpy", cache=True, inline="always")
def _window(o, s, p, k, size, include_pad):
    """[start, end) of a window clipped to the input, and its extent counted for the divisor."""
    start = o * s - p
    end = min(start + k, size + p)
    padded = end - start
    start = max(start, 0)
    end = min(end, size)
    return start, end, (padded if include_pad else end - start)


def _avg_fwd_planes(x, out, p0, p1, n_chunks, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override):
    N, C, H, W = x.shape
    OH, OW = out.shape[2], out.shape[3]
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(p1 - p0, n_chunks, chunk)
        for p in range(p0 + lo, p0 + hi):
            n = p // C
            c = p % C
            for oh in range(OH):
                h0, h1, nh = _window(oh, sh, ph, kh, H, count_include_pad)
                for ow in range(OW):
                    w0, w1, nw = _window(ow, sw, pw, kw, W, count_include_pad)
                    acc = 0.0
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            acc += x[n, c, h, w]
                    div = divisor_override if divisor_override > 0 else nh * nw
                    out[n, c, oh, ow] = acc / div if h1 > h0 and w1 > w0 else 0.0


_avg_fwd_planes, _avg_fwd_planes_parallel = _SPLIT(_avg_fwd_planes)


def avg_pool2d_forward(x, kh, kw, sh, sw, ph, pw, OH, OW, count_include_pad, divisor_override):
    N, C = x.shape[:2]
    out = np.empty((N, C, OH, OW), dtype=x.dtype)
    if out.size == 0:
        return out
    chunks = _chunks(x, N * C)
    (_avg_fwd_planes if chunks == 1 else _avg_fwd_planes_parallel)(
        x, out, 0, N * C, chunks, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override)
    return out


def _avg_bwd_planes(g, dx, p0, p1, n_chunks, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override):
    N, C, H, W = dx.shape
    OH, OW = g.shape[2], g.shape[3]
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(p1 - p0, n_chunks, chunk)
        for p in range(p0 + lo, p0 + hi):
            n = p // C
            c = p % C
            for h in range(H):
                for w in range(W):
                    dx[n, c, h, w] = 0
            for oh in range(OH):
                h0, h1, nh = _window(oh, sh, ph, kh, H, count_include_pad)
                for ow in range(OW):
                    w0, w1, nw = _window(ow, sw, pw, kw, W, count_include_pad)
                    div = divisor_override if divisor_override > 0 else max(nh * nw, 1)
                    v = g[n, c, oh, ow] / div
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            dx[n, c, h, w] += v


_avg_bwd_planes, _avg_bwd_planes_parallel = _SPLIT(_avg_bwd_planes)


def avg_pool2d_backward(g, H, W, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override):
    N, C = g.shape[:2]
    dx = np.empty((N, C, H, W), dtype=g.dtype)
    if dx.size == 0 or g.size == 0:
        dx[...] = 0
        return dx
    chunks = _chunks(dx, N * C)
    (_avg_bwd_planes if chunks == 1 else _avg_bwd_planes_parallel)(
        g, dx, 0, N * C, chunks, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override)
    return dx
