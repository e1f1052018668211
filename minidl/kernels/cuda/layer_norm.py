"""LayerNorm and RMSNorm forward and backward on cuda (the math: minidl/ops/normalization/layer_norm.py
and rms_norm.py; this file only maps it onto the GPU).

Rows are independent, so the forward runs **one block per row**: the block's threads stride
over the row's D features, each keeping a private partial sum, and a shared-memory tree
(``block_sum``) combines the partials. Two passes over the row (the mean, then the sum of
squared deviations from it) keep the variance exact for data with a large mean; RMSNorm
(``center=False``) skips the first. Statistics accumulate in float32 for float16/float32
inputs and in float64 for float64 (``acc``), and mean / rstd are saved per row. bfloat16 rows
(uint16 bits on the device) run on float32 copies, the output rounded once.

The backward needs per row the two means  mean(g)  and  mean(g * xhat)  (g = dy * gamma), again
a block reduction per row, and then dx = rstd (g - mean(g) - xhat mean(g xhat)) elementwise.
dgamma = sum_rows dy * xhat and dbeta = sum_rows dy couple all rows, so they are done in two
stages that need no atomics: a grid of R blocks, block b handling rows b, b + R, ..., in which
thread t owns columns t, t + T, ... and adds into its own slot of a per-block partial buffer
(R, D); then a second kernel (the generic reduce) sums the R partials per column.
"""
import math

import numba
import numpy as np
from numba import cuda

from ._common import REDUCE_THREADS, kernel_cache, xp_of
from .bfloat16 import is_bfloat16
from .reduce import accumulator_dtype

PARTIAL_BLOCKS = 4 if REDUCE_THREADS < 32 else 256   # R, the rows of the dgamma / dbeta partial buffer


@cuda.jit(device=True)
def block_sum(buf, t, value, threads):
    """Sum of ``value`` over the block's ``threads`` threads (a power of two), returned to all."""
    buf[t] = value
    cuda.syncthreads()
    step = threads // 2
    while step > 0:
        if t < step:
            buf[t] += buf[t + step]
        cuda.syncthreads()
        step //= 2
    total = buf[0]
    cuda.syncthreads()   # everyone has read buf[0] before the next block_sum overwrites it
    return total


def _build_forward(acc, threads, center, has_w, has_b):
    acc_t = numba.from_dtype(acc)

    @cuda.jit
    def kernel(y, x, w, b, mean_out, rstd_out, d, inv_d, eps):
        row = cuda.blockIdx.x
        t = cuda.threadIdx.x
        buf = cuda.shared.array(threads, acc_t)
        base = row * d
        mu = acc_t(0)
        if center:
            s = acc_t(0)
            for j in range(t, d, threads):
                s += acc_t(x[base + j])
            mu = block_sum(buf, t, s, threads) * inv_d
        q = acc_t(0)
        for j in range(t, d, threads):
            v = acc_t(x[base + j]) - mu
            q += v * v
        rstd = acc_t(1) / math.sqrt(block_sum(buf, t, q, threads) * inv_d + eps)
        for j in range(t, d, threads):
            v = (acc_t(x[base + j]) - mu) * rstd
            if has_w:
                v = v * acc_t(w[j])
            if has_b:
                v = v + acc_t(b[j])
            y[base + j] = v
        if t == 0:
            mean_out[row] = mu
            rstd_out[row] = rstd
    return kernel


def _build_backward(acc, threads, center, has_w, need_dx, need_dw, need_db):
    acc_t = numba.from_dtype(acc)

    @cuda.jit
    def kernel(dx, dy, x, w, mean, rstd, dw_part, db_part, n, d, inv_d):
        blk = cuda.blockIdx.x
        t = cuda.threadIdx.x
        buf = cuda.shared.array(threads, acc_t)
        row = blk
        while row < n:   # uniform across the block: every thread runs the same rows
            base = row * d
            mu = acc_t(mean[row])
            rs = acc_t(rstd[row])
            s1 = acc_t(0)
            s2 = acc_t(0)
            for j in range(t, d, threads):
                xh = (acc_t(x[base + j]) - mu) * rs
                dyj = acc_t(dy[base + j])
                g = dyj * acc_t(w[j]) if has_w else dyj
                s1 += g
                s2 += g * xh
                if need_dw:
                    dw_part[blk * d + j] += dyj * xh
                if need_db:
                    db_part[blk * d + j] += dyj
            m1 = block_sum(buf, t, s1, threads) * inv_d if center else acc_t(0)
            m2 = block_sum(buf, t, s2, threads) * inv_d
            if need_dx:
                for j in range(t, d, threads):
                    xh = (acc_t(x[base + j]) - mu) * rs
                    dyj = acc_t(dy[base + j])
                    g = dyj * acc_t(w[j]) if has_w else dyj
                    dx[base + j] = rs * (g - m1 - xh * m2)
            row += cuda.gridDim.x
    return kernel


_forward = kernel_cache(_build_forward)
_backward = kernel_cache(_build_backward)


