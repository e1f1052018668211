"""Fused Numba kernels for BatchNorm (and masked BatchNorm1d) on the CPU.

BatchNorm's statistics run over every axis but the channel axis, so unlike Layer/Group
norm no row of memory holds a whole statistic. Each pass over memory costs (the kernels
are bound by memory, not arithmetic), so there are two strategies:

fused ((N, C, S) input with channels of moderate size, such as BatchNorm2d on CNN
activations): one parallel task per channel does everything for its channel: the
statistics (one pass of shifted sums, see _channel_stats), then the output; in backward the
two sums, then dx. The task's data (see _FUSED_BYTES) mostly stays in cache between its
passes, and one parallel region replaces three. The statistics take one pass of shifted sums:
a second pass, even from cache, costs measurably more (docs/performance.md).

chunked (everything else), in two layouts, with no transposes or copies:

- (N, C, S) with S > 1 (BatchNorm2d, BatchNorm1d on (N, C, L)): viewed as N*C contiguous
  "channel rows" of length S (row n*C + c). Statistics are gathered per (chunk of B
  samples, channel): a task reads its B rows once for the mean and again, from cache, for
  the squared deviations around it (two-pass, stable). The per-chunk (count, mean, M2) are
  merged per channel with Chan's formula M2 = sum_k M2_k + n_k (mean_k - mean)^2, which is
  just as stable. The apply and dx passes run over the N*C rows.
- (N, C) (BatchNorm1d on 2-D input): rows are samples; a task (one per thread) owns a chunk
  of rows and accumulates per-channel vectors (vectorised across channels) of the shifted
  sums in one pass over memory (shift: the mean of its first HEAD_ROWS rows), then the same
  merge. One pass instead of two (the second from cache) over chunks that fit in L2, and a
  partial per thread to merge instead of one per block. (A task per block of columns, to fuse
  the passes as above, would read rows C*4 bytes apart, which defeats the prefetcher and
  aliases in the caches.)

chunked forward = stats + one parallel pass writing y = (x - mean) * (rstd * gamma) + beta;
chunked backward = one parallel pass for per-chunk sums of dy and dy * (x - mean) (these give
dbeta, dgamma and the coupling terms), a small reduction over chunks, then one parallel pass
writing dx = p * dy + q * (x - mean) + o per channel (derivation in
minidl.ops.normalization.batch_norm). Arithmetic runs in the data's dtype with the
precautions described in _channel_rows (float64 across blocks, split means, shifted first pass).

float16 and bfloat16 are read and written as they are stored: the kernels take the 2-byte
integer view of x, dy, y and dx (``_half.storage``) and convert each element in registers
(float32 arithmetic, each output rounded once), so a 2-byte activation moves half the bytes
of a float32 one and is never copied to float32. The per-channel vectors (statistics, affine
parameters, folded constants) are float64 or the compute type, float32.

With a mask (N, S) of real positions (masked BatchNorm1d), padding enters no sum, and its y
and dx are 0. Masked input always takes the fused kernels, the only ones that read a mask
(half as many kernels to compile as a masked variant of each). Eval mode with a mask reuses
them with the statistics passed in.
"""
import numba
import numpy as np
from numba import njit, prange

from ._channel_rows import (cols_add_dev_sq, cols_add_dy_dyxc, cols_affine2, cols_normalize, row_affine2,
                            row_affine2_masked, row_count, row_normalize, row_normalize_masked, row_normalize_relu,
                            row_sq_dev_sum, row_sq_dev_sum_masked, row_sum, row_sum_masked, row_sums_dy_dyxc,
                            row_sums_dy_dyxc_masked, rows_shifted_moments)
from ._half import compute_zero, storage, widen
from ._numerics import FLUSH_ROWS, REASSOC_CONTRACT, compute_dtype, flush, mean_var_from_sums, row_head_mean
from ._stream import should_stream, store_fence, stream_row
from ._threads import chunk_bounds, num_chunks, threads_for

