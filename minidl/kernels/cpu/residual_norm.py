"""Fused Numba kernels for a residual add and the norm of its sum, (s, y) = (x + r, norm(x + r)),
over the rows of (N, D) arrays, for LayerNorm and RMSNorm. The math and its derivation:
minidl/ops/normalization/residual_norm.py.

Forward, one parallel pass over row chunks: the loop that adds row i (x and r read from memory
once) writes s; the row's shifted sums (LayerNorm, see _numerics.mean_var_from_sums) or its sum
of squares (RMSNorm) and then the normalized row are computed from s, which is still in L1.

Backward, one parallel pass over row chunks: per row the sums sum(g) and sum(g xhat)
(g = dy w), then one loop adding the row's terms to the chunk's dgamma/dbeta partials (float64
in the end, see _numerics.flush) and writing

    dx = ds + g rstd - c0 - (s - m_hi) k2       (LayerNorm; c0, k2 as in layer_norm.py)
    dx = ds + g rstd - s c2,  c2 = rstd^3 mean(g s)   (RMSNorm)

where ds is the residual stream's own gradient: the autograd add of two gradients that
unfused code makes is this loop's one extra read. Given a second output dr (r's own copy of the
gradient, when x and r are two leaves that may not share one array), each row of dx is stored
there too, from L1: one more write stream instead of a copy that reads dx back from memory.

Every row sum is taken in a loop that only reads, separate from the loops that store. A loop
that stores and reduces at once is vectorised behind a run-time check that its stores do not
overlap its loads, and falls back to scalar code (another summation order, other roundings) when
two arrays merely lie close together in memory: the results would depend on where malloc put
them. The extra loop reads a row already in L1.

Unlike kernels/cpu/layer_norm.py these loops are neither software-pipelined nor prefetched:
with two input streams (x and r; dy, s and ds) both measured slower here, single-threaded at
8192 x 768 (docs/performance.md).

Outputs of STREAM_MIN_BYTES or more are written with streaming stores (see _stream): s and y
are computed into L1 scratch rows and streamed out, as is dx.

Arithmetic is in the inputs' compute dtype (float32 or float64; float16 and bfloat16 in
float32) with float64 per-row statistics; the wrappers take C-contiguous (N, D) arrays. 2-byte
arrays are read and written by the kernels in their own format (see _row_norm and _half): s is
rounded to it as it is stored, and the statistics and y are those of that rounded s, which is
what the op returns and what its backward reads.
"""
import numpy as np
from numba import njit, prange

from ._half import compute_type, compute_zero, compute_zeros, narrow, storage, widen
from ._numerics import (FLUSH_ROWS, HEAD, REASSOC_CONTRACT, compute_dtype, flush, mean_var_from_sums, split,
                        summed_partials)
from ._row_norm import copy_back, empty_rows_backward, empty_rows_forward, like_x, ones, output_buffer, param, zeros
from ._stream import should_stream, store_fence, stream_row
from ._threads import chunk_bounds, launch, num_chunks

# as kernels/cpu/layer_norm.py: reductions regroup into SIMD lanes, a * b + c may fuse; the
# loops below are inlined into the kernels, which therefore carry the same flags
_FUSED = REASSOC_CONTRACT


@njit(error_model="numpy", cache=True, fastmath=_FUSED, inline="always")
def _add_row(x, r, i, sb, si):
    """sb[si] = x[i] + r[i]."""
    for j in range(x.shape[1]):
        sb[si, j] = narrow(widen(x[i, j]) + widen(r[i, j]), sb)


@njit(error_model="numpy", cache=True, fastmath=_FUSED, inline="always")
def _shifted_sums(sb, si):
    """(shift, sum d, sum d^2) of the row sb[si] (in L1), d = s - shift, the shift the mean of
    its first HEAD values (see _numerics.mean_var_from_sums)."""
    m = min(sb.shape[1], HEAD)
    acc = compute_zero(sb)
    for j in range(m):
        acc += widen(sb[si, j])
    shift = compute_type(sb, acc / m)
    s1 = compute_zero(sb)
    s2 = compute_zero(sb)
    for j in range(sb.shape[1]):
        dv = widen(sb[si, j]) - shift
        s1 += dv
        s2 += dv * dv
    return shift, s1, s2


