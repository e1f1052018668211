"""Building blocks shared by the Numba norm kernels: row reductions, chunking, partial sums.

Three lessons measured on this code, each of which cost 2-10x when ignored:

1. Do not slice rows (``xi = x[i]``) inside a ``prange`` loop. Every view increments and
   decrements the parent array's reference count with an atomic instruction, and two
   threads doing so on the same counter bounce one cache line between cores. The helpers
   below take ``(x, i)`` and index ``x[i, j]`` instead.
2. A strict left-to-right sum ``s += a[j]`` cannot be vectorised: IEEE addition is not
   associative, so LLVM must keep the order and each add waits for the previous one. The
   reduction helpers are therefore compiled with ``fastmath={"reassoc"}`` and nothing else:
   LLVM may regroup the sum into SIMD lanes (a tree of partial sums, which is if anything more
   accurate than the serial order), while NaN and Inf keep their meaning (no "nnan"/"ninf").
   The kernels that call them stay ``fastmath=False``.
3. Sums of many rows into one (N,)->(D,) result (dgamma, dbeta) are split into one chunk of
   rows per thread, each adding into its own row of a small (chunks, D) float64 array
   (through a block in the input's dtype, see ``flush``); the chunks are added together at
   the end. No atomics, and nothing of size (N, D). The row loop that writes dx also does
   these sums, so each row is read from memory once.

The row helpers accumulate in the input's dtype, float32 or float64 (float16 is converted to
float32 before it reaches a kernel). Row sums are SIMD trees of partial sums, so a float32 row
of thousands of values is summed to about float32 precision, and the variance sums deviations
from a shift near the mean (``mean_var_from_sums``), so a large mean costs no accuracy.
Staying in float32 keeps 16 values per AVX-512 instruction instead of 8: a single thread is
then bound by memory, not by arithmetic. Per-row scalars (mean, rstd) are float64; sums over
rows (dgamma) use float64 partials.

Caution when editing: Numba's on-disk cache (``cache=True``) checks only the timestamp of a
kernel's own file, not of the helpers it calls, so after changing a helper here delete the
cached kernels (``minidl/kernels/cpu/__pycache__/*.nbi`` and ``*.nbc``) or they keep the old code.
"""
import numba
import numpy as np
from numba import njit

_REDUCE = {"reassoc"}


@njit(error_model="numpy", cache=True, fastmath=_REDUCE)
def row_shifted_sums(x, i, shift):
    """(sum_j d_j, sum_j d_j^2) with d = x[i] - shift, in x's dtype: the pass of a
    shifted-data variance (see mean_var_from_sums)."""
    c = x.dtype.type(shift)
    s1 = x.dtype.type(0.0)
    s2 = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        d = x[i, j] - c
        s1 += d
        s2 += d * d
    return s1, s2


@njit(error_model="numpy", cache=True, fastmath=_REDUCE)
def row_sq_sum(x, i):
    """sum_j x[i, j]^2 in x's dtype."""
    s = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        s += x[i, j] * x[i, j]
    return s


@njit(error_model="numpy", cache=True, fastmath=_REDUCE)
def row_dot(a, b, i):
    """sum_j a[i, j] * b[i, j] in a's dtype."""
    s = a.dtype.type(0.0)
    for j in range(a.shape[1]):
        s += a[i, j] * b[i, j]
    return s


@njit(error_model="numpy", cache=True, fastmath=_REDUCE)
def row_dy_w_x_dot(dy, x, w, i):
    """sum_j dy_ij w_j x_ij in x's dtype (RMSNorm's backward row sum)."""
    s = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        s += dy[i, j] * w[j] * x[i, j]
    return s


HEAD = 256   # elements that estimate a row's mean for the shift (see mean_var_from_sums)


@njit(error_model="numpy", cache=True, fastmath=_REDUCE)
def row_head_mean(x, i):
    """The mean of the first HEAD elements of row i (all of a shorter row), in x's dtype."""
    m = min(x.shape[1], HEAD)
    s = x.dtype.type(0.0)
    for j in range(m):
        s += x[i, j]
    return x.dtype.type(s / m)


