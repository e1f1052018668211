"""Attention's "fused-softmax" path as one parallel region over (batch, head) pairs
(minidl/ops/attention.py has the math and the NumPy reference; this is how it runs fast).

For each pair (b, h), with Q (L, E), K (S, E), V (S, Ev) and G = dL/dO (L, Ev) its matrices,
c the scale and D the dropout multiplier (or none):

    forward    P  = Q K^T                      BLAS, into the pair's slice of P (B, H, L, S)
               P  = softmax(c P), causal       the softmax row kernel, the slice still in cache
               Pd = P * D
               O  = Pd V                       BLAS, into O's rows (any row stride)
    backward   dV = Pd^T G                     BLAS
               dP = (G V^T) * D                BLAS, into the thread's own (L, S) scratch
               dS = c P (dP - rowsum(dP P))    the softmax backward row kernel
               dQ = dS K,  dK = dS^T Q          BLAS

Why: a GPT's pairs are small (64 x 32 by 32 x 64), so NumPy's batched matmul runs them one
after another on one thread, and between its products and the softmax passes the scores go
back to memory. Here each thread of Numba's pool takes a share of the pairs and runs a pair's
products (single-threaded BLAS calls from ``_cblas``) and its softmax back to back, the
pair's scores in L2. Q, K, V, G and the outputs are read and written where they are, with
their row strides as BLAS's leading dimensions: the heads of a packed projection
(``ops/heads.py``) need no copy in or out (the measurements: docs/performance.md, "Attention
in one region").

``fits`` says where the region runs: a BLAS found by ``_cblas``, float32/float64 operands of
4 dims (or 3, the batch axis added) with the same batch dims, each row's elements adjacent,
at least one feature, and not on a block worker's thread. Elsewhere the op keeps its other
paths. The kernels index without bounds checks: the entry points check every shape
first (``_check``). There is no cuda module: on a GPU the reference runs, its batched matmuls the
device's.
"""
import numba
import numpy as np
from numba import njit, prange

from . import _cblas
from ._threads import chunk_bounds, layer_parallel
from .softmax import _backward_rows, _forward_rows

_N, _T = _cblas.NO_TRANS, _cblas.TRANS


@njit(error_model="numpy", cache=True)
def _ld(a):
    """The leading dimension (row stride in elements) of a's (rows, cols) matrices."""
    return a.strides[2] // a.itemsize


@njit(error_model="numpy", cache=True, parallel=True)
def _forward_pairs(q, k, v, drop, causal, scale, p, pd, o, shares):
    B, H, L, E = q.shape
    S, Ev = k.shape[2], v.shape[3]
    dropout = drop.shape[0] > 0
    for share in prange(shares):
        i0, i1 = chunk_bounds(B * H, shares, share)
        for i in range(i0, i1):
            b, h = i // H, i % H
            pbh = p[b, h]
            _cblas.gemm(_N, _T, L, S, E, 1.0, q[b, h], _ld(q), k[b, h], _ld(k), 0.0, pbh, S)
            _forward_rows(pbh, L, causal, scale, 0, L)
            if dropout:
                for r in range(L):
                    for j in range(S):
                        pd[b, h, r, j] = pbh[r, j] * drop[b, h, r, j]
                pbh = pd[b, h]
            _cblas.gemm(_N, _N, L, Ev, S, 1.0, pbh, S, v[b, h], _ld(v), 0.0, o[b, h], _ld(o))


@njit(error_model="numpy", cache=True, parallel=True)
def _backward_pairs(q, k, v, p, pd, drop, g, scale, dq, dk, dv, shares):
    B, H, L, E = q.shape
    S, Ev = k.shape[2], v.shape[3]
    dropout = drop.shape[0] > 0
    for share in prange(shares):
        i0, i1 = chunk_bounds(B * H, shares, share)
        dp = np.empty((L, S), q.dtype)
        for i in range(i0, i1):
            b, h = i // H, i % H
            _cblas.gemm(_T, _N, S, Ev, L, 1.0, pd[b, h], S, g[b, h], _ld(g), 0.0, dv[b, h], _ld(dv))
            _cblas.gemm(_N, _T, L, S, Ev, 1.0, g[b, h], _ld(g), v[b, h], _ld(v), 0.0, dp, S)
            if dropout:
                for r in range(L):
                    for j in range(S):
                        dp[r, j] *= drop[b, h, r, j]
            _backward_rows(dp, p[b, h], scale, 0, L)
            _cblas.gemm(_N, _N, L, E, S, 1.0, dp, S, k[b, h], _ld(k), 0.0, dq[b, h], _ld(dq))
            _cblas.gemm(_T, _N, S, E, L, 1.0, dp, S, q[b, h], _ld(q), 0.0, dk[b, h], _ld(dk))


def fits(q, k, v):
    """Can the region run attention on q (..., L, E), k (..., S, E), v (..., S, Ev) (the module
    docstring's conditions; masks and the scale are the caller's to check)?"""
    if not _cblas.AVAILABLE or q.dtype not in (np.float32, np.float64):
        return False
    if any(type(a) is not np.ndarray or a.dtype != q.dtype or a.ndim not in (3, 4) or a.ndim != q.ndim
           for a in (k, v)) or type(q) is not np.ndarray or q.ndim not in (3, 4):
        return False
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2] or 0 in q.shape or 0 in k.shape or 0 in v.shape:
        return False
    from ...runtime import block_workers
    return not block_workers.in_worker()


