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
from numba import njit, prange

from ._numerics import CONTRACT, FLUSH_ROWS, flush, summed_partials
from ._threads import chunk_bounds, layer_parallel, threads_for
from .gelu import dgelu_any, dgelu_tanh_any, gelu_any, gelu_tanh_any


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def forward_rows(u, b, a, start, stop, tanh):
    """Rows start..stop of a = gelu(u + b) (kernels/cpu/linear.py's GEMM region runs it on a
    share's rows after the share's product)."""
    m = u.shape[1]
    for i in range(start, stop):
        if tanh:
            for j in range(m):
                a[i, j] = gelu_tanh_any(u[i, j] + b[j])
        else:
            for j in range(m):
                a[i, j] = gelu_any(u[i, j] + b[j])


@njit(error_model="numpy", parallel=True, cache=True)
def _forward(u, b, a, nchunks, tanh):
    n = u.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        forward_rows(u, b, a, start, stop, tanh)


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def backward_rows(u, b, g, du, start, stop, block, tanh):
    """Rows start..stop of dU = g * gelu'(u + b) into du, their column sums added to ``block``
    (kernels/cpu/linear.py's MLP region runs it on the rows of a product still in cache). du apart
    from g: over one array for both, LLVM's runtime alias check sends the loop to its scalar
    version (3x slower)."""
    m = u.shape[1]
    if tanh:        # the choice outside the row loop: inside it, the loop ran 10% slower
        for i in range(start, stop):
            for j in range(m):
                d = g[i, j] * dgelu_tanh_any(u[i, j] + b[j])
                du[i, j] = d
                block[j] += d
    else:
        for i in range(start, stop):
            for j in range(m):
                d = g[i, j] * dgelu_any(u[i, j] + b[j])
                du[i, j] = d
                block[j] += d


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
    return du, summed_partials(part)
