"""Softmax over the last axis of a matrix of rows, in place, forward and backward (Numba).

Used by attention on scores that BLAS computed (see minidl.ops.attention, "fused-softmax"):
NumPy's softmax makes six passes over the scores (max, subtract, exp, sum, divide, and the
causal mask before), these make one per row, with the row in L1:

    forward   p_j = exp(c (s_j - m)) / sum_k exp(c (s_k - m)),  m = max_k s_k   (over j < jmax)
    backward  ds_j = c p_j (dp_j - sum_k dp_k p_k)       (the softmax Jacobian, times c)

i.e. the softmax of c * s and its gradient with respect to s, for a scale c > 0
(c (s_j - m) = c s_j - max_k c s_k). Attention passes its 1/sqrt(d) here, so that neither q
nor the gradients of q and k need a separate scaling pass.

With ``causal``, row r (query position i = r mod L) keeps only j <= i, as np.tril, and
its other entries are set to 0: the mask is applied here instead of as a -inf pass before.
A row whose entries are all -inf (fully masked by the caller) becomes all 0, so it passes
no gradient. float32 rows use the vectorisable exp32 (see _fastexp).
"""
import numpy as np
from numba import njit, prange

from ._fastexp import exp_any
from ._numerics import row_max
from ._threads import chunk_bounds, launch, num_chunks

# reassociation lets the row max and sums vectorise; no "nnan"/"ninf": masks are -inf
_FM = {"reassoc", "contract"}


@njit(error_model="numpy", cache=True, fastmath=_FM, nogil=True)
def _forward_rows(s, L, causal, scale, r0, r1):
    S = s.shape[1]
    zero = s.dtype.type(0)
    for r in range(r0, r1):
        jmax = min(r % L + 1, S) if causal else S
        m = row_max(s, r, jmax)
        if m == -np.inf:            # every entry it keeps is masked: the row passes nothing
            for j in range(S):
                s[r, j] = zero
            continue
        z = zero
        for j in range(jmax):
            e = exp_any((s[r, j] - m) * scale)
            s[r, j] = e
            z += e
        inv = s.dtype.type(1) / z
        for j in range(jmax):
            s[r, j] *= inv
    if causal:
        # the entries past the diagonal, in a pass of their own: zeroed in the row loop, after
        # each row's scaling, they took 1.9 us more per 64 x 64 block, here 0.8 (performance.md)
        for r in range(r0, r1):
            for j in range(min(r % L + 1, S), S):
                s[r, j] = zero


@njit(error_model="numpy", cache=True, fastmath=_FM, nogil=True)
def _backward_rows(dp, p, scale, r0, r1):
    S = p.shape[1]
    for r in range(r0, r1):
        d = p.dtype.type(0)
        for j in range(S):
            d += dp[r, j] * p[r, j]
        for j in range(S):
            dp[r, j] = p[r, j] * (dp[r, j] - d) * scale


@njit(error_model="numpy", parallel=True, cache=True)
def _forward(s, L, causal, scale, nchunks):
    for c in prange(nchunks):
        r0, r1 = chunk_bounds(s.shape[0], nchunks, c)
        _forward_rows(s, L, causal, scale, r0, r1)


@njit(error_model="numpy", parallel=True, cache=True)
def _backward(dp, p, scale, nchunks):
    for c in prange(nchunks):
        r0, r1 = chunk_bounds(p.shape[0], nchunks, c)
        _backward_rows(dp, p, scale, r0, r1)


def softmax_rows_(s, causal=False, scale=1.0, serial=False):
    """s (..., L, S), float32/float64: softmax of each row of scale * s, in place (see above);
    scale > 0. Nothing to do without elements (a row of no entries has no max). The kernel walks
    C-ordered rows: any other layout is worked on in a C-ordered copy, written back.
    ``serial``: on the calling thread only, which it leaves to other Python threads meanwhile
    (attention's shares of heads run it concurrently)."""
    scale = _positive(scale)
    if s.size == 0:
        return s
    if not s.flags.c_contiguous:
        s[...] = softmax_rows_(np.ascontiguousarray(s), causal, scale, serial)
        return s
    L, S = s.shape[-2:]
    rows = s.reshape(-1, S)
    if serial:
        _forward_rows(rows, L, bool(causal), s.dtype.type(scale), 0, rows.shape[0])
    else:
        launch(_forward, rows.size, rows, L, bool(causal), s.dtype.type(scale),
               num_chunks(rows.shape[0], rows.size))
    return s


def softmax_backward_(dp, p, scale=1.0, serial=False):
    """dp <- scale * p * (dp - rowsum(dp * p)) in place, the gradient with respect to s of
    p = softmax(scale * s); both (..., S), same shape and dtype (other layouts than C order as
    above; ``serial`` as above)."""
    scale = _positive(scale)
    if p.size == 0:
        return dp
    if dp.shape != p.shape:
        raise ValueError(f"softmax_backward_: dp and p must have the same shape, got {dp.shape} and {p.shape}")
    if not dp.flags.c_contiguous:
        dp[...] = softmax_backward_(np.ascontiguousarray(dp), p, scale, serial)
        return dp
    p = np.ascontiguousarray(p)
    S = p.shape[-1]
    rows, prow = dp.reshape(-1, S), p.reshape(-1, S)
    if serial:
        _backward_rows(rows, prow, p.dtype.type(scale), 0, rows.shape[0])
    else:
        launch(_backward, rows.size, rows, prow, p.dtype.type(scale), num_chunks(rows.shape[0], rows.size))
    return dp


def _positive(scale):
    if not scale > 0:
        raise ValueError(f"softmax kernels: the scale must be > 0 (the row max is taken before scaling), got {scale}")
    return scale
