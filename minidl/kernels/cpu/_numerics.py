"""Numerics shared by the CPU kernels: fastmath flag sets, the compute dtype, split means,
shifted-data variance and float64 partial sums.

Fastmath. A strict left-to-right sum ``s += a[j]`` cannot be vectorised: IEEE addition is not
associative, so LLVM must keep the order and each add waits for the previous one. Reductions
are therefore compiled with "reassoc": LLVM may regroup the sum into SIMD lanes (a tree of
partial sums, if anything more accurate than the serial order). "contract" lets a * b + c
fuse into one multiply-add. No set holds "nnan"/"ninf", so NaN and Inf keep their meaning.
A helper inlined by Numba (``inline="always"``) is compiled under its caller's flags, not its
own, so the kernels that call such helpers carry the same set.

Precision. Kernels compute in the input's compute dtype (``compute_dtype``): float32 or float64
as they are; float16 and bfloat16 in float32, read and written as 2-byte storage by the kernels
themselves and converted in registers (see ``_half``: ``widen``, ``narrow``, ``compute_zero``,
``compute_type``, which the helpers here use too). 16 float32 values per AVX-512 instruction
instead of 8 float64 ones keeps a single thread bound by memory rather than arithmetic. Per-row scalars
(mean, rstd) are float64; sums over many rows use float64 partials (``flush``,
``sum_partials``). The variance sums deviations from a shift near the mean
(``mean_var_from_sums``), and centring subtracts a split mean (``split``), so a large mean with
a small spread (1e3 + 1e-2 * randn in float32) costs no accuracy.

Caution when editing: Numba's on-disk cache (``cache=True``) checks only the timestamp of a
kernel's own file, not of the helpers it calls, so after changing a helper here delete the
cached kernels (``minidl/kernels/cpu/__pycache__/*.nbi`` and ``*.nbc``) or they keep the old code.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ._half import compute_type, compute_zero, widen

REASSOC = {"reassoc"}                    # reductions regroup into SIMD lanes
CONTRACT = {"contract"}                  # a * b + c as one fused multiply-add
REASSOC_CONTRACT = REASSOC | CONTRACT    # both: kernels that inline reducing helpers


def compute_dtype(dtype):
    """The dtype a kernel computes in: float32 for float16 and bfloat16 (2-byte storage, see
    ``_half``: each element is widened to float32 on reading and rounded once on writing);
    float32 and float64 as they are."""
    dt = np.dtype(dtype)
    return np.dtype(np.float32) if dt.itemsize == 2 and dt.kind in "fV" else dt


def by_dtype(f32, f64):
    """One function of a scalar for kernels compiled for float32 and float64: ``f32`` on a float32
    value, ``f64`` on any other (as Python, for NUMBA_DISABLE_JIT=1; inlined when compiled)."""
    def fn(v):
        return (f32 if isinstance(v, np.float32) else f64)(v)

    @overload(fn, inline="always")
    def _compiled(v):
        chosen = f32 if v == types.float32 else f64
        return lambda v: chosen(v)
    return fn


@njit(error_model="numpy", cache=True)
def split(x, v):
    """v (float64) as hi + lo in x's compute dtype, hi = v rounded. (x - hi) - lo then equals
    x - v to that precision even when v is large and x - v small: when x is close to v, x - hi
    is exact (Sterbenz), whereas x - v with v rounded would be off by half an ulp of v."""
    hi = compute_type(x, v)
    return hi, compute_type(x, v - np.float64(hi))


HEAD = 256   # elements that estimate a row's mean for the shift (see mean_var_from_sums)


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_head_mean(x, i):
    """The mean of the first HEAD elements of row i (all of a shorter row), in x's compute dtype."""
    m = min(x.shape[1], HEAD)
    s = compute_zero(x)
    for j in range(m):
        s += widen(x[i, j])
    return compute_type(x, s / m)


@njit(error_model="numpy", cache=True)
def mean_var_from_sums(shift, s1, s2, d):
    """(mean, biased variance) as float64 of d values from s1 = sum (x - shift) and
    s2 = sum (x - shift)^2: the shifted-data algorithm (Chan, Golub & LeVeque), exact to working
    precision even for 1e3 + 1e-2 * randn in float32 when the shift is close to the mean.

    The norms take as shift the mean of a row's first HEAD values (``row_head_mean``, rounded to
    x's compute dtype), typically a small fraction of a standard deviation from the row mean; the pass
    sums d = x - shift, which is small and, for data with a large mean, exact (x and the shift
    are close), so mean = shift + mean(d) corrects the shift, and var = mean(d^2) - mean(d)^2
    loses only a factor 1 + (mean(d) / std)^2 of precision to cancellation (about 1 here; 2
    even if the head's mean were a whole std off). (With the row's first value as the shift,
    one saves the head pass but loses up to a factor 16 in accuracy when that value lies a few
    standard deviations out; with the full row mean as the shift, the classic corrected
    two-pass, one pays a second full pass.)"""
    mc = np.float64(s1) / d
    return np.float64(shift) + mc, max(np.float64(s2) / d - mc * mc, 0.0)


FLUSH_ROWS = 32


@njit(error_model="numpy", cache=True)
def flush(part, c, block):
    """part[c] += block (float64 += the compute dtype), then block = 0. A chunk sums its rows'
    dgamma contributions into ``block`` in the compute dtype (16 float32 lanes per instruction)
    and flushes every FLUSH_ROWS rows into its float64 partial, so float32 rounding grows over
    at most FLUSH_ROWS terms."""
    for j in range(block.shape[0]):
        part[c, j] += block[j]
        block[j] = 0


@njit(error_model="numpy", cache=True)
def sum_partials(partials, out):
    """out[j] = sum_c partials[c, j], the final reduction of per-chunk partial sums (a few
    rows of D: serial, since starting threads would cost more than the adds)."""
    nchunks, d = partials.shape
    for j in range(d):
        s = 0.0
        for c in range(nchunks):
            s += partials[c, j]
        out[j] = s


def summed_partials(partials):
    """``sum_partials`` into a new float64 array: the (D,) sums of a kernel's (nchunks, D) partials."""
    out = np.empty(partials.shape[1])
    sum_partials(partials, out)
    return out


@njit(error_model="numpy", cache=True)
def row_max(a, r, n):
    """max(a[r, :n]) for n >= 1, as a chain of ``m = max(m, a[r, j])`` gives it (NaN after the
    first entry is passed over; the callers' exp then meets it), in eight independent running
    maxima. The chain cannot be vectorised without "nnan", and each of its compare-and-selects
    waits for the one before: over a softmax's 64-wide rows it took 0.54 ms of 0.82 per 8192
    rows, the lanes 0.16 (docs/performance.md, "Attention in one region")."""
    m = a[r, 0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = m
    n8 = n // 8 * 8
    for j in range(0, n8, 8):
        m0, m1, m2, m3 = max(m0, a[r, j]), max(m1, a[r, j + 1]), max(m2, a[r, j + 2]), max(m3, a[r, j + 3])
        m4, m5, m6, m7 = max(m4, a[r, j + 4]), max(m5, a[r, j + 5]), max(m6, a[r, j + 6]), max(m7, a[r, j + 7])
    for j in range(n8, n):
        m0 = max(m0, a[r, j])
    return max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
