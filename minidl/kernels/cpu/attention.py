"""Fused scaled-dot-product attention on the CPU (Numba), one query row at a time.

Same math as the NumPy reference in ``minidl.ops.attention`` (read that first), without
materialising the (L, S) score matrix: for query row i of head b

    s_j  = scale * q_i . k_j + bias_ij            (-inf where masked, j > i when causal)
    m    = max_j s_j,   lse_i = m + log sum_j exp(s_j - m)
    p_j  = exp(s_j - lse_i)                        (the softmax row)
    o_i  = sum_j p_j * drop_ij * v_j

Forward keeps only o and the row log-sum-exp ``lse`` (L floats per head instead of L*S).
Backward recomputes p_j = exp(s_j - lse_i) and uses the identity (FlashAttention's)

    rowsum(dP * P)_i = sum_j dP_ij P_ij = sum_j (dO_i . v_j) drop_ij P_ij = dO_i . o_i

so that dS_ij = P_ij (dP_ij - dO_i . o_i) needs no second pass over the row.

A fully masked row has m = -inf: its output is 0 and its lse is stored as +inf, so the
recomputed p_j = exp(-inf - inf) = 0 and the row passes no gradient (no NaN).

Layouts: q (BH, L, E), k (BH, S, E), v (BH, S, Ev), and the transposes kt (BH, E, S),
vt (BH, Ev, S) (so that a score row s_j = sum_e q_ie kt_ej is a contiguous, vectorisable
loop over j: each inner loop below runs over a contiguous axis without a reduction), all
C-contiguous; ``bias`` is
(nb, L, S) with nb in {0, 1, BH} (0: no bias; 1: shared by every head); ``drop`` is
(nd, L, S) with nd in {0, BH}: the dropout multiplier (0 or 1/(1-p)).
Forward is parallel over (head, block of query rows); backward over heads (each head's
dk, dv are written by one thread, so no atomics).
"""
import numpy as np
from numba import njit, prange

_BLOCK = 16  # query rows per parallel task in forward
# fast-math flags that allow vectorised sums but keep inf semantics (masks are -inf)
_FM = {"nsz", "arcp", "contract", "reassoc"}


@njit(error_model="numpy", parallel=True, cache=True, fastmath=_FM)
def attention_forward(q, kt, v, bias, drop, causal, scale):
    """Returns (o (BH, L, Ev), lse (BH, L)); see the module docstring."""
    BH, L, E = q.shape
    S = kt.shape[2]
    Ev = v.shape[2]
    nb = bias.shape[0]
    nd = drop.shape[0]
    o = np.zeros((BH, L, Ev), dtype=q.dtype)
    lse = np.empty((BH, L), dtype=q.dtype)
    nblocks = (L + _BLOCK - 1) // _BLOCK
    for task in prange(BH * nblocks):
        b = task // nblocks
        i0 = (task % nblocks) * _BLOCK
        i1 = min(i0 + _BLOCK, L)
        s = np.empty(S, dtype=q.dtype)
        bb = b if nb > 1 else b - b  # (b - b: same integer type as b)
        for i in range(i0, i1):
            jmax = min(i + 1, S) if causal else S
            _scores(q, kt, bias, b, bb, i, jmax, nb, scale, s)
            m = -np.inf
            for j in range(jmax):
                m = max(m, s[j])
            if m == -np.inf:  # every key masked: output stays 0, no gradient
                lse[b, i] = np.inf
                continue
            z = 0.0
            for j in range(jmax):
                s[j] = np.exp(s[j] - m)
                z += s[j]
            lse[b, i] = m + np.log(z)
            inv = 1.0 / z
            for j in range(jmax):
                s[j] = s[j] * inv  # stored back in q's dtype, so the loop over e stays in it
                p = s[j]
                if nd > 0:
                    p *= drop[b, i, j]
                if p != 0.0:
                    for e in range(Ev):
                        o[b, i, e] += p * v[b, j, e]
    return o, lse


@njit(error_model="numpy", cache=True, fastmath=_FM, inline="always")
def _scores(q, kt, bias, b, bb, i, jmax, nb, scale, s):
    """s[:jmax] = scale * q[b, i] . kt[b, :, j] (+ bias[bb, i, j])."""
    E = q.shape[2]
    for j in range(jmax):
        s[j] = 0.0
    for e in range(E):
        qe = q[b, i, e] * scale
        for j in range(jmax):
            s[j] += qe * kt[b, e, j]
    if nb > 0:
        for j in range(jmax):
            s[j] += bias[bb, i, j]


@njit(error_model="numpy", parallel=True, cache=True, fastmath=_FM)
def attention_backward(q, k, kt, v, vt, bias, drop, causal, scale, o, lse, do, want_dbias):
    """Returns (dq, dk, dv, dbias); dbias is (BH, L, S) (the dS of every head, to be summed
    down to the mask's shape by the caller) when ``want_dbias``, else an empty array."""
    BH, L, E = q.shape
    S = k.shape[1]
    Ev = v.shape[2]
    nb = bias.shape[0]
    nd = drop.shape[0]
    zero = np.zeros(1, dtype=q.dtype)[0]  # so that dS and the loops over e stay in q's dtype
    dq = np.zeros_like(q)
    dk = np.zeros_like(k)
    dv = np.zeros_like(v)
    dbias = np.zeros((BH if want_dbias else 0, L, S), dtype=q.dtype)
    for b in prange(BH):
        bb = b if nb > 1 else b - b
        s = np.empty(S, dtype=q.dtype)
        dp = np.empty(S, dtype=q.dtype)
        for i in range(L):
            li = lse[b, i]
            if li == np.inf:
                continue
            jmax = min(i + 1, S) if causal else S
            _scores(q, kt, bias, b, bb, i, jmax, nb, scale, s)
            di = zero
            for e in range(Ev):
                di += do[b, i, e] * o[b, i, e]
            for j in range(jmax):
                s[j] = np.exp(s[j] - li)        # P_ij
                dp[j] = 0.0
            for e in range(Ev):                 # dPd_ij = dO_i . v_j
                ge = do[b, i, e]
                for j in range(jmax):
                    dp[j] += ge * vt[b, e, j]
            for j in range(jmax):
                pd = s[j]
                if nd > 0:
                    pd *= drop[b, i, j]
                    dp[j] *= drop[b, i, j]
                if pd != 0.0:
                    for e in range(Ev):
                        dv[b, j, e] += pd * do[b, i, e]
                ds = s[j] * (dp[j] - di)        # dS_ij = P_ij (dP_ij - dO_i . o_i)
                if want_dbias:
                    dbias[b, i, j] = ds
                ds *= scale
                if ds != 0.0:
                    for e in range(E):
                        dq[b, i, e] += ds * k[b, j, e]
                        dk[b, j, e] += ds * q[b, i, e]
    return dq, dk, dv, dbias