_ROW_CHUNK = 16384   # elements of one channel a stats task reads twice (64 KB in float32: stays in L2)
HEAD_ROWS = 16       # rows whose mean is the shift of an (N, C) chunk's one-pass statistics
REDO_RATIO = 64.0    # ... which are redone around the mean when (mean - shift)^2 > this * var (6 bits lost)
_FUSED_BYTES = 2 << 20   # the most bytes of x one fused task may own (its passes then hit cache)


# fused: one task per channel (rows layout) ----------------------------------------------------------
@njit(error_model="numpy", parallel=True, cache=True, fastmath=REASSOC_CONTRACT)
def _fused_forward_rows(x, mask, C, gamma, beta, eps, given, y, mean, rstd, stream, relu, res):
    """x, y: (N*C, S) channel rows; per channel c: mean and rstd over its N rows (only where
    mask; or, when ``given``, read from mean and rstd), then y = (x - mean) * rstd * gamma + beta
    (with ``stream`` and no mask, through an L1 scratch row and streaming stores), or its ReLU
    with ``relu`` (no mask), of y + res with the residual rows ``res`` (or None). Plain BatchNorm
    passes relu=False, res=None rather than omitting them: an omitted argument is typed apart
    from a passed one, and would compile a kernel of its own instead of sharing BN + ReLU's."""
    N = x.shape[0] // C
    for c in prange(C):
        if not given:
            mean[c], rstd[c] = _channel_stats(x, mask, C, c, eps)
        mu = mean[c]
        a = rstd[c] * gamma[c]
        row = np.empty((1, x.shape[1] if stream else 0), y.dtype)
        for n in range(N):
            if mask is not None:
                row_normalize_masked(y, x, n * C + c, mask, n, mu, a, beta[c])
            elif stream:
                if relu:
                    row_normalize_relu(row, 0, x, n * C + c, mu, a, beta[c], res)
                else:
                    row_normalize(row, 0, x, n * C + c, mu, a, beta[c])
                stream_row(y, n * C + c, row, 0)
            elif relu:
                row_normalize_relu(y, n * C + c, x, n * C + c, mu, a, beta[c], res)
            else:
                row_normalize(y, n * C + c, x, n * C + c, mu, a, beta[c])
        if stream:
            store_fence()


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def _channel_stats(x, mask, C, c, eps):
    """(mean, rstd) of channel c over its N rows of x (N*C, S), only where mask. Unmasked: one
    pass of shifted sums (the shift: the mean of the channel's first values, see
    _numerics.mean_var_from_sums), and a second pass around the mean only when the shift lay far from it
    (REDO_RATIO, as the (N, C) statistics); masked: two-pass."""
    N = x.shape[0] // C
    s1 = np.float64(0.0)
    s2 = np.float64(0.0)
    if mask is None:
        count = N * x.shape[1]
        shift = row_head_mean(x, c)
        s1, s2 = rows_shifted_moments(x, c, C, N, shift)
        mu, var = mean_var_from_sums(shift, s1, s2, count)
        if (mu - shift) ** 2 > REDO_RATIO * var:
            s2 = 0.0
            for n in range(N):
                s2 += row_sq_dev_sum(x, n * C + c, mu)
            var = s2 / count
        return mu, 1.0 / np.sqrt(var + eps)
    else:
        count = 0
        for n in range(N):
            count += row_count(mask, n)
            s1 += row_sum_masked(x, n * C + c, mask, n)
        mu = s1 / count if count > 0 else 0.0
        for n in range(N):
            s2 += row_sq_dev_sum_masked(x, n * C + c, mask, n, mu)
    return mu, 1.0 / np.sqrt((s2 / count if count > 0 else 0.0) + eps)


