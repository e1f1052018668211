"""Numba kernels for cross-entropy over class indices (minidl/ops/loss.py, where the math is and
``cross_entropy_forward_reference`` / ``cross_entropy_backward_reference`` are the reference).

Each row of logits is read once or twice from L1 per direction, instead of the reference's ten
or so NumPy passes over the (M, C) array and its temporaries: forward the row max, then
lse = max + log sum_j exp(x_j - max), the row's logp = x - lse (saved for backward, as
PyTorch's log-softmax saves its output, so the logits may change after forward) and its loss;
backward dx_j = p_j (a + b W) - b w_j - a [j = t], p_j = exp(logp_j). Rows are split into one
chunk per thread above the parallel threshold (``_threads.SERIAL_BELOW`` elements), else run
on the calling thread.

exp of -inf is exactly 0, as in the reference; where both a logit and its row's max are -inf, the
forward skips the logit instead of taking exp(NaN). A class index outside [0, C) that is not ``ignore_index`` is
counted, not read: the entry points raise IndexError for it, as the op's own check does first.
Without weights, w is 1 (W = C).

There is no cuda module: on a GPU the reference runs as the device's elementwise, reduction and
gather kernels, whose passes over a loss's (M, C) logits are small next to the model's GEMMs.
"""
import math

import numpy as np
from numba import njit, prange

from ._fastexp import exp_any
from ._numerics import row_max
from ._threads import SERIAL_BELOW, num_chunks

_FM = {"reassoc", "contract"}   # sums vectorise; no "nnan"/"ninf": -inf logits are meaningful


@njit(error_model="numpy", cache=True, fastmath=_FM, nogil=True)
def _forward_rows(x, t, w, ignore, e, loss, logp, wt, r0, r1):
    """Rows r0..r1: logp, w_k and the loss (see ops/loss.py); returns how many bad targets."""
    C = x.shape[1]
    zero = x.dtype.type(0)
    bad = 0
    for k in range(r0, r1):
        m = row_max(x, k, C)
        s = zero
        for j in range(C):
            v = x[k, j]
            s += exp_any(v - m) if v != -np.inf else zero
        lk = m + math.log(s)
        for j in range(C):
            logp[k, j] = x[k, j] - lk
        tk = t[k]
        if tk == ignore:
            wt[k] = 0.0
            loss[k] = 0.0
            continue
        if tk < 0 or tk >= C:
            bad += 1
            wt[k] = 0.0
            loss[k] = np.nan
            continue
        wk = w[tk]
        wt[k] = wk
        v = -(1.0 - e) * wk * np.float64(logp[k, tk])
        if e != 0.0:
            q = 0.0
            for j in range(C):
                q += w[j] * np.float64(logp[k, j])
            v -= e / C * q
        loss[k] = v
    return bad