@njit(error_model="numpy", cache=True)
def mean_var_from_sums(shift, s1, s2, d):
    """(mean, biased variance) as float64 of d values from s1 = sum (x - shift) and
    s2 = sum (x - shift)^2: the shifted-data algorithm (Chan, Golub & LeVeque), exact to working
    precision even for 1e3 + 1e-2 * randn in float32 when the shift is close to the mean.

    The norms take as shift the mean of a row's first HEAD values (``row_head_mean``, rounded to
    x's dtype), typically a small fraction of a standard deviation from the row mean; the pass
    sums d = x - shift, which is small and, for data with a large mean, exact (x and the shift
    are close), so mean = shift + mean(d) corrects the shift, and var = mean(d^2) - mean(d)^2
    loses only a factor 1 + (mean(d) / std)^2 of precision to cancellation (about 1 here; 2
    even if the head's mean were a whole std off). (With the row's first value as the shift,
    one saves the head pass but loses up to a factor 16 in accuracy when that value lies a few
    standard deviations out; with the full row mean as the shift, the classic corrected
    two-pass, one pays a second full pass.)"""
    mc = np.float64(s1) / d
    return np.float64(shift) + mc, max(np.float64(s2) / d - mc * mc, 0.0)


@njit(error_model="numpy", cache=True)
def split(x, v):
    """v (float64) as hi + lo in x's dtype, hi = v rounded. (x - hi) - lo then equals x - v to
    x's precision even when v is large and x - v small, which x - v with v rounded would not."""
    hi = x.dtype.type(v)
    return hi, x.dtype.type(v - np.float64(hi))


@njit(error_model="numpy", cache=True)
def chunk_bounds(n, nchunks, c):
    """Rows [start, stop) of chunk c when n rows are split into nchunks near-equal chunks."""
    return (c * n) // nchunks, ((c + 1) * n) // nchunks


def empty_rows_forward(out, nstats):
    """A row norm's forward of an (N, D) input without elements (N = 0 or D = 0), returned
    before any row loop runs: ``out`` as it is (it has no elements either) and ``nstats``
    per-row statistics (N,) of NaN, the mean and spread of no values."""
    return (out,) + tuple(np.full(out.shape[0], np.nan) for _ in range(nstats))


def empty_rows_backward(x, dx_out, need_dx, *need_params):
    """A row norm's backward of an (N, D) input without elements: dx (no elements, or None)
    and, per flag in ``need_params``, a float64 (D,) parameter gradient of zeros (a sum over
    no rows), or None."""
    n, d = x.shape
    dx = (np.empty((n, d), x.dtype) if dx_out is None else dx_out) if need_dx else None
    return (dx,) + tuple(np.zeros(d) if need else None for need in need_params)


SERIAL_BELOW = 1 << 15   # elements: below this a parallel launch costs more than it saves


def num_chunks(n, work=None):
    """How many row chunks a backward splits into: one per Numba thread (at least one row
    each), or one when ``work`` (elements) is small enough to run serially (see ``launch``);
    none for no rows, since the kernels' pipelined loops assume a chunk holds a row."""
    if n <= 0:
        return 0
    if work is not None and work < SERIAL_BELOW:
        return 1
    return max(1, min(int(n), numba.get_num_threads()))


def launch(kernel, work, *args):
    """kernel(*args), on one thread when ``work`` (elements touched) is below SERIAL_BELOW.

    Waking the thread pool costs microseconds on an idle machine and whole scheduler time
    slices (milliseconds) on a busy one, while a small norm takes a microsecond or two on one
    core; finite-difference gradchecks make thousands of such calls."""
    if work >= SERIAL_BELOW:
        return kernel(*args)
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return kernel(*args)
    finally:
        numba.set_num_threads(previous)


FLUSH_ROWS = 32


@njit(error_model="numpy", cache=True)
def flush(part, c, block):
    """part[c] += block (float64 += the input's dtype), then block = 0. A chunk sums its rows'
    dgamma contributions into ``block`` in the input's dtype (16 float32 lanes per instruction)
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