@njit(error_model="numpy", parallel=True, cache=True, fastmath=REASSOC_CONTRACT)
def _fused_backward_rows(dy, x, mask, C, mean, rstd, gamma, training, count, dx, sdy, sdyx, stream, relu_out=None,
                        ds=None):
    """Per channel: sdy = sum dy, sdyx = sum dy * (x - mean); then dx = p dy + q (x - mean) + o.
    With ``relu_out`` (the rows of relu(y), no mask), dy counts only where relu_out != 0; with
    ``ds`` as well, that masked dy is written into ds (the residual's gradient) by the first
    pass and read back by the second."""
    N = x.shape[0] // C
    for c in prange(C):
        a1 = np.float64(0.0)
        a2 = np.float64(0.0)
        for n in range(N):
            if mask is None:
                b1, b2 = row_sums_dy_dyxc(dy, x, n * C + c, mean[c], relu_out, ds)
            else:
                b1, b2 = row_sums_dy_dyxc_masked(dy, x, n * C + c, mask, n, mean[c])
            a1 += b1
            a2 += b2
        sdy[c] = a1
        sdyx[c] = a2
        p = gamma[c] * rstd[c]
        q = -p * rstd[c] * rstd[c] * a2 / count if training else 0.0
        o = -p * a1 / count if training else 0.0
        row = np.empty((1, x.shape[1] if stream else 0), dx.dtype)
        for n in range(N):
            if mask is not None:
                row_affine2_masked(dx, dy, x, n * C + c, mask, n, p, mean[c], q, o)
            elif ds is not None:
                if stream:
                    row_affine2(row, 0, ds, x, n * C + c, p, mean[c], q, o)
                    stream_row(dx, n * C + c, row, 0)
                else:
                    row_affine2(dx, n * C + c, ds, x, n * C + c, p, mean[c], q, o)
            elif stream:
                row_affine2(row, 0, dy, x, n * C + c, p, mean[c], q, o, relu_out)
                stream_row(dx, n * C + c, row, 0)
            else:
                row_affine2(dx, n * C + c, dy, x, n * C + c, p, mean[c], q, o, relu_out)
        if stream:
            store_fence()


# statistics ------------------------------------------------------------------------------------
@njit(error_model="numpy", parallel=True, cache=True)
def _chunk_stats_rows(x, C, B, cnt, pmean, pm2):
    """x: (N*C, S) channel rows; per (chunk k of B samples, channel c): count, mean, M2."""
    N = x.shape[0] // C
    S = x.shape[1]
    nch = cnt.shape[0]
    for t in prange(nch * C):
        k = t // C
        c = t - k * C
        n0 = k * B
        n1 = min(N, n0 + B)
        s1 = np.float64(0.0)
        s2 = np.float64(0.0)
        count = (n1 - n0) * S
        shift = widen(x[n0 * C + c, 0])
        for n in range(n0, n1):
            s1 += row_sum(x, n * C + c, shift)
        mu = shift + s1 / count
        for n in range(n0, n1):
            s2 += row_sq_dev_sum(x, n * C + c, mu)
        if c == 0:
            cnt[k] = count
        pmean[k, c] = mu
        pm2[k, c] = s2


