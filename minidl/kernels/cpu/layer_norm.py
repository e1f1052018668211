"""Fused Numba kernels for LayerNorm over the rows of an (N, D) array.

Forward, one parallel pass over rows (one chunk of rows per thread): each row's mean and
biased variance by the shifted-data method of _numerics.mean_var_from_sums (the mean of the
row's first HEAD values as the shift, then the sums of d = x - shift and d^2: exact for data
with a large mean, where E[x^2] - E[x]^2 would cancel); then y = (x - mean) * rstd * w + b.
mean and rstd are saved (float64, N values each).

Backward, one parallel pass over row chunks: per row, the two sums sum(g) and sum(g * xhat)
(g = dy * w), and the chunk's dgamma and dbeta partials dy * xhat and dy (float64 in the end,
see _numerics.flush); then dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). xhat is
recomputed from x, mean and rstd rather than stored: recomputing is cheaper than writing and
re-reading N*D values. Written out with xc = x - m_hi (m = m_hi + m_lo, see _numerics.split)
and k2 = rstd * c2 (c2 = rstd * mean(g * xhat)):

    dx = g * rstd - (c0 - m_lo * k2) - xc * k2,    c0 = rstd * mean(g)

four operations per element, the large-mean cancellation kept exact by xc.

Both passes are software-pipelined: a row must be read whole for its sums before any output
of it can be written, so the loop that reads row i for its sums also writes the output of
row i - 1 (already in L1). A row's own two loops (the sums from memory, then the output from
cache) ran one after the other, the core stalled on memory in the first and left memory idle
in the second; the fused loop issues loads from memory throughout, as a plain copy does.

Outputs bigger than the cache are written with streaming stores (see _stream): the row is
computed into an L1 scratch row and streamed out, saving the read-for-ownership traffic. The
forward prefetches the row two ahead (see _stream.prefetch_row); the backward, which reads two
arrays, does not: there the hints compete with the hardware prefetcher and lose.

Arithmetic is in the input's compute dtype (float32 or float64; float16 and bfloat16 in
float32) with float64 per-row scalars. The wrappers take C-contiguous (N, D) arrays; 2-byte
arrays are read and written by the kernels in their own format, each element widened to
float32 on reading and rounded once on writing (see _row_norm and _half), so a float16 pass
moves half the bytes of a float32 one. The math and its derivation:
minidl/ops/normalization/layer_norm.py.
"""
import numpy as np
from numba import njit, prange

from ._half import compute_type, compute_zero, compute_zeros, narrow, widen
from ._numerics import (CONTRACT, FLUSH_ROWS, REASSOC_CONTRACT, flush, mean_var_from_sums, row_head_mean, split,
                        sum_partials)
from ._row_norm import empty_rows_backward, ones, param, row_shifted_sums, rows_backward, rows_forward, zeros
from ._stream import PREFETCH_AHEAD, prefetch_row, store_fence, stream_row
from ._threads import chunk_bounds

# Reductions may regroup into SIMD lanes, a * b + c may fuse; no nnan/ninf. The pipelined loops
# are inlined into the kernels by Numba (inline="always"), so the kernels carry the same flags
# (an inlined function takes its caller's), rather than called once per row.
_FUSED = REASSOC_CONTRACT


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _normalize_row(x, i, w, b, m_hi, m_lo, rc, out, oi):
    """out[oi] = (x[i] - m) * rstd * w + b, with m = m_hi + m_lo (see _numerics.split)."""
    for j in range(x.shape[1]):
        out[oi, j] = narrow(((widen(x[i, j]) - m_hi) - m_lo) * (rc * w[j]) + b[j], out)


@njit(error_model="numpy", cache=True, fastmath=_FUSED, inline="always")
def _sums_normalize_prev(x, i, shift, w, b, p, p_hi, p_lo, prc, out, oi):
    """(sum d, sum d^2) with d = x[i] - shift (row i's statistics), and in the same loop
    out[oi] = the normalized row p (the pipelined forward)."""
    s1 = compute_zero(x)
    s2 = compute_zero(x)
    for j in range(x.shape[1]):
        d = widen(x[i, j]) - shift
        s1 += d
        s2 += d * d
        out[oi, j] = narrow(((widen(x[p, j]) - p_hi) - p_lo) * (prc * w[j]) + b[j], out)
    return s1, s2


@njit(error_model="numpy", parallel=True, cache=True, fastmath=_FUSED)
def _forward(x, w, b, eps, y, mean, rstd, nchunks, stream):
    n, d = x.shape
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        row = np.empty((1, d if stream else 0), y.dtype)    # L1 scratch row when streaming
        p_hi = p_lo = prc = compute_zero(x)                 # the previous row's m_hi, m_lo, rstd
        last = stop + 1 if stop > start else start          # an empty chunk has no row i - 1 to write
        for i in range(start, last):
            if i + PREFETCH_AHEAD < stop:
                prefetch_row(x, i + PREFETCH_AHEAD)
            if i < stop:
                shift = row_head_mean(x, i)
                if i == start:
                    s1, s2 = row_shifted_sums(x, i, shift)
                elif stream:
                    s1, s2 = _sums_normalize_prev(x, i, shift, w, b, i - 1, p_hi, p_lo, prc, row, 0)
                else:
                    s1, s2 = _sums_normalize_prev(x, i, shift, w, b, i - 1, p_hi, p_lo, prc, y, i - 1)
            elif stream:
                _normalize_row(x, i - 1, w, b, p_hi, p_lo, prc, row, 0)
            else:
                _normalize_row(x, i - 1, w, b, p_hi, p_lo, prc, y, i - 1)
            if stream and i > start:
                stream_row(y, i - 1, row, 0)
            if i < stop:
                m, var = mean_var_from_sums(shift, s1, s2, d)
                r = 1.0 / np.sqrt(var + eps)
                mean[i] = m
                rstd[i] = r
                p_hi, p_lo = split(x, m)
                prc = compute_type(x, r)
        if stream:
            store_fence()


