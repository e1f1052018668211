"""Fused Numba kernels for GroupNorm and InstanceNorm on the CPU.

Both norms normalize *rows*: view x (N, C, *) as (N, G, K, S) with K = C // G channels per
group and S spatial positions; every (n, g) is one row of K*S contiguous values with its own
mean and rstd, and channel c = g*K + k gets its own gamma/beta. InstanceNorm is the case
G = C (K = 1), so both norms run the very same kernel pair.

forward: one parallel pass over rows; each row (a few KB) is read once from memory for the
sums of d = x - shift and d^2, with the shift the mean of the row's first values (see
_numerics.mean_var_from_sums: no cancellation in var = mean(d^2) - mean(d)^2 even for inputs like
1e3 + 1e-2 * randn), then again from cache to be written normalized. Arithmetic runs in the
data's dtype with the precautions described in _channel_rows (float64 across blocks, split means).

backward (derivation in minidl.ops.normalization.group_norm): per row, one pass gathers per
channel sum(dy) and sum(dy * (x - mean)); the row's dx is then an affine function of dy and
x per channel, written in a second pass over the row while it is still in cache. The
per-(sample, channel) sums are the partial sums of dgamma/dbeta; a final reduction over N
replaces atomics.

Each thread takes one chunk of consecutive rows. Outputs of _stream.STREAM_MIN_BYTES or more
are written with streaming stores through an L1 scratch row, with one fence per chunk (a
fence per row, with a parallel loop over rows, made InstanceNorm slower instead of faster).

float16 and bfloat16 are read and written as they are stored, through their 2-byte integer
views (``_half.storage``), and converted in registers: float32 arithmetic, no float32 copy of
the activation, half the bytes of float32 to move.
"""
import numpy as np
from numba import njit, prange

from ._channel_rows import row_affine2, row_normalize, row_normalize_relu, row_sums_dy_dyxc, rows_shifted_moments
from ._half import storage
from ._numerics import REASSOC_CONTRACT, compute_dtype, mean_var_from_sums, row_head_mean
from .relu import add_relu_forward, relu_backward, relu_forward
from ._stream import should_stream, store_fence, stream_row
from ._threads import chunk_bounds, num_chunks, threads_for


@njit(error_model="numpy", parallel=True, cache=True, fastmath=REASSOC_CONTRACT)
def _rows_forward(x, K, gamma, beta, eps, y, mean, rstd, nchunks, stream, relu=False, res=None):
    """x, y: (N*C, S) channel rows; group r is the K consecutive channel rows r*K ... r*K+K-1.
    mean, rstd: (N*G,). The groups are split into nchunks chunks (one per thread). With
    ``stream``, y is written through an L1 scratch row with streaming stores (see _stream),
    fenced once per chunk. With ``relu``, y is the ReLU of the normalized output, of the
    normalized output + ``res`` (residual rows) when given."""
    R = x.shape[0] // K
    m = K * x.shape[1]
    C = gamma.shape[0]
    for ch in prange(nchunks):
        start, stop = chunk_bounds(R, nchunks, ch)
        row = np.empty((1, x.shape[1] if stream else 0), y.dtype)
        for r in range(start, stop):
            shift = row_head_mean(x, r * K)
            s1, s2 = rows_shifted_moments(x, r * K, 1, K, shift)
            mu, var = mean_var_from_sums(shift, s1, s2, m)
            rs = 1.0 / np.sqrt(var + eps)
            mean[r] = mu
            rstd[r] = rs
            for k in range(K):
                c = (r * K + k) % C
                if stream:
                    if relu:
                        row_normalize_relu(row, 0, x, r * K + k, mu, rs * gamma[c], beta[c], res)
                    else:
                        row_normalize(row, 0, x, r * K + k, mu, rs * gamma[c], beta[c])
                    stream_row(y, r * K + k, row, 0)
                elif relu:
                    row_normalize_relu(y, r * K + k, x, r * K + k, mu, rs * gamma[c], beta[c], res)
                else:
                    row_normalize(y, r * K + k, x, r * K + k, mu, rs * gamma[c], beta[c])
        if stream:
            store_fence()


