"""SyncBatchNorm's local passes on the CPU: BatchNorm's kernels, split where the ranks meet.

BatchNorm's kernels (batch_norm.py) compute the statistics, the output, the two gradient sums
and dx in one go per node. SyncBatchNorm needs the same passes with an exchange between them
(the math: minidl.ops.normalization.sync_batch_norm): the local (count, mean, M2) before the
ranks merge their statistics, and the local sums of dy and dy * (x - mean) before dx, which
needs the sums of every rank. These functions are those passes, made of batch_norm.py's chunked
kernels (the same layouts, the same numerics: stable shifted or two-pass statistics, float64
partial sums, float16 and bfloat16 read and written as stored, computed in float32). The output pass is batch_norm.py's
``batch_norm_apply``. Unmasked input only: the masked variant runs the reference.
"""
import numpy as np

from ._numerics import compute_dtype
from ._threads import num_chunks, threads_for
from ._stream import should_stream
from .batch_norm import (_ROW_CHUNK, _chunk_grad_sums_cols, _chunk_grad_sums_rows, _chunks, _dx_cols, _dx_rows,
                         _grad_view, _output, _split, _vector, _view, batch_norm_apply, batch_norm_stats)

batch_norm_apply = batch_norm_apply   # the output pass, given the merged statistics


def _unmasked(mask):
    if mask is not None:
        raise ValueError("the CPU SyncBatchNorm kernels take no mask (the masked variant runs the reference)")


def sync_batch_norm_moments(x, mask=None):
    """(count, mean, M2) per channel of the local batch: count a float, mean and M2 float64 (C,);
    zeros for a batch without values (a rank with no samples contributes nothing)."""
    _unmasked(mask)
    c = x.shape[1]
    if x.size == 0:
        return 0.0, np.zeros(c), np.zeros(c)
    mean, var, count = batch_norm_stats(x)
    return count, mean, var * count


def sync_batch_norm_grad_sums(dy, x, mean, mask=None):
    """(sum dy, sum dy * (x - mean)) per channel of the local batch, float64, ``mean`` the global one."""
    _unmasked(mask)
    c = x.shape[1]
    if x.size == 0:
        return np.zeros(c), np.zeros(c)
    dt = compute_dtype(x.dtype)
    layout, xv = _view(x, None)
    dyv = _grad_view(dy, x, None)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    with threads_for(xv.size):
        if layout == "cols":
            nch = num_chunks(xv.shape[0])
            psdy, psdyx = np.empty((nch, c)), np.empty((nch, c))
            hi, lo = _split(mean, dt)
            _chunk_grad_sums_cols(dyv, xv, hi, psdy, psdyx)
            psdyx -= lo * psdy           # sum dy (x - mean) = sum dy (x - hi) - lo sum dy
        else:
            b, nch = _chunks(xv.shape[0] // c, xv.shape[1], _ROW_CHUNK)
            psdy, psdyx = np.empty((nch, c)), np.empty((nch, c))
            _chunk_grad_sums_rows(dyv, xv, c, b, mean, psdy, psdyx)
    return psdy.sum(axis=0), psdyx.sum(axis=0)


def sync_batch_norm_input_grad(dy, x, mean, rstd, weight, sum_dy, sum_dy_xmu, count, mask=None):
    """dx = p dy + q (x - mean) + o per channel, p = gamma rstd, q = -p rstd^2 B / n, o = -p A / n
    (A, B, n: the sums and count over every rank)."""
    _unmasked(mask)
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    c = x.shape[1]
    dt = compute_dtype(x.dtype)
    layout, xv = _view(x, None)
    dyv = _grad_view(dy, x, None)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    rstd = np.ascontiguousarray(rstd, dtype=np.float64)
    p = _vector(weight, c, 1.0) * rstd
    q = -p * rstd * rstd * np.asarray(sum_dy_xmu, np.float64) / count
    o = -p * np.asarray(sum_dy, np.float64) / count
    dx, dxv = _output(x, xv.shape)    # autograd keeps it as .grad without a copy
    with threads_for(xv.size):
        if layout == "cols":
            hi, lo = _split(mean, dt)
            _dx_cols(dyv, xv, p.astype(dt), hi, q.astype(dt), (o - q * lo).astype(dt), dxv, num_chunks(xv.shape[0]),
                     should_stream(dxv))
        else:
            _dx_rows(dyv, xv, c, p, mean, q, o, dxv)
    return dx
