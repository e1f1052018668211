"""Fused Numba kernels for LayerNorm over the rows of an (N, D) array.

Forward, one parallel pass over rows (one chunk of rows per thread): each row (D values, a
few KB, so it stays in L1 after the first read) is read for its sum, re-read for the shifted
sums of the corrected two-pass variance (exact for data with a large mean, where
E[x^2] - E[x]^2 would cancel), then written as y = (x - mean) * rstd * w + b. mean and rstd
are saved (float64, N values each).

Backward, one parallel pass over row chunks: per row, the two sums sum(g) and sum(g * xhat)
(g = dy * w), then one loop that writes dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
and adds dy * xhat and dy into the chunk's dgamma and dbeta partials (float64, see
_parallel.flush), added up at the end. xhat is recomputed from x, mean and rstd rather than
stored: recomputing is cheaper than writing and re-reading N*D values.

Outputs bigger than the cache are written with streaming stores (see _stream): the row is
computed into an L1 scratch row and streamed out, saving the read-for-ownership traffic. The
forward prefetches the row two ahead (see _stream.prefetch_row); in the backward, which reads
two arrays, the same hints measured slower (5.4 vs 5.1 ms on 8192 x 768, 2 threads).

Arithmetic is in the input's dtype (float32 or float64) with float64 per-row scalars; the
wrappers take C-contiguous (N, D) arrays; float16 is converted to float32 here and the
result rounded back to float16 once, at the end. The math and its derivation:
minidl/ops/normalization/layer_norm.py.
"""
import numpy as np
from numba import njit, prange

from ._parallel import (FLUSH_ROWS, chunk_bounds, flush, launch, mean_var,
                        num_chunks, row_dy_w_sums, split, sum_partials)
from ._stream import PREFETCH_AHEAD, prefetch_row, should_stream, store_fence, stream_row


@njit(error_model="numpy", cache=True, fastmath={"contract"})
def _normalize_row(x, i, w, b, m_hi, m_lo, rc, out, oi):
    """out[oi] = (x[i] - m) * rstd * w + b, with m = m_hi + m_lo (see _parallel.split)."""
    for j in range(x.shape[1]):
        out[oi, j] = ((x[i, j] - m_hi) - m_lo) * (rc * w[j]) + b[j]


@njit(error_model="numpy", parallel=True, cache=True, fastmath=False)
def _forward(x, w, b, eps, y, mean, rstd, nchunks, stream):
    n, d = x.shape
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        row = np.empty((1, d if stream else 0), y.dtype)    # L1 scratch row when streaming
        for i in range(start, stop):
            if i + PREFETCH_AHEAD < stop:
                prefetch_row(x, i + PREFETCH_AHEAD)
            m, var = mean_var(x, i)
            r = 1.0 / np.sqrt(var + eps)
            mean[i] = m
            rstd[i] = r
            m_hi, m_lo = split(x, m)
            rc = x.dtype.type(r)
            if stream:
                _normalize_row(x, i, w, b, m_hi, m_lo, rc, row, 0)
                stream_row(y, i, row, 0)
            else:
                _normalize_row(x, i, w, b, m_hi, m_lo, rc, y, i)
        if stream:
            store_fence()


@njit(error_model="numpy", cache=True, fastmath=False)
def _dx_row(dy, x, i, w, m_hi, m_lo, rc, c0, c2, out, oi, bw, bb, need_dwb):
    """out[oi] = dx of row i = g rstd - c0 - xhat c2 (g = dy w, xhat = (x - m) rstd); and, if
    need_dwb, bw += dy xhat, bb += dy."""
    if need_dwb:
        for j in range(x.shape[1]):
            g = dy[i, j]
            xhat = ((x[i, j] - m_hi) - m_lo) * rc
            out[oi, j] = g * w[j] * rc - c0 - xhat * c2
            bw[j] += g * xhat
            bb[j] += g
    else:
        for j in range(x.shape[1]):
            out[oi, j] = dy[i, j] * w[j] * rc - c0 - ((x[i, j] - m_hi) - m_lo) * rc * c2


