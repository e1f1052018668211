"""Numba kernels for a Linear layer's bias (minidl/ops/linear.py, where the math is): y += b over
the rows of the GEMM's result y (M, out), and db = sum_rows g.

NumPy does both on one thread (``y += b``, ``g.sum(axis=0)``), each a pass over an (M, out)
array that the GEMM around it ran on every core; here the rows are split into one chunk per
thread. Each chunk of the bias gradient sums its rows into a block in g's dtype, flushed every
FLUSH_ROWS rows into its float64 partial (see _numerics.flush), and the partials are added at
the end: no atomics, nothing of size (M, out). Below the layer kernels' parallel threshold
(``_threads.layer_parallel``, so the kernels always run on the whole pool), for other dtypes and
for arrays that are not C-contiguous, the NumPy reference runs: there is nothing a one-thread
kernel would do better.

There is no cuda module: on a GPU the reference's ``y += b`` and ``g.sum(axis=0)`` are already
the device's elementwise and reduction kernels over every row at once.
"""
import numba
import numpy as np
from numba import njit, prange

from ._numerics import FLUSH_ROWS, flush, summed_partials
from ._threads import chunk_bounds, layer_parallel


@njit(error_model="numpy", parallel=True, cache=True)
def _add(y, b, nchunks):
    n, m = y.shape
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        for i in range(start, stop):
            for j in range(m):
                y[i, j] += b[j]


@njit(error_model="numpy", parallel=True, cache=True)
def _row_sums(g, part):
    n = g.shape[0]
    nchunks = part.shape[0]
    for c in prange(nchunks):
        start, stop = chunk_bounds(n, nchunks, c)
        sum_rows_into(g, part, c, start, stop)


@njit(error_model="numpy", cache=True)
def sum_rows_into(g, part, c, start, stop):
    """part[c] = the sum of g's rows start..stop: blocks of FLUSH_ROWS rows summed in g's dtype,
    each flushed into the float64 partial (kernels/cpu/linear.py sums its row shares with it)."""
    m = g.shape[1]
    block = np.zeros(m, g.dtype)
    for j in range(m):
        part[c, j] = 0.0
    for i in range(start, stop):
        for j in range(m):
            block[j] += g[i, j]
        if (i - start + 1) % FLUSH_ROWS == 0 or i == stop - 1:
            flush(part, c, block)


def _kernel_takes(a):
    return (a.ndim == 2 and a.dtype in (np.float32, np.float64) and a.flags.c_contiguous
            and a.shape[0] > 0 and layer_parallel(a.size))


def _chunks(a):
    return max(1, min(a.shape[0], numba.get_num_threads()))


def bias_add(y, b):
    """y += b for the (M, out) GEMM result y and the bias b (out,), in place; returns y."""
    if not _kernel_takes(y):
        from ...ops.linear import bias_add_reference
        return bias_add_reference(y, b)
    if tuple(b.shape) != (y.shape[1],):     # the kernel reads b[j] for every column j
        raise ValueError(f"bias_add: expected a bias of shape ({y.shape[1]},) for a result of shape {y.shape}, "
                         f"got one of shape {tuple(b.shape)}")
    _add(y, np.ascontiguousarray(b, dtype=y.dtype), _chunks(y))
    return y


def bias_grad(g):
    """dL/db = sum_rows g for the (M, out) output gradient g, in g's dtype (float64 partials)."""
    if not _kernel_takes(g):
        from ...ops.linear import bias_grad_reference
        return bias_grad_reference(g)
    part = np.empty((_chunks(g), g.shape[1]))
    _row_sums(g, part)
    return summed_partials(part).astype(g.dtype)