@njit(error_model="numpy", parallel=True, cache=True)
def _forward_parallel(x, t, w, ignore, e, loss, logp, wt, nchunks):
    bad = 0
    n = x.shape[0]
    for c in prange(nchunks):
        bad += _forward_rows(x, t, w, ignore, e, loss, logp, wt, c * n // nchunks, (c + 1) * n // nchunks)
    return bad


@njit(error_model="numpy", cache=True, fastmath=_FM, nogil=True)
def _backward_rows(logp, t, wt, w, wsum, ignore, e, r, dx, r0, r1):
    C = logp.shape[1]
    zero = logp.dtype.type(0)
    for k in range(r0, r1):
        tk = t[k]
        valid = tk != ignore and 0 <= tk < C
        a = (1.0 - e) * r[k] * wt[k] if valid else 0.0     # weight of (p - onehot)
        b = e / C * r[k] if valid else 0.0                   # weight of (W p - w)
        coef = logp.dtype.type(a + b * wsum)
        bb = logp.dtype.type(b)
        for j in range(C):
            v = logp[k, j]
            p = exp_any(v) if v != -np.inf else zero
            dx[k, j] = p * coef - bb * w[j]
        if valid:
            dx[k, tk] -= logp.dtype.type(a)


@njit(error_model="numpy", parallel=True, cache=True)
def _backward_parallel(logp, t, wt, w, wsum, ignore, e, r, dx, nchunks):
    n = logp.shape[0]
    for c in prange(nchunks):
        _backward_rows(logp, t, wt, w, wsum, ignore, e, r, dx, c * n // nchunks, (c + 1) * n // nchunks)


def _kernel_takes(x, t, ignore_index):
    """float32/float64 rows of at least one class, integer targets, an int64 ignore_index (one
    beyond matches no target, which the reference's comparison handles)."""
    return (x.ndim == 2 and x.dtype in (np.float32, np.float64) and x.shape[1] > 0 and t.dtype.kind in "iu"
            and -2 ** 63 <= ignore_index < 2 ** 63)


def _weights(weight, C):
    return np.ones(C) if weight is None else np.ascontiguousarray(weight, dtype=np.float64)


def _check_lengths(op, M, C, weight, **rows):
    """The kernels read w[j] for every class and each array of ``rows`` at every row k < M."""
    if weight is not None and tuple(weight.shape) != (C,):
        raise ValueError(f"{op}: expected a weight of shape ({C},), got one of shape {tuple(weight.shape)}")
    for name, a in rows.items():
        if tuple(a.shape) != (M,):
            raise ValueError(f"{op}: expected {name} of shape ({M},) for {M} rows, got one of shape {tuple(a.shape)}")


def _chunks(x):
    """Row chunks for the parallel kernel, or 0 to run the rows on the calling thread."""
    return num_chunks(x.shape[0], x.size) if x.size >= SERIAL_BELOW else 0


def cross_entropy_forward(x, t, weight, ignore_index, smoothing):
    """(l, logp, w_k) per row of the logits x (M, C), as ``cross_entropy_forward_reference``."""
    if not _kernel_takes(x, t, ignore_index):
        from ...ops.loss import cross_entropy_forward_reference
        return cross_entropy_forward_reference(x, t, weight, ignore_index, smoothing)
    x = np.ascontiguousarray(x)
    t = np.ascontiguousarray(t, dtype=np.int64)
    M = x.shape[0]
    _check_lengths("cross_entropy_forward", M, x.shape[1], weight, t=t)
    loss, logp, wt = np.empty(M), np.empty_like(x), np.empty(M)
    w = _weights(weight, x.shape[1])
    nchunks = _chunks(x)
    args = (x, t, w, int(ignore_index), float(smoothing), loss, logp, wt)
    bad = _forward_parallel(*args, nchunks) if nchunks else _forward_rows(*args, 0, M)
    if bad:
        raise IndexError(f"cross_entropy: {bad} target(s) out of bounds for {x.shape[1]} classes")
    return loss, logp, wt


def cross_entropy_backward(logp, t, wt, weight, ignore_index, smoothing, r):
    """dL/dx (M, C), as ``cross_entropy_backward_reference``."""
    if not _kernel_takes(logp, t, ignore_index):
        from ...ops.loss import cross_entropy_backward_reference
        return cross_entropy_backward_reference(logp, t, wt, weight, ignore_index, smoothing, r)
    x = np.ascontiguousarray(logp)
    t = np.ascontiguousarray(t, dtype=np.int64)
    _check_lengths("cross_entropy_backward", x.shape[0], x.shape[1], weight, t=t, wt=wt, r=r)
    w = _weights(weight, x.shape[1]) if smoothing else np.zeros(x.shape[1])   # b = 0 without smoothing
    wsum = float(w.sum()) if smoothing else 0.0
    dx = np.empty_like(x)
    nchunks = _chunks(x)
    args = (x, t, np.ascontiguousarray(wt, dtype=np.float64), w, wsum,
            int(ignore_index), float(smoothing), np.ascontiguousarray(r, dtype=np.float64), dx)
    if nchunks:
        _backward_parallel(*args, nchunks)
    else:
        _backward_rows(*args, 0, x.shape[0])
    return dx
