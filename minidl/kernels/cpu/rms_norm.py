"""Fused Numba kernels for RMSNorm over the rows of an (N, D) array.

Forward, one parallel pass over rows: rstd = 1/sqrt(mean(x^2) + eps) from one row sum (the
row stays in L1), then y = x * rstd * w. Only rstd is saved (float64, N values).

Backward, one parallel pass over row chunks: per row, sum(g * x) with g = dy * w, then one
loop writing dx = rstd * (g - xhat * mean(g * xhat)) and adding dy * xhat into the chunk's
dgamma partial (float64, see _numerics.flush), added up at the end.

Large outputs are streamed, and float16/bfloat16 read and written in their own format, as in
layer_norm.py. The math and its derivation:
minidl/ops/normalization/rms_norm.py.
"""
import numpy as np
from numba import njit, prange

from ._half import compute_type, compute_zeros, narrow, widen
from ._numerics import FLUSH_ROWS, flush, sum_partials
from ._row_norm import empty_rows_backward, ones, param, row_dy_w_x_dot, row_sq_sum, rows_backward, rows_forward
from ._stream import store_fence, stream_row
from ._threads import chunk_bounds


@njit(error_model="numpy", cache=True, fastmath=False)
def _scale_row(x, i, w, rc, out, oi):
    for j in range(x.shape[1]):
        out[oi, j] = narrow(widen(x[i, j]) * (rc * w[j]), out)


@njit(error_model="numpy", parallel=True, cache=True, fastmath=False)
def _forward(x, w, eps, y, rstd, nchunks, stream):
    n, d = x.shape
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        row = np.empty((1, d if stream else 0), y.dtype)    # L1 scratch row when streaming
        for i in range(start, stop):
            r = 1.0 / np.sqrt(np.float64(row_sq_sum(x, i)) / d + eps)
            rstd[i] = r
            rc = compute_type(x, r)
            if stream:
                _scale_row(x, i, w, rc, row, 0)
                stream_row(y, i, row, 0)
            else:
                _scale_row(x, i, w, rc, y, i)
        if stream:
            store_fence()


@njit(error_model="numpy", cache=True, fastmath=False)
def _dx_row(dy, x, i, w, rc, c2, out, oi, bw, need_dw):
    """out[oi] = dx of row i = g rstd - x c2 (g = dy w); and, if need_dw, bw += dy xhat."""
    if need_dw:
        for j in range(x.shape[1]):
            g = widen(dy[i, j])
            xv = widen(x[i, j])
            out[oi, j] = narrow(g * w[j] * rc - xv * c2, out)
            bw[j] += g * (xv * rc)
    else:
        for j in range(x.shape[1]):
            out[oi, j] = narrow(widen(dy[i, j]) * w[j] * rc - widen(x[i, j]) * c2, out)


@njit(error_model="numpy", parallel=True, cache=True, fastmath=False)
def _backward(dy, x, rstd, w, dx, dw_part, need_dx, need_dw, stream):
    n, d = x.shape
    nchunks = dw_part.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        bw = compute_zeros(x, d if need_dw else 0)      # this chunk's running dgamma
        row = np.empty((1, d if stream else 0), dx.dtype)
        for i in range(start, stop):
            r = rstd[i]
            rc = compute_type(x, r)
            if need_dx:
                # dx = r (g - xhat mean(g xhat)) = g r - x c2,  xhat = x r,  g = dy w
                c2 = compute_type(x, r * r * r * row_dy_w_x_dot(dy, x, w, i) / d)
                if stream:
                    _dx_row(dy, x, i, w, rc, c2, row, 0, bw, need_dw)
                    stream_row(dx, i, row, 0)
                else:
                    _dx_row(dy, x, i, w, rc, c2, dx, i, bw, need_dw)
            elif need_dw:
                for j in range(d):
                    bw[j] += widen(dy[i, j]) * (widen(x[i, j]) * rc)
            if need_dw and ((i - start + 1) % FLUSH_ROWS == 0 or i == stop - 1):
                flush(dw_part, c, bw)
        if stream:
            store_fence()


def rms_norm_forward(x, weight, eps, out=None, stream=None):
    """y, rstd for the rows of x (N, D); weight (D,) or None; ``out``/``stream`` as in
    layer_norm_forward."""
    d = x.shape[1]
    return rows_forward(_forward, x, out, stream, 1, lambda ct: (param(weight, d, ct, ones), float(eps)))


def rms_norm_backward(dy, x, rstd, weight, need_dx=True, need_dweight=True, dx_out=None, stream=None):
    """(dx, dweight) for the rows of x (N, D); dweight float64 (D,) or None."""
    n, d = x.shape
    if x.size == 0:
        return empty_rows_backward(x, dx_out, need_dx, need_dweight)
    dx, (dw_part,) = rows_backward(
        _backward, dy, x, need_dx, dx_out, stream, lambda ct: (rstd, param(weight, d, ct, ones)),
        lambda nchunks: (np.zeros((nchunks, d if need_dweight else 0)),), (need_dweight,))
    dweight = None
    if need_dweight:
        dweight = np.empty(d)
        sum_partials(dw_part, dweight)
    return dx, dweight
