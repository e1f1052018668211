"""A Linear layer's GEMMs and their epilogues as one parallel region (minidl/ops/linear.py and
ops/linear_gelu.py have the math and the NumPy references).

With X the (M, in) rows of the input, W (out, in), G = dL/dY (M, out), and k shares (one per
thread of Numba's pool):

    forward   rows r of share s:      Y[r] = X[r] W^T        BLAS, on the share's own thread,
                                      Y[r] += b              then the bias (or b and GELU) on
                                      A[r] = gelu(Y[r] + b)  the rows that are still in cache
    backward  rows r of share s:      db_s = sum_r G[r]      float64 partials, added after
                                      dX[r] = G[r] W         BLAS, as above
              features f of share s:  dW[f] = G[:, f]^T X    BLAS, as above
    MLP's fc2 (ops/mlp.py), rows r:   dU[r] = (G[r] W) * gelu'(U1[r] + b1)   BLAS into the
                                      thread's scratch, 64 rows at a time, GELU's backward from it

Why: NumPy's matmul runs its GEMM on OpenBLAS's own thread pool, and the bias (or GELU) pass
that follows on Numba's. On 2 cores the two pools hand the cores to each other at every op,
and the epilogue reads the GEMM's output back from memory. Here each thread of Numba's pool
runs a single-threaded BLAS call on its share and its share's epilogue at once, with no other
pool woken (the measurements: docs/performance.md, "Linear's GEMMs in one region"). Each share
writes disjoint rows of Y, dX or dW and its own db partial, so nothing is shared but the
read-only operands, and the result does not depend on which thread ran which share.

Only where ``_cblas`` found a BLAS to call (NumPy's OpenBLAS, or MKL: its ``PROVIDER``) and
the products are large enough for two threads (``_threads.layer_parallel``). Elsewhere (another
BLAS, float16, non-contiguous operands, one thread, a block worker's thread) the functions below
run NumPy's matmul and the chunked bias and GELU kernels, the results being the same up to the
GEMMs' summation order. The caller's BLAS
must run each call on its caller's thread: the entry points hold
``_cblas.one_thread_per_call``. Every shape is checked before a kernel runs:
the kernels index without bounds checks.

There is no cuda module: on a GPU the reference's matmul is the device's GEMM over every row at
once, and its bias and GELU the device's elementwise kernels.
"""
import numba
import numpy as np
from numba import njit, prange

from . import _cblas
from ._numerics import FLUSH_ROWS, flush, summed_partials
from ._threads import chunk_bounds, layer_parallel
from .bias import bias_add, bias_grad, sum_rows_into
from .bias_gelu import backward_rows, bias_gelu_forward, forward_rows
from .bias_gelu import bias_gelu_backward as _bias_gelu_backward

_N, _T = _cblas.NO_TRANS, _cblas.TRANS
EPILOGUE_NONE, EPILOGUE_BIAS, EPILOGUE_GELU, EPILOGUE_GELU_TANH = 0, 1, 2, 3
BLOCK_ROWS = 64   # rows per product in _gelu_backward_shares (measured: docs/performance.md, "The MLP as one op")


@njit(error_model="numpy", cache=True, parallel=True)
def _forward_shares(x, w, b, epilogue, u, a, k):
    """u = x w^T per share of rows; then u += b (EPILOGUE_BIAS) or a = gelu(u + b) (GELU)."""
    M, K = x.shape
    N = w.shape[0]
    for s in prange(k):
        r0, r1 = chunk_bounds(M, k, s)
        _cblas.gemm(_N, _T, r1 - r0, N, K, 1.0, x[r0:], K, w, K, 0.0, u[r0:], N)
        if epilogue == EPILOGUE_BIAS:
            for i in range(r0, r1):
                for j in range(N):
                    u[i, j] += b[j]
        elif epilogue >= EPILOGUE_GELU:
            forward_rows(u, b, a, r0, r1, epilogue == EPILOGUE_GELU_TANH)


@njit(error_model="numpy", cache=True, parallel=True)
def _backward_shares(g, x, w, dx, want_dx, dw, want_dw, db_part, want_db, k):
    """Per share of rows: dx = g w and its rows' db partial; per share of output features:
    dw = g^T x."""
    M, N = g.shape
    K = x.shape[1] if want_dw else w.shape[1]
    if want_dx or want_db:
        for s in prange(k):
            r0, r1 = chunk_bounds(M, k, s)
            if want_dx:
                _cblas.gemm(_N, _N, r1 - r0, K, N, 1.0, g[r0:], N, w, K, 0.0, dx[r0:], K)
            if want_db:                 # the rows the GEMM just read
                sum_rows_into(g, db_part, s, r0, r1)
    if want_dw:
        for s in prange(k):
            f0, f1 = chunk_bounds(N, k, s)
            _cblas.gemm(_T, _N, f1 - f0, K, M, 1.0, g[:, f0:], N, x, K, 0.0, dw[f0:], K)