@njit(error_model="numpy", cache=True, fastmath=_FUSED)
def _dx_row(dy, x, w, p, p_hi, prc, pc0, pk2, out, oi):
    """out[oi] = dx of row p (see the module docstring); the pipelined loop below inlines the
    same line."""
    for j in range(x.shape[1]):
        out[oi, j] = narrow((widen(dy[p, j]) * w[j]) * prc - pc0 - (widen(x[p, j]) - p_hi) * pk2, out)


@njit(error_model="numpy", cache=True, fastmath=_FUSED, inline="always")
def _sums_dx_prev(dy, x, w, i, m_hi, m_lo, rc, acc, p, p_hi, prc, pc0, pk2, out, oi, write):
    """Row i's (sum g, sum g * (x - m)) (g = dy * w) and its dgamma, dbeta terms
    acc[0] += dy * xhat, acc[1] += dy; in the same loop, when ``write``, dx of row p into out[oi]
    (the pipelined backward). The dgamma terms are added even when not wanted: one loop for every
    case keeps dx bit-identical whichever gradients are asked for (two variants of the loop
    would sum in different SIMD orders). The two partials are rows of one array: the loop is
    vectorised behind run-time checks that its stores overlap none of its loads, one per pair of
    arrays, and with a third stored array it needed more checks than LLVM makes (it ran 16%
    slower in cache, twice as slow without dx; docs/performance.md)."""
    a = compute_zero(x)
    s = compute_zero(x)
    for j in range(x.shape[1]):
        dyv = widen(dy[i, j])
        xc = (widen(x[i, j]) - m_hi) - m_lo
        g = dyv * w[j]
        a += g
        s += g * xc
        acc[0, j] += (dyv * rc) * xc
        acc[1, j] += dyv
        if write:
            out[oi, j] = narrow((widen(dy[p, j]) * w[j]) * prc - pc0 - (widen(x[p, j]) - p_hi) * pk2, out)
    return a, s


@njit(error_model="numpy", parallel=True, cache=True, fastmath=_FUSED)
def _backward(dy, x, mean, rstd, w, dx, dw_part, db_part, need_dx, stream):
    n, d = x.shape
    nchunks = dw_part.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        acc = compute_zeros(x, (2, d))      # this chunk's running dgamma, dbeta
        row = np.empty((1, d if stream else 0), dx.dtype)
        out = row if stream else dx
        p_hi = prc = pc0 = pk2 = compute_zero(x)         # the previous row's constants
        for i in range(start, stop + 1):
            oi = 0 if stream else i - 1
            write = need_dx and i > start
            if i < stop:
                m_hi, m_lo = split(x, mean[i])
                r = rstd[i]
                rc = compute_type(x, r)
                sum_g, sum_gxc = _sums_dx_prev(dy, x, w, i, m_hi, m_lo, rc, acc,
                                               i - 1, p_hi, prc, pc0, pk2, out, oi, write)
                # dx = r (g - mean(g) - xhat mean(g xhat)) = g r - c0 - xhat c2, xhat c2 = (xc - m_lo) k2
                c2 = r * r * sum_gxc / d
                p_hi, prc, pk2 = m_hi, rc, compute_type(x, r * c2)
                pc0 = compute_type(x, r * sum_g / d - np.float64(m_lo) * np.float64(pk2))
                if (i - start + 1) % FLUSH_ROWS == 0 or i == stop - 1:
                    flush(dw_part, c, acc[0])
                    flush(db_part, c, acc[1])
            elif write:
                _dx_row(dy, x, w, i - 1, p_hi, prc, pc0, pk2, out, oi)
            if stream and write:
                stream_row(dx, i - 1, row, 0)
        if stream:
            store_fence()


def layer_norm_forward(x, weight, bias, eps, out=None, stream=None):
    """y, mean, rstd for the rows of x (N, D); weight/bias (D,) or None; ``out`` a C-contiguous
    (N, D) array of x's dtype to write y into (allocated if None); ``stream`` forces streaming
    stores on or off (default: on for outputs of STREAM_MIN_BYTES or more)."""
    d = x.shape[1]
    return rows_forward(_forward, x, out, stream, 2,
                        lambda ct: (param(weight, d, ct, ones), param(bias, d, ct, zeros), float(eps)))


def layer_norm_backward(dy, x, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True, dx_out=None,
                        stream=None):
    """(dx, dweight, dbias) for the rows of x (N, D); a gradient that is not needed is None.
    dweight and dbias come back as float64 (D,) arrays, to be cast by the caller."""
    n, d = x.shape
    if x.size == 0:
        return empty_rows_backward(x, dx_out, need_dx, need_dweight, need_dbias)
    # one chunk of rows per thread, each with its (D,) partial dgamma, dbeta (always summed, see _sums_dx_prev)
    dx, (dw_part, db_part) = rows_backward(
        _backward, dy, x, need_dx, dx_out, stream, lambda ct: (mean, rstd, param(weight, d, ct, ones)),
        lambda nchunks: (np.zeros((nchunks, d)), np.zeros((nchunks, d))))
    dweight = dbias = None
    if need_dweight:
        dweight = np.empty(d)
        sum_partials(dw_part, dweight)
    if need_dbias:
        dbias = np.empty(d)
        sum_partials(db_part, dbias)
    return dx, dweight, dbias
