"""Inner loops of the channel norms (BatchNorm, InstanceNorm, GroupNorm) over one row of a 2-D array.

The parallel kernels loop (prange) over rows, channels or chunks and call these for each
contiguous run of data. As in ``_row_norm``, a helper takes ``(array, i)`` rather than a row
view: slicing inside prange costs an atomic reference-count update per view, shared between
threads.

Storage and compute types. An activation reaches these helpers as it is stored: float32 or
float64, or a float16/bfloat16 tensor through its 2-byte integer view (``_half.storage``).
Every element read goes through ``widen`` and every element written through ``narrow``, so
a 2-byte activation is converted in registers, element by element, and never copied to
float32; the arithmetic runs in the *compute type* (``_half.compute_type``): float32 for the
2-byte formats, the dtype itself otherwise (where widen and narrow compile to nothing, so the
float32 and float64 machine code is what it would be without them). "x's dtype" below means
x's compute type.

Precision and speed. The arithmetic runs in the data's own compute type (8 float32 lanes per
AVX2 instruction instead of 4 float64 ones, and no conversions for float32), made safe two ways:
- sums accumulate in that type over blocks of _BLOCK elements (many SIMD partial sums each),
  and the block sums in float64, so long rows lose nothing;
- the float64 mean mu is split into hi = dtype(mu) and lo = dtype(mu - hi), and x - mu is
  computed as (x - hi) - lo. When x is close to mu (the case that matters: a large mean with a
  small spread, such as 1e3 + 1e-2 * randn) x - hi is exact in float32 (Sterbenz), so the
  centred value is as accurate as in float64, where a float32 mean alone would be off by half
  an ulp of 1e3 (3e-5, i.e. 3e-3 of a standard deviation of 1e-2).
Callers pass float64 scalars; each helper converts them once per row. A 2-byte output is
rounded once, from the float32 result (round to nearest even, as NumPy's astype).

The plain (unmasked) row helpers of the forward and backward passes, and the column helpers,
are inlined into their kernels by Numba (inline="always"); an inlined function takes its
caller's fastmath flags, so the kernels that call them carry REASSOC_CONTRACT too (their
reductions need "reassoc" to vectorise). A call per row into a separately compiled loop costs
its call overhead and the loop's hoisted setup on every row (docs/performance.md).
"""
import numpy as np
from numba import njit

from ._half import compute_type, compute_zero, narrow, widen
from ._numerics import REASSOC_CONTRACT, split

_BLOCK = 256


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def row_sum(x, i, shift):
    """sum (x[i] - shift) for a shift in x's dtype (the caller adds n * shift back in float64).

    The first pass of the two-pass variance, before the mean is known. Shifting by a value of
    the data (any element of the row or channel) keeps the summands small when the mean is
    large, so that block sums in x's dtype stay accurate: summing 1e3 + 1e-2 * randn in float32
    directly would round each partial sum to ~3e-5 and bias the mean by a good fraction of the
    standard deviation.

    The blocks have a constant trip count on purpose: with ``range(j0, min(n, j0 + B))`` LLVM
    vectorised the index arithmetic instead of the loads (several times slower)."""
    n = x.shape[1]
    nb = n // _BLOCK
    total = np.float64(0.0)
    for b in range(nb + 1):
        base = b * _BLOCK
        m = _BLOCK if b < nb else n - base
        s = compute_zero(x)
        if m == _BLOCK:
            for j in range(_BLOCK):
                s += widen(x[i, base + j]) - shift
        else:
            for j in range(m):
                s += widen(x[i, base + j]) - shift
        total += s
    return total


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def row_shifted_moments(x, i, shift):
    """(sum d, sum d^2) with d = x[i] - shift, shift in x's dtype, blocked as row_sum: the one
    pass of a shifted-data variance (see _numerics.mean_var_from_sums)."""
    n = x.shape[1]
    nb = n // _BLOCK
    t1 = np.float64(0.0)
    t2 = np.float64(0.0)
    for b in range(nb + 1):
        base = b * _BLOCK
        m = _BLOCK if b < nb else n - base
        s1 = compute_zero(x)
        s2 = compute_zero(x)
        if m == _BLOCK:
            for j in range(_BLOCK):
                d = widen(x[i, base + j]) - shift
                s1 += d
                s2 += d * d
        else:
            for j in range(m):
                d = widen(x[i, base + j]) - shift
                s1 += d
                s2 += d * d
        t1 += s1
        t2 += s2
    return t1, t2


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def rows_shifted_moments(x, first, step, count, shift):
    """row_shifted_moments summed over the rows first, first + step, ... (count rows): the one
    pass of a shifted-data variance over a group of rows (GroupNorm's group, BatchNorm's channel)."""
    s1 = np.float64(0.0)
    s2 = np.float64(0.0)
    for k in range(count):
        a, b = row_shifted_moments(x, first + k * step, shift)
        s1 += a
        s2 += b
    return s1, s2


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def row_sq_dev_sum(x, i, mu):
    """sum (x[i] - mu)^2: the second pass of a two-pass variance."""
    hi, lo = split(x, mu)
    n = x.shape[1]
    nb = n // _BLOCK
    total = np.float64(0.0)
    for b in range(nb + 1):
        base = b * _BLOCK
        m = _BLOCK if b < nb else n - base
        s = compute_zero(x)
        if m == _BLOCK:
            for j in range(_BLOCK):
                d = (widen(x[i, base + j]) - hi) - lo
                s += d * d
        else:
            for j in range(m):
                d = (widen(x[i, base + j]) - hi) - lo
                s += d * d
        total += s
    return total


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def row_normalize(out, oi, x, i, mu, a, b):
    """out[oi] = (x[i] - mu) * a + b (out: the output itself, oi = i, or an L1 scratch row to
    be streamed, see _stream)."""
    hi, lo = split(x, mu)
    a_ = compute_type(x, a)
    b_ = compute_type(x, b)
    for j in range(x.shape[1]):
        out[oi, j] = narrow(((widen(x[i, j]) - hi) - lo) * a_ + b_, out)