def _check(q, k, v):
    """The shapes the kernels index by, checked before they run: q (..., L, E), k (..., S, E) and
    v (..., S, Ev) of 3 or 4 dims, one batch shape, one dtype, no empty dimension (the op answers
    empty inputs without the kernels)."""
    if not (q.ndim == k.ndim == v.ndim and q.ndim in (3, 4) and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
            and k.shape[-1] == q.shape[-1] and v.shape[-2] == k.shape[-2] and q.dtype == k.dtype == v.dtype
            and 0 not in q.shape + k.shape + v.shape):
        raise ValueError(f"attention kernel: expected q (..., L, E), k (..., S, E), v (..., S, Ev) of 3 or 4 dims with "
                         f"one batch shape and dtype and no empty dimension, got q {q.shape} {q.dtype}, k {k.shape} "
                         f"{k.dtype}, v {v.shape} {v.dtype}")


def _layout_ok(a):
    """Has a (..., rows, cols) a unit column stride and a row stride BLAS accepts (>= cols)?"""
    rows, cols = a.shape[-2:]
    size = a.itemsize
    return a.strides[-1] == size and (rows == 1 or (a.strides[-2] % size == 0 and a.strides[-2] >= cols * size))


def _pairs(a):
    """a as (B, H, rows, cols) in a layout BLAS takes: a view where a's layout allows it, else a
    C-ordered copy."""
    a = a if a.ndim == 4 else a[None]
    if not _layout_ok(a):
        return np.ascontiguousarray(a)
    rows, cols = a.shape[2:]
    if rows == 1 and a.strides[2] != cols * a.itemsize:   # a single row's stride is NumPy's to choose
        a = np.lib.stride_tricks.as_strided(a, strides=a.strides[:2] + (cols * a.itemsize, a.itemsize))
    return a


def _shares(q, S):
    """How many shares of the (batch, head) pairs run at once: one per thread where the problem
    is large enough for the pool (``_threads.layer_parallel``), else 1."""
    pairs = q.shape[0] * q.shape[1]
    if numba.get_num_threads() < 2 or not layer_parallel(pairs * q.shape[2] * S):
        return 1
    return min(pairs, numba.get_num_threads())


def attention_heads_forward(q, k, v, causal, scale, drop):
    """(O, P, Pd) for q, k, v as ``fits`` accepts and ``drop`` the dropout multiplier (..., L, S)
    or None. P and Pd are C-ordered (..., L, S), Pd is P itself without dropout. For 4-D operands
    (B, H, L, E) O is the (B, H, L, Ev) view of a (B, L, H, Ev) array, as PyTorch's CPU flash
    attention lays it out: the usual next step, O.transpose(1, 2).reshape(B, L, H * Ev), is then
    free instead of a copy; for 3-D ones it is C-ordered."""
    _check(q, k, v)
    q4, k4, v4 = _pairs(q), _pairs(k), _pairs(v)
    (B, H, L, _), (S, Ev) = q4.shape, v4.shape[2:]
    o4 = np.empty((B, L, H, Ev), q.dtype).transpose(0, 2, 1, 3) if q.ndim == 4 else np.empty((1, H, L, Ev), q.dtype)
    p = np.empty((B, H, L, S), q.dtype)
    if drop is None:
        d4, pd = np.empty((0, 1, 1, 1), q.dtype), p
    else:
        if drop.shape != q.shape[:-1] + (S,):
            raise ValueError(f"attention kernel: expected a dropout multiplier of shape {q.shape[:-1] + (S,)}, got "
                             f"{drop.shape}")
        d4, pd = _pairs(np.ascontiguousarray(drop, dtype=q.dtype)), np.empty_like(p)
    with _cblas.one_thread_per_call():
        _forward_pairs(q4, k4, v4, d4, bool(causal), q.dtype.type(scale), p, pd, o4, _shares(q4, S))
    scores = q.shape[:-1] + (S,)
    p, pd = p.reshape(scores), pd.reshape(scores)
    return o4.reshape(q.shape[:-1] + (Ev,)), p, p if drop is None else pd


def attention_heads_backward(q, k, v, p, pd, drop, g, scale, out=None):
    """(dq, dk, dv) for the forward above, from g = dL/dO. ``out``, optional, holds three arrays
    to write them into (each shaped as its input); where one has a layout BLAS cannot write,
    all three are fresh instead."""
    _check(q, k, v)
    q4, k4, v4 = _pairs(q), _pairs(k), _pairs(v)
    S = k4.shape[2]
    if (g.shape != q.shape[:-1] + (v.shape[-1],) or p.shape != q.shape[:-1] + (S,) or pd.shape != p.shape
            or (drop is not None and drop.shape != p.shape)):
        raise ValueError(f"attention kernel: gradient {g.shape}, probabilities {p.shape} and dropout multiplier "
                         f"{None if drop is None else drop.shape} do not match q {q.shape}, k {k.shape} and v {v.shape}")
    if out is None or any(a.shape != b.shape or a.dtype != q.dtype or not _layout_ok(a) for a, b in zip(out, (q, k, v))):
        out = tuple(np.empty(a.shape, q.dtype) for a in (q, k, v))
    g4 = _pairs(g.astype(q.dtype, copy=False))
    d4 = np.empty((0, 1, 1, 1), q.dtype) if drop is None else _pairs(np.ascontiguousarray(drop, dtype=q.dtype))
    p4, pd4 = _pairs(np.ascontiguousarray(p)), _pairs(np.ascontiguousarray(pd))
    dq4, dk4, dv4 = (_pairs(a) for a in out)
    with _cblas.one_thread_per_call():
        _backward_pairs(q4, k4, v4, p4, pd4, d4, g4, q.dtype.type(scale), dq4, dk4, dv4, _shares(q4, S))
    return out