@njit(error_model="numpy", parallel=True, cache=True)
def _chunk_stats_cols(x, cnt, pmean, pm2):
    """x: (N, C); per chunk k (one per thread) of rows: count, per-channel mean and M2, in one
    pass over memory. The pass sums d = x - shift and d^2, the shift being the mean of the
    chunk's first HEAD_ROWS rows (read twice, from cache): a value near the mean, so that
    M2 = sum d^2 - (sum d)^2 / n loses only a factor 1 + ((mean - shift) / std)^2 of precision
    to cancellation (about 1 + 1 / HEAD_ROWS), even for a large mean (the shifted-data
    algorithm, as _numerics.mean_var_from_sums for rows); a chunk where that factor exceeds REDO_RATIO
    for some channel takes a second pass around its mean. Sums run in x's dtype over FLUSH_ROWS rows, then
    in float64 (pmean and pm2 collect the float64 sums)."""
    N, C = x.shape
    nch = cnt.shape[0]
    for k in prange(nch):
        n0, n1 = chunk_bounds(N, nch, k)
        h = min(HEAD_ROWS, n1 - n0)
        head = np.zeros(C)
        for n in range(n0, n0 + h):
            for c in range(C):
                head[c] += widen(x[n, c])
        shift = np.full(C, compute_zero(x))     # x's compute type (float32 for 2-byte x)
        for c in range(C):
            shift[c] = head[c] / h
            pmean[k, c] = 0.0
            pm2[k, c] = 0.0
        s1 = np.full(C, compute_zero(x))
        s2 = np.full(C, compute_zero(x))
        for n in range(n0, n1):
            cols_add_dev_sq(s1, s2, x, n, shift)
            if (n - n0 + 1) % FLUSH_ROWS == 0 or n == n1 - 1:
                flush(pmean, k, s1)
                flush(pm2, k, s2)
        m = n1 - n0
        redo = False
        for c in range(C):
            sd = pmean[k, c]
            pmean[k, c] = np.float64(shift[c]) + sd / m
            m2 = max(pm2[k, c] - sd * sd / m, 0.0)
            pm2[k, c] = m2
            redo = redo or (sd * sd / m > REDO_RATIO * m2)     # the shift lay many std from the mean
        if redo:
            # rare (say, head rows of padding): a second pass around the chunk's mean, as two-pass
            for c in range(C):
                shift[c] = pmean[k, c]
                pm2[k, c] = 0.0
            for n in range(n0, n1):
                cols_add_dev_sq(s1, s2, x, n, shift)
                if (n - n0 + 1) % FLUSH_ROWS == 0 or n == n1 - 1:
                    s1[:] = 0                               # sums of x - mean: not needed
                    flush(pm2, k, s2)
            for c in range(C):
                lo = pmean[k, c] - np.float64(shift[c])     # sum (x - hi)^2 = M2 + m lo^2
                pm2[k, c] = max(pm2[k, c] - m * lo * lo, 0.0)
        cnt[k] = m


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def _merge(cnt, pmean, pm2, mean, m2):
    """Chan et al.: mean = sum n_k mean_k / n, M2 = sum M2_k + n_k (mean_k - mean)^2."""
    nch, C = pmean.shape
    total = 0.0
    for k in range(nch):
        total += cnt[k]
    for c in range(C):
        s = np.float64(0.0)
        for k in range(nch):
            s += cnt[k] * pmean[k, c]
        mu = s / total if total > 0 else 0.0
        q = 0.0
        for k in range(nch):
            d = pmean[k, c] - mu
            q += pm2[k, c] + cnt[k] * d * d
        mean[c] = mu
        m2[c] = q


# y = (x - mean) * scale + shift ------------------------------------------------------------------
@njit(error_model="numpy", parallel=True, cache=True, fastmath=REASSOC_CONTRACT)
def _apply_rows(x, C, mean, scale, shift, y):
    for i in prange(x.shape[0]):
        c = i % C
        row_normalize(y, i, x, i, mean[c], scale[c], shift[c])


@njit(error_model="numpy", parallel=True, cache=True)
def _apply_cols(x, hi, scale, shift, y, nchunks, stream):
    """y = (x - hi) * scale + shift; hi (the mean in x's dtype), scale, shift: (C,) in x's dtype,
    shift with the mean's lo part folded in (see _channel_rows). Each chunk of rows writes through an
    L1 scratch row with streaming stores when ``stream`` (see _stream)."""
    N, C = x.shape
    for k in prange(nchunks):
        start, stop = chunk_bounds(N, nchunks, k)
        row = np.empty((1, C if stream else 0), y.dtype)
        for n in range(start, stop):
            if stream:
                cols_normalize(row, 0, x, n, hi, scale, shift)
                stream_row(y, n, row, 0)
            else:
                cols_normalize(y, n, x, n, hi, scale, shift)
        if stream:
            store_fence()