@njit(error_model="numpy", parallel=True, cache=True, fastmath=REASSOC_CONTRACT)
def _rows_backward(dy, x, K, mean, rstd, gamma, dx, sdy, sdyx, nchunks, stream, relu_out=None, ds=None):
    """dx = rstd * (gamma_c dy - mean(dxhat) - xhat * mean(dxhat xhat)) per group row; sdy and
    sdyx (N*C,) receive sum(dy) and sum(dy * xhat) per (sample, channel) row. Chunks and
    ``stream`` as in _rows_forward. With ``relu_out`` (the rows of relu(y)), dy counts only
    where relu_out != 0; with ``ds`` as well, that masked dy is written into ds (the residual's
    gradient) by the first pass and read back by the second."""
    R = x.shape[0] // K
    m = K * x.shape[1]
    C = gamma.shape[0]
    for ch in prange(nchunks):
        start, stop = chunk_bounds(R, nchunks, ch)
        row = np.empty((1, x.shape[1] if stream else 0), dx.dtype)
        for r in range(start, stop):
            mu = mean[r]
            rs = rstd[r]
            A = np.float64(0.0)  # sum over the group of dxhat = gamma_c * dy
            B = np.float64(0.0)  # sum over the group of dxhat * xhat
            for k in range(K):
                i = r * K + k
                a1, a2 = row_sums_dy_dyxc(dy, x, i, mu, relu_out, ds)
                sdy[i] = a1
                sdyx[i] = a2 * rs
                A += gamma[i % C] * a1
                B += gamma[i % C] * a2 * rs
            off = rs * A / m
            q = rs * rs * B / m
            for k in range(K):
                i = r * K + k
                if ds is not None:
                    if stream:
                        row_affine2(row, 0, ds, x, i, gamma[i % C] * rs, mu, -q, -off)
                        stream_row(dx, i, row, 0)
                    else:
                        row_affine2(dx, i, ds, x, i, gamma[i % C] * rs, mu, -q, -off)
                elif stream:
                    row_affine2(row, 0, dy, x, i, gamma[i % C] * rs, mu, -q, -off, relu_out)
                    stream_row(dx, i, row, 0)
                else:
                    row_affine2(dx, i, dy, x, i, gamma[i % C] * rs, mu, -q, -off, relu_out)
        if stream:
            store_fence()


def _rows(a, dtype=None):
    """The kernels' (N*C, S) view of a (``_half.storage``: a 2-byte float as its integer view);
    a copy only where a is not contiguous or not in ``dtype`` (default: its own)."""
    return storage(np.ascontiguousarray(a, dtype=dtype)).reshape(a.shape[0] * a.shape[1], -1)


def _output(x, shape):
    """(an uninitialised array like x, in its final shape and dtype, and the kernels' view of it of
    ``shape``): allocated in x's shape, since a reshaped view would make autograd copy it."""
    out = np.empty(x.shape, x.dtype)
    return out, storage(out).reshape(shape)


def _affine(v, c, fill):
    return np.full(c, fill) if v is None else np.ascontiguousarray(v, dtype=np.float64)


def group_norm_forward(x, num_groups, weight=None, bias=None, eps=1e-5, relu=False, residual=None):
    """(y, mean, rstd) with mean and rstd of shape (N, num_groups), float64 (y = relu(GroupNorm(x))
    with ``relu``, relu(GroupNorm(x) + residual) with a residual too)."""
    n, c = x.shape[0], x.shape[1]
    if residual is not None and (residual.shape != x.shape or residual.dtype != x.dtype):
        raise ValueError(f"group_norm: expected a residual of shape {x.shape} and dtype {x.dtype}, got "
                         f"{residual.shape} and {residual.dtype}")      # the kernel reads it by x's rows
    if x.size == 0:     # no samples, or groups of no values: the statistics of no values are NaN
        return np.empty(x.shape, x.dtype), np.full((n, num_groups), np.nan), np.full((n, num_groups), np.nan)
    xc = _rows(x)
    y_full, y = _output(x, xc.shape)
    mean = np.empty(n * num_groups)
    rstd = np.empty(n * num_groups)
    with threads_for(xc.size):
        _rows_forward(xc, c // num_groups, _affine(weight, c, 1.0), _affine(bias, c, 0.0), float(eps), y, mean, rstd,
                      num_chunks(n * num_groups), should_stream(y), bool(relu),
                      None if residual is None else _rows(residual))
    return y_full, mean.reshape(n, num_groups), rstd.reshape(n, num_groups)