@njit(error_model="numpy", parallel=True, cache=True, fastmath=_FUSED)
def _ln_forward(x, r, w, b, eps, s, y, mean, rstd, nchunks, stream):
    n, d = x.shape
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        srow = np.empty((1, d if stream else 0), s.dtype)    # L1 scratch rows when streaming
        yrow = np.empty((1, d if stream else 0), y.dtype)
        sb = srow if stream else s
        out = yrow if stream else y
        for i in range(start, stop):
            si = 0 if stream else i
            _add_row(x, r, i, sb, si)
            shift, s1, s2 = _shifted_sums(sb, si)
            m, var = mean_var_from_sums(shift, s1, s2, d)
            rs = 1.0 / np.sqrt(var + eps)
            mean[i] = m
            rstd[i] = rs
            m_hi, m_lo = split(x, m)
            rc = compute_type(x, rs)
            for j in range(d):
                out[si, j] = narrow(((widen(sb[si, j]) - m_hi) - m_lo) * (rc * w[j]) + b[j], out)
            if stream:
                stream_row(s, i, srow, 0)
                stream_row(y, i, yrow, 0)
        if stream:
            store_fence()


@njit(error_model="numpy", cache=True, fastmath=_FUSED, inline="always")
def _ln_sums(dy, s, w, i, m_hi, m_lo):
    """Row i's (sum g, sum g (s - m)), g = dy w: a loop that only reads."""
    a = compute_zero(s)
    q = compute_zero(s)
    for j in range(s.shape[1]):
        g = widen(dy[i, j]) * w[j]
        a += g
        q += g * ((widen(s[i, j]) - m_hi) - m_lo)
    return a, q


@njit(error_model="numpy", parallel=True, cache=True, fastmath=_FUSED)
def _ln_backward(dy, ds, s, mean, rstd, w, dx, dr, dw_part, db_part, has_ds, need_dx, stream):
    n, d = s.shape
    two = need_dx and dr.shape[0] > 0
    nchunks = dw_part.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        acc = compute_zeros(s, (2, d))      # this chunk's dgamma, dbeta: one array (layer_norm._sums_dx_prev)
        row = np.empty((1, d if stream else 0), dx.dtype)
        out = row if stream else dx
        for i in range(start, stop):
            oi = 0 if stream else i
            m_hi, m_lo = split(s, mean[i])
            rs = rstd[i]
            rc = compute_type(s, rs)
            sum_g, sum_gsc = _ln_sums(dy, s, w, i, m_hi, m_lo)
            # dx = ds + r (g - mean(g) - xhat mean(g xhat)) = ds + g r - c0 - (s - m_hi) k2 (layer_norm.py)
            k2 = compute_type(s, rs * rs * rs * sum_gsc / d)
            c0 = compute_type(s, rs * sum_g / d - np.float64(m_lo) * np.float64(k2))
            for j in range(d):
                dyv = widen(dy[i, j])
                sc = widen(s[i, j]) - m_hi
                acc[0, j] += (dyv * rc) * (sc - m_lo)
                acc[1, j] += dyv
                if need_dx:
                    v = (dyv * w[j]) * rc - c0 - sc * k2
                    if has_ds:
                        v += widen(ds[i, j])
                    out[oi, j] = narrow(v, out)
            if stream and need_dx:
                stream_row(dx, i, row, 0)
                if two:
                    stream_row(dr, i, row, 0)
            elif two:
                dr[i] = dx[i]           # the row just written, still in L1
            if (i - start + 1) % FLUSH_ROWS == 0 or i == stop - 1:
                flush(dw_part, c, acc[0])
                flush(db_part, c, acc[1])
        if stream:
            store_fence()