# backward ------------------------------------------------------------------------------------------
@njit(error_model="numpy", parallel=True, cache=True, fastmath=REASSOC_CONTRACT)
def _chunk_grad_sums_rows(dy, x, C, B, mean, psdy, psdyx):
    """Per (chunk, channel): sum dy and sum dy * (x - mean_c)."""
    N = x.shape[0] // C
    nch = psdy.shape[0]
    for t in prange(nch * C):
        k = t // C
        c = t - k * C
        a1 = np.float64(0.0)
        a2 = np.float64(0.0)
        for n in range(k * B, min(N, k * B + B)):
            b1, b2 = row_sums_dy_dyxc(dy, x, n * C + c, mean[c])
            a1 += b1
            a2 += b2
        psdy[k, c] = a1
        psdyx[k, c] = a2


@njit(error_model="numpy", parallel=True, cache=True)
def _chunk_grad_sums_cols(dy, x, hi, psdy, psdyx):
    """Per chunk k (one per thread) of rows: sum dy and sum dy * (x - hi) per channel (in x's
    dtype over FLUSH_ROWS rows, then float64); the caller subtracts lo * sum dy."""
    N, C = x.shape
    nch = psdy.shape[0]
    for k in prange(nch):
        a1 = np.full(C, compute_zero(x))
        a2 = np.full(C, compute_zero(x))
        for c in range(C):
            psdy[k, c] = 0.0
            psdyx[k, c] = 0.0
        n0, n1 = chunk_bounds(N, nch, k)
        for n in range(n0, n1):
            cols_add_dy_dyxc(a1, a2, dy, x, n, hi)
            if (n - n0 + 1) % FLUSH_ROWS == 0 or n == n1 - 1:
                flush(psdy, k, a1)
                flush(psdyx, k, a2)


@njit(error_model="numpy", parallel=True, cache=True, fastmath=REASSOC_CONTRACT)
def _dx_rows(dy, x, C, p, mean, q, o, dx):
    for i in prange(x.shape[0]):
        c = i % C
        row_affine2(dx, i, dy, x, i, p[c], mean[c], q[c], o[c])


@njit(error_model="numpy", parallel=True, cache=True)
def _dx_cols(dy, x, p, hi, q, o, dx, nchunks, stream):
    """dx = p * dy + q * (x - hi) + o, o with q * lo folded in (see _channel_rows)."""
    N, C = x.shape
    for k in prange(nchunks):
        start, stop = chunk_bounds(N, nchunks, k)
        row = np.empty((1, C if stream else 0), dx.dtype)
        for n in range(start, stop):
            if stream:
                cols_affine2(row, 0, dy, x, n, p, hi, q, o)
                stream_row(dx, n, row, 0)
            else:
                cols_affine2(dx, n, dy, x, n, p, hi, q, o)
        if stream:
            store_fence()


# array-level entry points (the same signatures as the NumPy reference) -------------------------------
def _view(a, mask, dtype=None):
    """(layout, 2-D contiguous view of the kernels' array, ``_half.storage``): "cols" for (N, C)
    without mask, else "rows" (N*C, S). A contiguous a (in ``dtype``, default its own) is not copied."""
    a = storage(np.ascontiguousarray(a, dtype=dtype))
    if mask is None and (a.ndim == 2 or a.size == a.shape[0] * a.shape[1]):
        return "cols", a.reshape(a.shape[0], a.shape[1])
    return "rows", a.reshape(a.shape[0] * a.shape[1], -1)