@njit(error_model="numpy", cache=True, inline="always")
def _grad_at(dy, r, i, j):
    """dy[i, j] in the compute type; 0 where ReLU's output r[i, j] is 0 (with r given)."""
    d = widen(dy[i, j])
    if r is not None:
        if widen(r[i, j]) == 0:
            d = compute_zero(dy)
    return d


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def row_sums_dy_dyxc(dy, x, i, mu, r=None, ds=None):
    """(sum dy[i], sum dy[i] * (x[i] - mu)), blocked as row_sum (dy masked by ReLU's output r
    when given, see row_normalize_relu; the masked dy also written into row i of ``ds`` when
    given: the residual's gradient of norm + add + ReLU)."""
    hi, lo = split(x, mu)
    n = x.shape[1]
    nb = n // _BLOCK
    t1 = np.float64(0.0)
    t2 = np.float64(0.0)
    for b in range(nb + 1):
        base = b * _BLOCK
        m = _BLOCK if b < nb else n - base
        s1 = compute_zero(x)
        s2 = compute_zero(x)
        if m == _BLOCK:
            for j in range(_BLOCK):
                d = _grad_at(dy, r, i, base + j)
                if ds is not None:
                    ds[i, base + j] = narrow(d, ds)
                s1 += d
                s2 += d * ((widen(x[i, base + j]) - hi) - lo)
        else:
            for j in range(m):
                d = _grad_at(dy, r, i, base + j)
                if ds is not None:
                    ds[i, base + j] = narrow(d, ds)
                s1 += d
                s2 += d * ((widen(x[i, base + j]) - hi) - lo)
        t1 += s1
        t2 += s2
    return t1, t2


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def row_affine2(out, oi, dy, x, i, p, mu, q, o, r=None):
    """out[oi] = p * dy[i] + q * (x[i] - mu) + o: every channel norm's dx has this form (out, oi
    as in row_normalize; dy masked by ReLU's output r when given)."""
    hi, lo = split(x, mu)
    p_ = compute_type(x, p)
    q_ = compute_type(x, q)
    o_ = compute_type(x, o)
    for j in range(x.shape[1]):
        out[oi, j] = narrow(p_ * _grad_at(dy, r, i, j) + q_ * ((widen(x[i, j]) - hi) - lo) + o_, out)