@njit(error_model="numpy", parallel=True, cache=True, fastmath=_FUSED)
def _rms_forward(x, r, w, eps, s, y, rstd, nchunks, stream):
    n, d = x.shape
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        srow = np.empty((1, d if stream else 0), s.dtype)
        yrow = np.empty((1, d if stream else 0), y.dtype)
        sb = srow if stream else s
        out = yrow if stream else y
        for i in range(start, stop):
            si = 0 if stream else i
            for j in range(d):
                sb[si, j] = narrow(widen(x[i, j]) + widen(r[i, j]), sb)
            sq = compute_zero(x)
            for j in range(d):          # (a loop that only reads: see the module docstring)
                v = widen(sb[si, j])
                sq += v * v
            rs = 1.0 / np.sqrt(np.float64(sq) / d + eps)
            rstd[i] = rs
            rc = compute_type(x, rs)
            for j in range(d):
                out[si, j] = narrow(widen(sb[si, j]) * (rc * w[j]), out)
            if stream:
                stream_row(s, i, srow, 0)
                stream_row(y, i, yrow, 0)
        if stream:
            store_fence()


@njit(error_model="numpy", parallel=True, cache=True, fastmath=_FUSED)
def _rms_backward(dy, ds, s, rstd, w, dx, dr, dw_part, has_ds, need_dx, stream):
    n, d = s.shape
    two = need_dx and dr.shape[0] > 0
    nchunks = dw_part.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        bw = compute_zeros(s, d)      # this chunk's running dgamma
        row = np.empty((1, d if stream else 0), dx.dtype)
        out = row if stream else dx
        for i in range(start, stop):
            oi = 0 if stream else i
            rs = rstd[i]
            rc = compute_type(s, rs)
            dot = compute_zero(s)
            for j in range(d):
                dot += widen(dy[i, j]) * w[j] * widen(s[i, j])
            # dx = ds + r (g - xhat mean(g xhat)) = ds + g r - s c2,  xhat = s r,  g = dy w
            c2 = compute_type(s, rs * rs * rs * np.float64(dot) / d)
            for j in range(d):
                g = widen(dy[i, j])
                sv = widen(s[i, j])
                bw[j] += g * (sv * rc)
                if need_dx:
                    v = g * w[j] * rc - sv * c2
                    if has_ds:
                        v += widen(ds[i, j])
                    out[oi, j] = narrow(v, out)
            if stream and need_dx:
                stream_row(dx, i, row, 0)
                if two:
                    stream_row(dr, i, row, 0)
            elif two:
                dr[i] = dx[i]           # the row just written, still in L1
            if (i - start + 1) % FLUSH_ROWS == 0 or i == stop - 1:
                flush(dw_part, c, bw)
        if stream:
            store_fence()


# ----------------------------------------------------------------------------- array wrappers

def _check_rows(op, x, r):
    if x.ndim != 2 or r.shape != x.shape:
        raise ValueError(f"{op}: expected x and r of the same (N, D) shape, got {x.shape} and {r.shape}")


def _forward(op, kernel, x, r, out, sum_out, stream, nstats, params):
    """(s, y, *stats) of a fused forward: ``kernel(x, r, *params(ct), s, y, *stats, nchunks, stream)``
    with x, s and y the storage (``_half.storage``) of C-contiguous (N, D) arrays of x's dtype,
    r as ``_row_norm.like_x`` and ct x's compute dtype."""
    _check_rows(op, x, r)
    n, d = x.shape
    ct = compute_dtype(x.dtype)
    out, y = output_buffer(out, (n, d), x.dtype)
    sum_out, s = output_buffer(sum_out, (n, d), x.dtype)
    if x.size == 0:
        return (sum_out,) + empty_rows_forward(out, nstats)
    xs = storage(np.ascontiguousarray(x))
    rs = like_x(r, x, ct)
    stats = tuple(np.empty(n, np.float64) for _ in range(nstats))
    stream = should_stream(y) if stream is None else bool(stream)
    launch(kernel, 2 * n * d, xs, rs, *params(ct), storage(s), storage(y), *stats, num_chunks(n, 2 * n * d),
           stream)
    copy_back(out, y)
    copy_back(sum_out, s)
    return (sum_out, out) + stats