def _chunks(n, per_sample, budget):
    b = max(1, min(n, budget // max(per_sample, 1)))
    return b, (n + b - 1) // b


def _fused(layout, v, c, mask):
    """Use the fused per-channel kernels? Always with a mask (the only kernels that take one);
    otherwise they need the rows layout, enough channels to keep every thread busy, a channel
    small enough to stay in cache, and contiguous runs of at least a cache line (else each
    channel's task would drag in the whole tensor)."""
    if mask is not None:
        return True
    if layout != "rows":
        return False
    n, s = v.shape[0] // c, v.shape[1]
    return c >= 2 * numba.get_num_threads() and n * s * v.itemsize <= _FUSED_BYTES and s * v.itemsize >= 64


def _split(mean, dtype):
    """The float64 mean as hi (in dtype, a compute type) + lo (float64, the rest; see _channel_rows)."""
    mean = np.asarray(mean, dtype=np.float64)
    hi = mean.astype(dtype)
    return hi, mean - hi


def _vector(v, c, fill):
    return np.full(c, fill) if v is None else np.ascontiguousarray(v, dtype=np.float64)


def _mask(mask):
    return None if mask is None else np.ascontiguousarray(mask, dtype=np.bool_)


def _output(x, shape):
    """(an uninitialised array like x, in its final shape and dtype, and the kernels' view of it
    of ``shape``): allocated in x's shape, since a reshaped view would make autograd copy it."""
    out = np.empty(x.shape, x.dtype)
    return out, storage(out).reshape(shape)


def _grad_view(dy, x, mask):
    """The kernels' view of dy: dy as it is stored when it has x's dtype; otherwise converted to
    x's compute type (as the kernels would read it)."""
    return _view(dy, mask, None if dy.dtype == x.dtype else compute_dtype(x.dtype))[1]


def batch_norm_stats(x):
    """(mean, biased var, count) per channel, float64, over every axis but 1, by the chunked kernels."""
    n, c = x.shape[0], x.shape[1]
    if x.size == 0:     # the mean and variance of no values
        return np.full(c, np.nan), np.full(c, np.nan), 0.0
    layout, v = _view(x, None)
    with threads_for(v.size):
        if layout == "cols":
            nch = num_chunks(n)
            cnt, pmean, pm2 = np.empty(nch), np.empty((nch, c)), np.empty((nch, c))
            _chunk_stats_cols(v, cnt, pmean, pm2)
        else:
            b, nch = _chunks(n, v.shape[1], _ROW_CHUNK)
            cnt, pmean, pm2 = np.empty(nch), np.empty((nch, c)), np.empty((nch, c))
            _chunk_stats_rows(v, c, b, cnt, pmean, pm2)
    mean, m2 = np.empty(c), np.empty(c)
    _merge(cnt, pmean, pm2, mean, m2)
    count = float(cnt.sum())
    return mean, m2 / max(count, 1.0), count


def batch_norm_apply(x, mean, rstd, weight=None, bias=None, mask=None):
    """y = (x - mean) * rstd * weight + bias per channel, given the statistics (eval mode)."""
    if x.size == 0:
        return np.empty(x.shape, x.dtype)
    c = x.shape[1]
    layout, v = _view(x, mask)
    y, yv = _output(x, v.shape)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    rstd = np.ascontiguousarray(rstd, dtype=np.float64)
    gamma, beta = _vector(weight, c, 1.0), _vector(bias, c, 0.0)
    with threads_for(v.size):
        if _fused(layout, v, c, mask):
            _fused_forward_rows(v, _mask(mask), c, gamma, beta, 0.0, True, yv, mean, rstd,
                                mask is None and should_stream(yv), False, None)
        elif layout == "cols":
            dt = compute_dtype(x.dtype)
            hi, lo = _split(mean, dt)
            scale = rstd * gamma
            _apply_cols(v, hi, scale.astype(dt), (beta - lo * scale).astype(dt), yv, num_chunks(v.shape[0]),
                        should_stream(yv))
        else:
            _apply_rows(v, c, mean, rstd * gamma, beta, yv)
    return y


def batch_norm_forward(x, weight=None, bias=None, eps=1e-5, mask=None):
    """Training forward: (y, mean, rstd), statistics from the batch (float64, shape (C,));
    NaN statistics for an input without elements (no row reaches a kernel)."""
    c = x.shape[1]
    if x.size == 0:
        return np.empty(x.shape, x.dtype), np.full(c, np.nan), np.full(c, np.nan)
    layout, v = _view(x, mask)
    with threads_for(v.size):
        fused = _fused(layout, v, c, mask)
    if not fused:
        mean, var, _ = batch_norm_stats(x)
        rstd = 1.0 / np.sqrt(var + eps)
        return batch_norm_apply(x, mean, rstd, weight, bias), mean, rstd
    y, yv = _output(x, v.shape)
    mean, rstd = np.empty(c), np.empty(c)
    with threads_for(v.size):
        _fused_forward_rows(v, _mask(mask), c, _vector(weight, c, 1.0), _vector(bias, c, 0.0), float(eps), False,
                            yv, mean, rstd, mask is None and should_stream(yv), False, None)
    return y, mean, rstd


def batch_norm_backward(dy, x, mean, rstd, weight=None, training=True, mask=None, need_dx=True, need_dweight=True,
                        need_dbias=True):
    """(dx, dweight, dbias), dweight/dbias float64 (None when neither is needed and the
    statistics were fixed, so no sums are needed). dx comes out of the same pass as the sums,
    so it is always computed."""
    need_affine = need_dweight or need_dbias
    c = x.shape[1]
    if x.size == 0:     # dgamma, dbeta: sums over no values
        return np.empty(x.shape, x.dtype), np.zeros(c), np.zeros(c)
    layout, xv = _view(x, mask)
    dyv = _grad_view(dy, x, mask)
    m = _mask(mask)
    mean = np.ascontiguousarray(mean, dtype=np.float64)
    rstd = np.ascontiguousarray(rstd, dtype=np.float64)
    gamma = _vector(weight, c, 1.0)
    dx, dxv = _output(x, xv.shape)    # autograd keeps it as .grad without a copy
    count = float(np.count_nonzero(m)) if m is not None else xv.size / c
    with threads_for(xv.size):
        if (training or need_affine or m is not None) and _fused(layout, xv, c, m):
            sdy, sdyx = np.empty(c), np.empty(c)
            _fused_backward_rows(dyv, xv, m, c, mean, rstd, gamma, training, count, dxv, sdy, sdyx,
                                 m is None and should_stream(dxv))
        else:
            sdy, sdyx = _chunked_backward(dyv, xv, layout, c, mean, rstd, gamma * rstd, training, need_affine,
                                          count, dxv, compute_dtype(x.dtype))
    if sdy is None:
        return dx, None, None
    return dx, rstd * sdyx, sdy


def _chunked_backward(dyv, xv, layout, c, mean, rstd, p, training, need_affine, count, dx, dt):
    """The chunked backward on the kernels' views; ``dt``: the compute type."""
    n = xv.shape[0] if layout == "cols" else xv.shape[0] // c
    sdy = sdyx = None
    hi, lo = _split(mean, dt)
    if training or need_affine:
        if layout == "cols":
            nch = num_chunks(n)          # one chunk per thread: a single pass, nothing to keep in cache
            psdy, psdyx = np.empty((nch, c)), np.empty((nch, c))
            _chunk_grad_sums_cols(dyv, xv, hi, psdy, psdyx)
            psdyx -= lo * psdy           # sum dy (x - mean) = sum dy (x - hi) - lo sum dy
        else:
            b, nch = _chunks(n, xv.shape[1], _ROW_CHUNK)
            psdy, psdyx = np.empty((nch, c)), np.empty((nch, c))
            _chunk_grad_sums_rows(dyv, xv, c, b, mean, psdy, psdyx)
        sdy, sdyx = psdy.sum(axis=0), psdyx.sum(axis=0)
    if training:
        q = -p * rstd * rstd * sdyx / count
        o = -p * sdy / count
    else:
        q = np.zeros(c)
        o = np.zeros(c)
    if layout == "cols":
        _dx_cols(dyv, xv, p.astype(dt), hi, q.astype(dt), (o - q * lo).astype(dt), dx, num_chunks(xv.shape[0]),
                 should_stream(dx))
    else:
        _dx_rows(dyv, xv, c, p, mean, q, o, dx)
    return sdy, sdyx
