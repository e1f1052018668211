"""Fused Numba kernels for ScaleNorm / FixNorm over the rows of an (N, D) array.

Forward, one parallel pass over rows: s = 1/max(||x||_2, eps) from one row sum, then
y = g * x * s. Only s is saved (float64, N values).

Backward, one parallel pass over row chunks: per row, dot = sum(dy * x); when the norm was
not clamped (s < 1/eps) dx = g s (dy - x s^2 dot), else dx = g s dy; dg = sum_rows s * dot
goes into one float64 partial per chunk, added up at the end.

Large outputs are streamed, and float16/bfloat16 read and written in their own format, as in
layer_norm.py. The math and its derivation:
minidl/ops/normalization/scale_norm.py.
"""
import numpy as np
from numba import njit, prange

from ._half import compute_type, narrow, widen
from ._row_norm import empty_rows_backward, row_dot, row_sq_sum, rows_backward, rows_forward
from ._stream import store_fence, stream_row
from ._threads import chunk_bounds


@njit(error_model="numpy", cache=True, fastmath=False)
def _scale_row(x, i, gs, out, oi):
    for j in range(x.shape[1]):
        out[oi, j] = narrow(widen(x[i, j]) * gs, out)


@njit(error_model="numpy", parallel=True, cache=True, fastmath=False)
def _forward(x, g, eps, y, inv, nchunks, stream):
    n, d = x.shape
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        row = np.empty((1, d if stream else 0), y.dtype)    # L1 scratch row when streaming
        for i in range(start, stop):
            s = 1.0 / max(np.sqrt(np.float64(row_sq_sum(x, i))), eps)
            inv[i] = s
            gs = compute_type(x, g * s)
            if stream:
                _scale_row(x, i, gs, row, 0)
                stream_row(y, i, row, 0)
            else:
                _scale_row(x, i, gs, y, i)
        if stream:
            store_fence()


@njit(error_model="numpy", cache=True, fastmath=False)
def _dx_row(dy, x, i, gs, k, out, oi):
    for j in range(x.shape[1]):
        out[oi, j] = narrow(gs * (widen(dy[i, j]) - widen(x[i, j]) * k), out)


@njit(error_model="numpy", parallel=True, cache=True, fastmath=False)
def _backward(dy, x, inv, g, eps, dx, dg_part, need_dx, need_dg, stream):
    n, d = x.shape
    nchunks = dg_part.shape[0]
    clamped_inv = 1.0 / eps          # s takes exactly this value when max() chose eps
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        row = np.empty((1, d if stream else 0), dx.dtype)
        acc = 0.0
        for i in range(start, stop):
            s = inv[i]
            dot = np.float64(row_dot(dy, x, i))
            if need_dg:
                acc += s * dot
            if need_dx:
                # dx = g s (dy - x s^2 <dy, x>), without the radial term where the norm was clamped
                gs = compute_type(x, g * s)
                k = compute_type(x, s * s * dot if s != clamped_inv else 0.0)
                if stream:
                    _dx_row(dy, x, i, gs, k, row, 0)
                    stream_row(dx, i, row, 0)
                else:
                    _dx_row(dy, x, i, gs, k, dx, i)
        dg_part[c] = acc
        if stream:
            store_fence()


def scale_norm_forward(x, g, eps, out=None, stream=None):
    """y, inv_norm for the rows of x (N, D); g a Python float."""
    return rows_forward(_forward, x, out, stream, 1, lambda ct: (float(g), float(eps)))


def scale_norm_backward(dy, x, inv, g, eps, need_dx=True, need_dg=True, dx_out=None, stream=None):
    """(dx, dg) for the rows of x (N, D); dg a float64 scalar or None."""
    if x.size == 0:
        return empty_rows_backward(x, dx_out, need_dx)[0], (0.0 if need_dg else None)
    dx, (dg_part,) = rows_backward(_backward, dy, x, need_dx, dx_out, stream, lambda ct: (inv, float(g), float(eps)),
                                   lambda nchunks: (np.zeros(nchunks),), (need_dg,))
    return dx, (float(dg_part.sum()) if need_dg else None)