# BatchNorm + ReLU: the output is relu(v), v the normalized value (0 where v < 0; NaN and -0.0
# kept, as relu); backward reads that output r and passes dy where r != 0 (relu's mask, as its
# own backward): row_sums_dy_dyxc and row_affine2 take r (None elsewhere, where the test
# compiles away), so the two ops' gradients are those of the separate ones. With a residual
# (norm + add + ReLU, the end of a ResNet block) v is the normalized value plus the residual's
# element, the sum rounded once as an add would; the residual's gradient is the same masked dy.
@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def row_normalize_relu(out, oi, x, i, mu, a, b, res=None):
    """out[oi] = relu((x[i] - mu) * a + b), or relu((x[i] - mu) * a + b + res[i]) with ``res``
    (out, oi as in row_normalize)."""
    hi, lo = split(x, mu)
    a_ = compute_type(x, a)
    b_ = compute_type(x, b)
    zero = compute_zero(x)
    for j in range(x.shape[1]):
        v = ((widen(x[i, j]) - hi) - lo) * a_ + b_
        if res is not None:
            v += widen(res[i, j])
        out[oi, j] = narrow(zero if v < zero else v, out)


# masked variants: mask[n] is a boolean row, True at the positions that count (BatchNorm1d with a
# mask); these serve a less common path and keep float64 arithmetic
@njit(error_model="numpy", cache=True)
def row_count(mask, n):
    c = 0
    for j in range(mask.shape[1]):
        if mask[n, j]:
            c += 1
    return c


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def row_sum_masked(x, i, mask, n):
    s = np.float64(0.0)
    for j in range(x.shape[1]):
        if mask[n, j]:
            s += widen(x[i, j])
    return s


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def row_sq_dev_sum_masked(x, i, mask, n, mu):
    s = np.float64(0.0)
    for j in range(x.shape[1]):
        if mask[n, j]:
            d = widen(x[i, j]) - mu
            s += d * d
    return s


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def row_normalize_masked(y, x, i, mask, n, mu, a, b):
    """As row_normalize where mask, 0 elsewhere (padding stays zero)."""
    for j in range(x.shape[1]):
        y[i, j] = narrow((widen(x[i, j]) - mu) * a + b if mask[n, j] else 0.0, y)


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def row_sums_dy_dyxc_masked(dy, x, i, mask, n, mu):
    s1 = np.float64(0.0)
    s2 = np.float64(0.0)
    for j in range(x.shape[1]):
        if mask[n, j]:
            d = widen(dy[i, j])
            s1 += d
            s2 += d * (widen(x[i, j]) - mu)
    return s1, s2


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT)
def row_affine2_masked(out, dy, x, i, mask, n, p, mu, q, o):
    for j in range(x.shape[1]):
        out[i, j] = narrow(p * widen(dy[i, j]) + q * (widen(x[i, j]) - mu) + o if mask[n, j] else 0.0, out)


# column variants: row n of an (N, C) matrix against per-channel vectors of length C
# (BatchNorm1d on (N, C)). The accumulators (acc*) are in x's dtype, flushed into float64 every
# FLUSH_ROWS rows by the caller (see _numerics.flush); the vectors of the elementwise passes
# (shift, hi, a, b, p, q, o) are in x's dtype too, prepared by the caller. These take only the
# hi part of the split mean: x - hi is the exact part of x - mu, and the caller folds lo into
# its per-channel constants (lo * a into b, q * lo into o, lo * sum(dy) out of sum(dy (x - hi))),
# one load and one subtraction fewer per element than (x - hi) - lo.
# Outputs go to row oi of ``out``, so a kernel can write into an L1 scratch row and stream it
# (see _stream). They are inlined into the calling kernel by Numba (inline="always"), where they
# take its fastmath flags (they need none: no reductions across j), rather than called once per row.
@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def cols_add_dev_sq(acc1, acc2, x, n, shift):
    for j in range(acc1.shape[0]):
        d = widen(x[n, j]) - shift[j]
        acc1[j] += d
        acc2[j] += d * d


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def cols_normalize(out, oi, x, n, hi, a, b):
    for j in range(hi.shape[0]):
        out[oi, j] = narrow((widen(x[n, j]) - hi[j]) * a[j] + b[j], out)


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def cols_add_dy_dyxc(acc1, acc2, dy, x, n, hi):
    for j in range(acc1.shape[0]):
        d = widen(dy[n, j])
        acc1[j] += d
        acc2[j] += d * (widen(x[n, j]) - hi[j])


@njit(error_model="numpy", cache=True, fastmath=REASSOC_CONTRACT, inline="always")
def cols_affine2(out, oi, dy, x, n, p, hi, q, o):
    for j in range(hi.shape[0]):
        out[oi, j] = narrow(p[j] * widen(dy[n, j]) + q[j] * (widen(x[n, j]) - hi[j]) + o[j], out)