def _backward(kernel, dy, ds, s, need_dx, dx_out, dr_out, stream, inputs, partials):
    """(dx or None, partials) of a fused backward of a non-empty s:
    ``kernel(dy, ds, s, *inputs(ct), dx, dr, *partials(nchunks), has_ds, need_dx, stream)`` with s,
    dx and dr (a second copy of dx, into ``dr_out``) the storage of arrays of s's dtype (without
    rows when not needed), dy and ds as ``_row_norm.like_x``; without ``ds`` (None) dy stands in
    for it, unread."""
    n, d = s.shape
    ct = compute_dtype(s.dtype)
    dys = like_x(dy, s, ct)
    ss = storage(np.ascontiguousarray(s))
    dss = dys if ds is None else like_x(ds, s, ct)
    none = (None, np.empty((0, d), s.dtype))
    dx, buf = output_buffer(dx_out, (n, d), s.dtype) if need_dx else none
    dr, rbuf = output_buffer(dr_out, (n, d), s.dtype) if need_dx and dr_out is not None else none
    parts = partials(num_chunks(n, n * d))
    stream = need_dx and (should_stream(buf) if stream is None else bool(stream))
    launch(kernel, 2 * n * d, dys, dss, ss, *inputs(ct), storage(buf), storage(rbuf),
           *parts, ds is not None, need_dx, stream)
    if need_dx:
        copy_back(dx, buf)
    if dr is not None:
        copy_back(dr, rbuf)
    return dx, parts


def add_layer_norm_forward(x, r, weight, bias, eps, out=None, sum_out=None, stream=None):
    """(s, y, mean, rstd) for the rows of x + r (N, D); weight/bias (D,) or None; ``out`` and
    ``sum_out`` C-contiguous (N, D) arrays of x's dtype to write y and s into (allocated if None);
    ``stream`` forces streaming stores on or off (default: on for outputs of STREAM_MIN_BYTES)."""
    d = x.shape[1]
    return _forward("add_layer_norm_forward", _ln_forward, x, r, out, sum_out, stream, 2,
                    lambda ct: (param(weight, d, ct, ones), param(bias, d, ct, zeros), float(eps)))


def add_layer_norm_backward(dy, ds, s, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True,
                            dx_out=None, dr_out=None, stream=None):
    """(dx, dweight, dbias) for the rows of s (N, D): dx = dL/ds (the gradient of x and of r),
    ``ds`` the stream's own gradient or None; dweight, dbias float64 (D,) or None. With
    ``dr_out`` (an (N, D) array of s's dtype) dx is written there too, in the same pass: r's own
    copy, for when x and r must not share one gradient array."""
    n, d = s.shape
    if s.size == 0:
        return empty_rows_backward(s, dx_out, need_dx, need_dweight, need_dbias)
    dx, (dw_part, db_part) = _backward(
        _ln_backward, dy, ds, s, need_dx, dx_out, dr_out, stream, lambda ct: (mean, rstd, param(weight, d, ct, ones)),
        lambda nchunks: (np.zeros((nchunks, d)), np.zeros((nchunks, d))))
    return dx, (summed_partials(dw_part) if need_dweight else None), (summed_partials(db_part) if need_dbias else None)


def add_rms_norm_forward(x, r, weight, eps, out=None, sum_out=None, stream=None):
    """(s, y, rstd) for the rows of x + r (N, D); as add_layer_norm_forward, for RMSNorm."""
    d = x.shape[1]
    return _forward("add_rms_norm_forward", _rms_forward, x, r, out, sum_out, stream, 1,
                    lambda ct: (param(weight, d, ct, ones), float(eps)))


def add_rms_norm_backward(dy, ds, s, rstd, weight, need_dx=True, need_dweight=True, dx_out=None, dr_out=None,
                          stream=None):
    """(dx, dweight) for the rows of s (N, D); as add_layer_norm_backward, for RMSNorm."""
    n, d = s.shape
    if s.size == 0:
        return empty_rows_backward(s, dx_out, need_dx, need_dweight)
    dx, (dw_part,) = _backward(_rms_backward, dy, ds, s, need_dx, dx_out, dr_out, stream,
                               lambda ct: (rstd, param(weight, d, ct, ones)),
                               lambda nchunks: (np.zeros((nchunks, d)),))
    return dx, (summed_partials(dw_part) if need_dweight else None)