@njit(error_model="numpy", cache=True, parallel=True)
def _gelu_backward_shares(g, a, w, u, b, du, dw, want_dw, db_part, want_db, dub_part, k, tanh):
    """The backward of y = a w^T (+ b2) with a = gelu(u + b) (ops/mlp.py): per share of rows,
    (g w) * gelu'(u + b) a block of BLOCK_ROWS rows at a time, the block's product written to the
    thread's scratch (in L2) and read back from it by GELU's backward, which writes dU, with dU's
    and g's row-sum partials; per share of output features, dw = g^T a. (GELU's backward in place
    over the product ran 3x slower: LLVM's vector loop needs its load and store arrays apart.)"""
    M, N = g.shape
    F = w.shape[1]
    for s in prange(k):
        r0, r1 = chunk_bounds(M, k, s)
        block = np.zeros(F, du.dtype)
        scratch = np.empty((BLOCK_ROWS, F), du.dtype)
        for q0 in range(r0, r1, BLOCK_ROWS):
            q1 = min(q0 + BLOCK_ROWS, r1)
            _cblas.gemm(_N, _N, q1 - q0, F, N, 1.0, g[q0:], N, w, F, 0.0, scratch, F)
            for f0 in range(q0, q1, FLUSH_ROWS):
                f1 = min(f0 + FLUSH_ROWS, q1)
                backward_rows(u[f0:f1], b, scratch[f0 - q0:f1 - q0], du[f0:f1], 0, f1 - f0, block, tanh)
                flush(dub_part, s, block)
        if want_db:
            sum_rows_into(g, db_part, s, r0, r1)
    if want_dw:
        for s in prange(k):
            f0, f1 = chunk_bounds(N, k, s)
            _cblas.gemm(_T, _N, f1 - f0, F, M, 1.0, g[:, f0:], N, a, F, 0.0, dw[f0:], F)


def _shares(m, n, *arrays):
    """How many shares the region runs (0: NumPy's matmul instead; see the module docstring). No
    operand may be empty: with no input features BLAS refuses the leading dimension 0 and leaves
    the output unwritten, where NumPy's matmul gives zeros."""
    if not _cblas.AVAILABLE or m == 0 or n == 0 or any(a.size == 0 for a in arrays):
        return 0
    dtype = arrays[0].dtype
    if dtype not in (np.float32, np.float64) or any(a.dtype != dtype or a.ndim != 2 or not a.flags.c_contiguous
                                                     for a in arrays):
        return 0
    from ...runtime import block_workers
    threads = numba.get_num_threads()
    if threads < 2 or not layer_parallel(m * n) or block_workers.in_worker() or not block_workers.available():
        return 0
    return min(threads, m, n)


def _check(x, w, b):
    if x.ndim != 2 or w.ndim != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"linear kernel: expected x (M, in) and w (out, in) with the same in, got {x.shape} and "
                         f"{w.shape}")
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ValueError(f"linear kernel: expected a bias of shape ({w.shape[0]},), got {tuple(b.shape)}")


def _check_backward(g, x, w):
    M, N = g.shape
    if (w is not None and (w.ndim != 2 or w.shape[0] != N)) or (x is not None and (x.ndim != 2 or x.shape[0] != M)):
        raise ValueError(f"linear kernel: output gradient {g.shape} does not match x {None if x is None else x.shape}"
                         f" and w {None if w is None else w.shape}")


def _run_forward(x, w, b, epilogue, k):
    u = np.empty((x.shape[0], w.shape[0]), x.dtype)
    a = np.empty_like(u) if epilogue >= EPILOGUE_GELU else np.empty((0, 0), x.dtype)
    bb = np.zeros(w.shape[0], x.dtype) if b is None else np.ascontiguousarray(b, dtype=x.dtype)
    with _cblas.one_thread_per_call():
        _forward_shares(x, w, bb, epilogue, u, a, k)
    return u, a


def linear_forward(x, w, b):
    """Y = x w^T (+ b) for x (M, in), w (out, in), b (out,) or None."""
    _check(x, w, b)
    k = _shares(x.shape[0], w.shape[0], x, w)
    if not k:
        y = np.matmul(x, w.T)
        return y if b is None else bias_add(y, b)
    return _run_forward(x, w, b, EPILOGUE_NONE if b is None else EPILOGUE_BIAS, k)[0]