@njit(error_model="numpy", parallel=True, cache=True, fastmath=False)
def _backward(dy, x, mean, rstd, w, dx, dw_part, db_part, need_dx, need_dwb, stream):
    n, d = x.shape
    nchunks = dw_part.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        bw = np.zeros(d if need_dwb else 0, x.dtype)     # this chunk's running dgamma, dbeta
        bb = np.zeros(d if need_dwb else 0, x.dtype)
        row = np.empty((1, d if stream else 0), dx.dtype)
        for i in range(start, stop):
            m_hi, m_lo = split(x, mean[i])
            r = rstd[i]
            rc = x.dtype.type(r)
            if need_dx:
                # dx = r (g - mean(g) - xhat mean(g xhat)) = g r - c0 - xhat c2
                sum_g, sum_gxc = row_dy_w_sums(dy, x, w, i, m_hi, m_lo)
                c0 = x.dtype.type(r * sum_g / d)
                c2 = x.dtype.type(r * r * sum_gxc / d)
                if stream:
                    _dx_row(dy, x, i, w, m_hi, m_lo, rc, c0, c2, row, 0, bw, bb, need_dwb)
                    stream_row(dx, i, row, 0)
                else:
                    _dx_row(dy, x, i, w, m_hi, m_lo, rc, c0, c2, dx, i, bw, bb, need_dwb)
            elif need_dwb:
                for j in range(d):
                    g = dy[i, j]
                    bw[j] += g * (((x[i, j] - m_hi) - m_lo) * rc)
                    bb[j] += g
            if need_dwb and ((i - start + 1) % FLUSH_ROWS == 0 or i == stop - 1):
                flush(dw_part, c, bw)
                flush(db_part, c, bb)
        if stream:
            store_fence()


_ONES = {}


def _ones(d, dtype):
    """A cached ones(d): the weight of a norm without affine, so that one compiled kernel
    serves both cases. (Private and never written; not flagged read-only, since Numba would
    compile a second specialization for read-only arrays.)"""
    return _constant(1, d, dtype)


def _zeros(d, dtype):
    return _constant(0, d, dtype)


def _constant(value, d, dtype):
    key = (value, d, np.dtype(dtype))
    a = _ONES.get(key)
    if a is None:
        a = _ONES[key] = np.full(d, value, dtype)
    return a


def compute_dtype(dtype):
    """float16 is computed in float32; float32 and float64 as they are."""
    return np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)


def _param(p, d, dtype, default):
    if p is None:
        return default(d, dtype)
    return np.ascontiguousarray(p.reshape(d), dtype=dtype)


def layer_norm_forward(x, weight, bias, eps, out=None, stream=None):
    """y, mean, rstd for the rows of x (N, D); weight/bias (D,) or None; ``out`` a C-contiguous
    (N, D) array of x's dtype to write y into (allocated if None); ``stream`` forces streaming
    stores on or off (default: on for outputs of STREAM_MIN_BYTES or more)."""
    n, d = x.shape
    ct = compute_dtype(x.dtype)
    if out is None:
        out = np.empty((n, d), x.dtype)
    xc = np.ascontiguousarray(x, dtype=ct)
    yc = out if out.dtype == ct else np.empty((n, d), ct)
    mean = np.empty(n, np.float64)
    rstd = np.empty(n, np.float64)
    stream = should_stream(yc) if stream is None else bool(stream)
    launch(_forward, n * d, xc, _param(weight, d, ct, _ones), _param(bias, d, ct, _zeros), float(eps),
           yc, mean, rstd, num_chunks(n, n * d), stream)
    if yc is not out:
        out[...] = yc
    return out, mean, rstd


def layer_norm_backward(dy, x, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True, dx_out=None,
                        stream=None):
    """(dx, dweight, dbias) for the rows of x (N, D); a gradient that is not needed is None.
    dweight and dbias come back as float64 (D,) arrays, to be cast by the caller."""
    n, d = x.shape
    ct = compute_dtype(x.dtype)
    dyc = np.ascontiguousarray(dy, dtype=ct)
    xc = np.ascontiguousarray(x, dtype=ct)
    w = _param(weight, d, ct, _ones)
    dx = None
    if need_dx:
        dx = dx_out if dx_out is not None else np.empty((n, d), x.dtype)
    dxc = dx if (dx is not None and dx.dtype == ct) else np.empty((n if need_dx else 0, d), ct)
    need_dwb = need_dweight or need_dbias
    # one chunk of rows per thread; the partial rows are empty when no affine gradient is wanted
    dw_part = np.zeros((num_chunks(n, n * d), d if need_dwb else 0))
    db_part = np.zeros_like(dw_part)
    stream = need_dx and (should_stream(dxc) if stream is None else bool(stream))
    launch(_backward, n * d, dyc, xc, mean, rstd, w, dxc, dw_part, db_part, need_dx, need_dwb, stream)
    if need_dx and dxc is not dx:
        dx[...] = dxc
    dweight = dbias = None
    if need_dweight:
        dweight = np.empty(d)
        sum_partials(dw_part, dweight)
    if need_dbias:
        dbias = np.empty(d)
        sum_partials(db_part, dbias)
    return dx, dweight, dbias