def group_norm_backward(dy, x, mean, rstd, weight, num_groups, need_dx=True, need_dweight=True, need_dbias=True,
                        relu_out=None):
    """(dx, dweight, dbias); dweight and dbias in float64 (the caller casts them). One pass gives
    all three, so every one is computed whatever ``need_*`` says. ``relu_out``: the output of
    relu(GroupNorm(x)), whose backward this then is (dy counts where relu_out != 0)."""
    return _backward(dy, x, mean, rstd, weight, num_groups, relu_out)[:3]


def _backward(dy, x, mean, rstd, weight, num_groups, relu_out=None, residual_grad=False):
    """group_norm_backward's (dx, dweight, dbias), and with ``residual_grad`` (and relu_out) the
    masked dy as a fourth: the residual's gradient of relu(GroupNorm(x) + residual)."""
    n, c = x.shape[0], x.shape[1]
    if x.size == 0:     # dgamma, dbeta: sums over no values
        return (np.empty(x.shape, x.dtype), np.zeros(c), np.zeros(c),
                np.empty(x.shape, x.dtype) if residual_grad else None)
    xc = _rows(x)
    dyc = _rows(dy, None if dy.dtype == x.dtype else compute_dtype(x.dtype))
    dx_full, dx = _output(x, xc.shape)
    ds_full, ds = _output(x, xc.shape) if residual_grad else (None, None)
    sdy = np.empty(n * c)
    sdyx = np.empty(n * c)
    with threads_for(xc.size):
        _rows_backward(dyc, xc, c // num_groups, np.ascontiguousarray(mean, dtype=np.float64).reshape(-1),
                       np.ascontiguousarray(rstd, dtype=np.float64).reshape(-1), _affine(weight, c, 1.0), dx, sdy, sdyx,
                       num_chunks(n * num_groups), should_stream(dx), None if relu_out is None else _rows(relu_out), ds)
    return (dx_full,
            sdyx.reshape(n, c).sum(axis=0), sdy.reshape(n, c).sum(axis=0), ds_full)


def instance_norm_forward(x, weight=None, bias=None, eps=1e-5):
    """InstanceNorm = GroupNorm with one channel per group: mean, rstd of shape (N, C)."""
    return group_norm_forward(x, x.shape[1], weight, bias, eps)


def instance_norm_backward(dy, x, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True):
    return group_norm_backward(dy, x, mean, rstd, weight, x.shape[1])


# GroupNorm + ReLU, and + add + ReLU (the BatchNorm rule, kernels/cpu/batch_norm_relu.py): the ReLU
# (of the sum with the residual) as the forward's epilogue, its mask (the output != 0) inside the
# backward's passes, whose first writes the residual's gradient when it is wanted; a 2-byte float
# runs the ops in turn (rounding to 0 would change the sign of a zero output)
def group_norm_relu_forward(x, num_groups, weight=None, bias=None, eps=1e-5, residual=None):
    """(relu(GroupNorm(x) [+ residual]), mean, rstd)."""
    if x.dtype in _WIDE and (residual is None or (residual.shape == x.shape and residual.dtype == x.dtype)):
        return group_norm_forward(x, num_groups, weight, bias, eps, relu=True, residual=residual)
    y, mean, rstd = group_norm_forward(x, num_groups, weight, bias, eps)
    return (relu_forward(y) if residual is None else add_relu_forward(y, residual))[0], mean, rstd


def group_norm_relu_backward(dy, r, x, mean, rstd, weight, num_groups, need_dx=True, need_dweight=True,
                             need_dbias=True, need_dresidual=False):
    """(dx, dweight, dbias, dresidual) of r = relu(GroupNorm(x) [+ residual]) for the output
    gradient dy; dresidual (dy where r != 0) only with ``need_dresidual``, else None."""
    if x.dtype in _WIDE and r.dtype == x.dtype and (
            not need_dresidual or (dy.dtype == x.dtype and r.shape == dy.shape == x.shape)):
        return _backward(dy, x, mean, rstd, weight, num_groups, relu_out=r, residual_grad=need_dresidual)
    ds = relu_backward(r != 0, dy)
    return group_norm_backward(ds, x, mean, rstd, weight, num_groups) + (ds if need_dresidual else None,)


_WIDE = (np.dtype(np.float32), np.dtype(np.float64))