def _threads(d):
    threads = REDUCE_THREADS
    while threads > 1 and threads // 2 >= d:
        threads //= 2
    return threads


def _flat(a):
    """The contiguous CudaArray ``a`` as a flat device array (a view of its buffer)."""
    if a is None:
        return None
    if not a.is_contiguous():
        a = a.copy()
    return a._buf[a._off:a._off + a.size]


def _dummy(dtype):
    return cuda.device_array(1, dtype=dtype)


def _float32(*arrays):
    """bfloat16 arrays as float32 copies (the rows read bits as numbers otherwise), others as they are."""
    return tuple(a if a is None or not is_bfloat16(a.dtype) else a.astype(np.float32) for a in arrays)


def _rounded(y32, dtype, out):
    """The float32 result y32 rounded once to ``dtype`` (x's), into ``out`` when given."""
    if out is None:
        return y32 if y32.dtype == dtype else y32.astype(dtype)
    out[...] = y32
    return out


def norm_forward(x2, weight, bias, eps, center, out=None):
    """y (n, d) in x's dtype (written into ``out``, a contiguous (n, d) array, when given), mean and
    rstd (n,) in the accumulator dtype; x2 is (n, d). bfloat16 (kept as its uint16 bits on the
    device) is normalized in float32 and y rounded once, as the float16 rows round their store."""
    if any(a is not None and is_bfloat16(a.dtype) for a in (x2, weight, bias, out)):
        y32, mean, rstd = norm_forward(*_float32(x2, weight, bias), eps, center)
        return _rounded(y32, x2.dtype, out), mean, rstd
    n, d = x2.shape
    acc = accumulator_dtype(x2.dtype)
    y = type(x2).empty((n, d), x2.dtype) if out is None else out
    mean, rstd = type(x2).empty((n,), acc), type(x2).empty((n,), acc)
    if n and d:
        threads = _threads(d)
        k = _forward(acc, threads, bool(center), weight is not None, bias is not None)
        k[n, threads](_flat(y), _flat(x2), _flat(weight) if weight is not None else _dummy(acc),
                      _flat(bias) if bias is not None else _dummy(acc), mean._buf, rstd._buf, d,
                      acc.type(1.0 / d), acc.type(eps))
    return y, mean, rstd


def norm_backward(dy2, x2, mean, rstd, weight, need_dx, need_dw, need_db, center, dx_out=None):
    """dx (n, d) in x's dtype (into ``dx_out`` when given; None if not needed), dweight and dbias
    (d,) in the accumulator dtype (or None). bfloat16: in float32, dx rounded once."""
    if any(a is not None and is_bfloat16(a.dtype) for a in (dy2, x2, weight, dx_out)):
        dx32, dw, db = norm_backward(*_float32(dy2, x2), mean, rstd, *_float32(weight), need_dx, need_dw, need_db,
                                     center)
        return (_rounded(dx32, x2.dtype, dx_out) if need_dx else None), dw, db
    xp = xp_of(x2)
    n, d = x2.shape
    acc = accumulator_dtype(x2.dtype)
    dx = (type(x2).empty((n, d), x2.dtype) if dx_out is None else dx_out) if need_dx else None
    blocks = max(1, min(n, PARTIAL_BLOCKS))
    dw_part = xp.zeros((blocks, d), acc) if need_dw else None
    db_part = xp.zeros((blocks, d), acc) if need_db else None
    if n and d:
        threads = _threads(d)
        k = _backward(acc, threads, bool(center), weight is not None, bool(need_dx), bool(need_dw), bool(need_db))
        k[blocks, threads](_flat(dx) if need_dx else _dummy(x2.dtype), _flat(dy2), _flat(x2),
                           _flat(weight) if weight is not None else _dummy(acc), mean._buf, rstd._buf,
                           dw_part._buf if need_dw else _dummy(acc), db_part._buf if need_db else _dummy(acc),
                           n, d, acc.type(1.0 / d))
    dw = dw_part.sum(axis=0) if need_dw else None   # the second stage: sum the R partials per column
    db = db_part.sum(axis=0) if need_db else None
    return dx, dw, db


# the array-level signatures of the CPU kernels (minidl/kernels/cpu/layer_norm.py, rms_norm.py) -----

def layer_norm_forward(x2, weight, bias, eps, out=None):
    return norm_forward(x2, weight, bias, eps, center=True, out=out)


def layer_norm_backward(dy2, x2, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True, dx_out=None):
    return norm_backward(dy2, x2, mean, rstd, weight, need_dx, need_dweight, need_dbias, center=True, dx_out=dx_out)


def rms_norm_forward(x2, weight, eps, out=None):
    y, _, rstd = norm_forward(x2, weight, None, eps, center=False, out=out)
    return y, rstd


def rms_norm_backward(dy2, x2, rstd, weight, need_dx=True, need_dweight=True, dx_out=None):
    xp = xp_of(rstd)
    mean = xp.zeros(rstd.shape, rstd.dtype)
    dx, dw, _ = norm_backward(dy2, x2, mean, rstd, weight, need_dx, need_dweight, False, center=False, dx_out=dx_out)
    return dx, dw
