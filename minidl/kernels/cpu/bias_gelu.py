"""Numba kernels for the epilogue of a Linear + GELU (minidl/ops/linear_gelu.py, where the math
is): forward a = gelu(U + b), backward dU = da * gelu'(U + b) with db = sum_rows dU in the same
pass, over the rows of the GEMM's result U (M, out).

Rows are split into one chunk per thread; each chunk sums its rows' dU into a block in the
input's dtype, flushed every FLUSH_ROWS rows into its float64 partial (see _numerics.flush), and
the partials are added at the end: no atomics, nothing of size (M, out) but dU itself. The GELU
arithmetic is kernels/cpu/gelu.py's (float32: the vectorisable exp32 and erf_f32, multiply-adds
fused; float64: libm), inlined here so that the loops vectorise. Parallel when the layer kernels
may be (``_threads.layer_parallel``), else on one thread.
"""
import numba
import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ._numerics import CONTRACT, FLUSH_ROWS, flush, sum_partials
from ._threads import chunk_bounds, layer_parallel, threads_for
from .gelu import _SQRT_2_OVER_PI, _dgelu, _dgelu32, _gelu, _gelu32, _half_one_plus_tanh, dgelu_tanh32, gelu_tanh32


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _forward_rows32(u, b, a, start, stop, tanh):
    """Rows start..stop of a = gelu(u + b)."""
    m = u.shape[1]
    for i in range(start, stop):
        if tanh:
            for j in range(m):
                a[i, j] = gelu_tanh32(u[i, j] + b[j])
        else:
            for j in range(m):
                a[i, j] = _gelu32(u[i, j] + b[j])


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _forward_rows64(u, b, a, start, stop, tanh):
    """As _forward_rows32, in float64."""
    m = u.shape[1]
    for i in range(start, stop):
        if tanh:
            for j in range(m):
                v = u[i, j] + b[j]
                a[i, j] = v * _half_one_plus_tanh(v)
        else:
            for j in range(m):
                a[i, j] = _gelu(u[i, j] + b[j])


def forward_rows(u, b, a, start, stop, tanh):
    """_forward_rows32 or _forward_rows64 by u's dtype: one name for kernels compiled for both
    (kernels/cpu/linear.py's GEMM region runs it on a share's rows after the share's product)."""
    (_forward_rows32 if u.dtype == np.float32 else _forward_rows64)(u, b, a, start, stop, tanh)


@overload(forward_rows, inline="always", jit_options={"cache": True})
def _forward_rows_compiled(u, b, a, start, stop, tanh):
    rows = _forward_rows32 if u.dtype == types.float32 else _forward_rows64
    return lambda u, b, a, start, stop, tanh: rows(u, b, a, start, stop, tanh)


@njit(error_model="numpy", parallel=True, cache=True)
def _forward(u, b, a, nchunks, tanh):
    n = u.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        forward_rows(u, b, a, start, stop, tanh)


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _backward_rows32(u, b, g, du, start, stop, block, tanh):
    """Rows start..stop of dU = g * gelu'(u + b) into du, their column sums added to ``block``.
    du apart from g: over one array for both, LLVM's runtime alias check sends the loop to its
    scalar version (3x slower)."""
    m = u.shape[1]
    if tanh:        # the choice outside the row loop: inside it, the loop ran 10% slower
        for i in range(start, stop):
            for j in range(m):
                d = g[i, j] * dgelu_tanh32(u[i, j] + b[j])
                du[i, j] = d
                block[j] += d
    else:
        for i in range(start, stop):
            for j in range(m):
                d = g[i, j] * _dgelu32(u[i, j] + b[j])
                du[i, j] = d
                block[j] += d


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _backward_rows64(u, b, g, du, start, stop, block, tanh):
    """As _backward_rows32, in float64."""
    m = u.shape[1]
    if tanh:
        for i in range(start, stop):
            for j in range(m):
                v = u[i, j] + b[j]
                s = _half_one_plus_tanh(v)             # s = (1 + t) / 2, so 1 - t**2 = 4 s (1 - s)
                d = g[i, j] * (s + 2.0 * v * s * (1.0 - s) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * v * v))
                du[i, j] = d
                block[j] += d
    else:
        for i in range(start, stop):
            for j in range(m):
                d = g[i, j] * _dgelu(u[i, j] + b[j])
                du[i, j] = d
                block[j] += d


def backward_rows(u, b, g, du, start, stop, block, tanh):
    """_backward_rows32 or _backward_rows64 by u's dtype (as forward_rows): kernels/cpu/linear.py
    runs it on the rows of a product that are still in cache."""
    (_backward_rows32 if u.dtype == np.float32 else _backward_rows64)(u, b, g, du, start, stop, block, tanh)


@overload(backward_rows, inline="always", jit_options={"cache": True})
def _backward_rows_compiled(u, b, g, du, start, stop, block, tanh):
    rows = _backward_rows32 if u.dtype == types.float32 else _backward_rows64
    return lambda u, b, g, du, start, stop, block, tanh: rows(u, b, g, du, start, stop, block, tanh)


@njit(error_model="numpy", parallel=True, cache=True)
def _backward(u, b, g, du, db_part, tanh):
    n, m = u.shape
    nchunks = db_part.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        block = np.zeros(m, u.dtype)
        for r in range(start, stop, FLUSH_ROWS):
            backward_rows(u, b, g, du, r, min(r + FLUSH_ROWS, stop), block, tanh)
            flush(db_part, c, block)


def _chunks(u):
    """(work for threads_for, chunks): all threads when the layer kernels run in parallel, else one."""
    if u.shape[0] == 0:
        return 0, 0
    if layer_parallel(u.size):
        return u.size, max(1, min(u.shape[0], numba.get_num_threads()))
    return 0, 1


def _bias(b, m, dtype):
    return np.zeros(m, dtype) if b is None else np.ascontiguousarray(b, dtype=dtype)


def bias_gelu_forward(u, b, approximate):
    """gelu(u + b) for the float32/float64 (M, out) GEMM result u; b (out,) or None."""
    if u.dtype not in (np.float32, np.float64):       # float16 and others: the reference's arithmetic
        from ...ops.linear_gelu import bias_gelu_forward_reference
        return bias_gelu_forward_reference(u, b, approximate)
    u = np.ascontiguousarray(u)
    a = np.empty_like(u)
    work, nchunks = _chunks(u)
    if nchunks:
        with threads_for(work):
            _forward(u, _bias(b, u.shape[1], u.dtype), a, nchunks, approximate == "tanh")
    return a


def bias_gelu_backward(u, b, g, approximate, need_db=True):
    """(dU, db): dU = g * gelu'(u + b), db its float64 sum over rows (None if not needed)."""
    if u.dtype not in (np.float32, np.float64) or g.dtype != u.dtype:
        from ...ops.linear_gelu import bias_gelu_backward_reference
        return bias_gelu_backward_reference(u, b, g, approximate, need_db)
    u, g = np.ascontiguousarray(u), np.ascontiguousarray(g)
    du = np.empty_like(u)
    work, nchunks = _chunks(u)
    part = np.zeros((nchunks, u.shape[1]))
    if nchunks:
        with threads_for(work):
            _backward(u, _bias(b, u.shape[1], u.dtype), g, du, part, approximate == "tanh")
    if not need_db:
        return du, None
    db = np.empty(u.shape[1])
    sum_partials(part, db)
    return du, db