def linear_gelu_forward(x, w, b, approximate):
    """(a, U): U = x w^T and a = gelu(U + b), as ops/linear_gelu.py's reference."""
    _check(x, w, b)
    k = _shares(x.shape[0], w.shape[0], x, w)
    if not k:
        u = np.matmul(x, w.T)
        return bias_gelu_forward(u, b, approximate), u
    u, a = _run_forward(x, w, b, EPILOGUE_GELU_TANH if approximate == "tanh" else EPILOGUE_GELU, k)
    return a, u


def linear_backward(g, x, w, need_db):
    """(dX, dW, db) for the output gradient g (M, out): dX = g w if w is given, dW = g^T x if x
    is given, db = sum_rows g if need_db (else None each)."""
    M, N = g.shape
    _check_backward(g, x, w)
    k = _shares(M, N, g, *(a for a in (x, w) if a is not None))
    if not k:
        return (None if w is None else np.matmul(g, w), None if x is None else np.matmul(g.T, x),
                bias_grad(g) if need_db else None)
    none = np.empty((0, 0), g.dtype)
    dx = none if w is None else np.empty((M, w.shape[1]), g.dtype)
    dw = none if x is None else np.empty((N, x.shape[1]), g.dtype)
    part = np.empty((k, N) if need_db else (0, 0))
    with _cblas.one_thread_per_call():
        _backward_shares(g, none if x is None else x, none if w is None else w, dx, w is not None, dw,
                         x is not None, part, need_db, k)
    return (None if w is None else dx, None if x is None else dw,
            summed_partials(part).astype(g.dtype) if need_db else None)


def linear_gelu_backward(g, u, b, x, w, approximate, need_db):
    """(dX, dW, db) of a = gelu(U + b), U = x w^T, for the output gradient g (M, out): dU =
    g * gelu'(U + b), then dX = dU w if w is given, dW = dU^T x if x is given; db = sum_rows dU
    in float64 if need_db (else None each), as ops/linear_gelu.py's reference."""
    M, N = g.shape
    if u.shape != g.shape or (b is not None and tuple(b.shape) != (N,)):
        raise ValueError(f"linear kernel: output gradient {g.shape} does not match the product {u.shape} and the "
                         f"bias {None if b is None else tuple(b.shape)}")
    _check_backward(g, x, w)
    du, db = _bias_gelu_backward(u, b, g, approximate, need_db)   # its own pass: fused into the region's
    dx, dw, _ = linear_backward(du, x, w, False)                  # row shares, steps ran no faster
    return dx, dw, db


def gelu_linear_backward(g, a, w, u, b, approximate, need_dw, need_db, need_dub):
    """(dU, dW, db, dub) of y = a w^T (+ db's bias) with a = gelu(U + b) for the output gradient
    g (M, out): dU = (g w) * gelu'(U + b), dW = g^T a if need_dw, db = sum_rows g if need_db, dub
    = sum_rows dU if need_dub (float64; else None each), as ops/mlp.py's reference. a (M, hidden)
    may be None without need_dw; b (hidden,) or None."""
    M, N = g.shape
    F = w.shape[1] if w.ndim == 2 else -1
    if (w.ndim != 2 or w.shape[0] != N or u.shape != (M, F) or (b is not None and tuple(b.shape) != (F,))
            or (need_dw and (a is None or a.shape != u.shape))):
        raise ValueError(f"linear kernel: output gradient {g.shape}, weight {w.shape}, product {u.shape}, bias "
                         f"{None if b is None else tuple(b.shape)} and input {None if a is None else a.shape} "
                         "do not match")
    k = _shares(M, F, g, w, u, *((a,) if need_dw else ()))
    if not k:
        dh, dw, db = linear_backward(g, a if need_dw else None, w, need_db)
        du, dub = _bias_gelu_backward(u, b, dh, approximate, need_dub)
        return du, dw, db, dub
    none = np.empty((0, 0), g.dtype)
    du = np.empty((M, F), g.dtype)
    dw = np.empty((N, F), g.dtype) if need_dw else none
    part, dub_part = np.empty((k, N) if need_db else (0, 0)), np.zeros((k, F))
    bb = np.zeros(F, g.dtype) if b is None else np.ascontiguousarray(b, dtype=g.dtype)
    with _cblas.one_thread_per_call():
        _gelu_backward_shares(g, a if need_dw else none, w, u, bb, du, dw, need_dw, part, need_db, dub_part, k,
                              approximate == "tanh")
    return (du, dw if need_dw else None, summed_partials(part).astype(g.dtype) if need_db else None,
            summed_partials(dub_part) if need_dub else None)
