"""What the row norms (LayerNorm, RMSNorm, ScaleNorm over the rows of an (N, D) array) share:
row reductions, and the array-level wrappers around their forward and backward kernels.

Two rules of these kernels, each of which costs several times the run time when ignored:

1. Do not slice rows (``xi = x[i]``) inside a ``prange`` loop. Every view increments and
   decrements the parent array's reference count with an atomic instruction, and two
   threads doing so on the same counter bounce one cache line between cores. The helpers
   below take ``(x, i)`` and index ``x[i, j]`` instead.
2. Sums of many rows into one (N,)->(D,) result (dgamma, dbeta) are split into one chunk of
   rows per thread, each adding into its own row of a small (chunks, D) float64 array
   (through a block in the input's dtype, see ``_numerics.flush``); the chunks are added
   together at the end. No atomics, and nothing of size (N, D). The row loop that writes dx
   also does these sums, so each row is read from memory once.

The reductions are compiled with ``_numerics.REASSOC`` and nothing else, so that they
vectorise while NaN and Inf keep their meaning; they accumulate in the input's dtype (see
``_numerics`` for why that is accurate enough).

The wrappers (``rows_forward``, ``rows_backward``) take (N, D) arrays, compute in
``compute_dtype`` (float16 in float32, rounded back once at the end), run small inputs on one
thread (``_threads.launch``) and stream large outputs (``_stream.should_stream``).
"""
import numpy as np
from numba import njit

from ._numerics import REASSOC, compute_dtype
from ._stream import should_stream
from ._threads import launch, num_chunks


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_shifted_sums(x, i, shift):
    """(sum_j d_j, sum_j d_j^2) with d = x[i] - shift, in x's dtype: the pass of a
    shifted-data variance (see _numerics.mean_var_from_sums)."""
    c = x.dtype.type(shift)
    s1 = x.dtype.type(0.0)
    s2 = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        d = x[i, j] - c
        s1 += d
        s2 += d * d
    return s1, s2


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_sq_sum(x, i):
    """sum_j x[i, j]^2 in x's dtype."""
    s = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        s += x[i, j] * x[i, j]
    return s


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_dot(a, b, i):
    """sum_j a[i, j] * b[i, j] in a's dtype."""
    s = a.dtype.type(0.0)
    for j in range(a.shape[1]):
        s += a[i, j] * b[i, j]
    return s


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_dy_w_x_dot(dy, x, w, i):
    """sum_j dy_ij w_j x_ij in x's dtype (RMSNorm's backward row sum)."""
    s = x.dtype.type(0.0)
    for j in range(x.shape[1]):
        s += dy[i, j] * w[j] * x[i, j]
    return s


_CONSTANTS = {}


def _constant(value, d, dtype):
    key = (value, d, np.dtype(dtype))
    a = _CONSTANTS.get(key)
    if a is None:
        a = _CONSTANTS[key] = np.full(d, value, dtype)
    return a


def ones(d, dtype):
    """A cached ones(d): the weight of a norm without affine, so that one compiled kernel
    serves both cases. (Private and never written; not flagged read-only, since Numba would
    compile a second specialization for read-only arrays.)"""
    return _constant(1, d, dtype)


def zeros(d, dtype):
    """A cached zeros(d), the bias of a norm without one (see ``ones``)."""
    return _constant(0, d, dtype)


def param(p, d, dtype, default):
    """A (D,) parameter as a contiguous array of the compute dtype, or ``default(d, dtype)``
    when the norm has none."""
    if p is None:
        return default(d, dtype)
    return np.ascontiguousarray(p.reshape(d), dtype=dtype)


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


def rows_forward(kernel, x, out, stream, nstats, params):
    """(y, *stats) of a row norm's forward: ``kernel(x, *params(ct), y, *stats, nchunks, stream)``
    with x and y C-contiguous (N, D) in the compute dtype ct and ``nstats`` float64 (N,)
    statistics. ``out`` a C-contiguous (N, D) array of x's dtype to write y into (allocated if
    None); ``stream`` forces streaming stores on or off (default: on for large outputs)."""
    n, d = x.shape
    ct = compute_dtype(x.dtype)
    if out is None:
        out = np.empty((n, d), x.dtype)
    if x.size == 0:
        return empty_rows_forward(out, nstats)
    xc = np.ascontiguousarray(x, dtype=ct)
    yc = out if out.dtype == ct else np.empty((n, d), ct)
    stats = tuple(np.empty(n, np.float64) for _ in range(nstats))
    stream = should_stream(yc) if stream is None else bool(stream)
    launch(kernel, n * d, xc, *params(ct), yc, *stats, num_chunks(n, n * d), stream)
    if yc is not out:
        out[...] = yc
    return (out,) + stats


def rows_backward(kernel, dy, x, need_dx, dx_out, stream, inputs, partials, flags=()):
    """(dx or None, partials) of a row norm's backward of a non-empty x:
    ``kernel(dy, x, *inputs(ct), dx, *partials(nchunks), need_dx, *flags, stream)`` with dy, x
    and dx in the compute dtype ct; ``partials(nchunks)`` allocates the per-chunk float64
    partial sums of the parameter gradients, which come back to be summed by the caller."""
    n, d = x.shape
    ct = compute_dtype(x.dtype)
    dyc = np.ascontiguousarray(dy, dtype=ct)
    xc = np.ascontiguousarray(x, dtype=ct)
    args = inputs(ct)
    dx = None
    if need_dx:
        dx = dx_out if dx_out is not None else np.empty((n, d), x.dtype)
    dxc = dx if (dx is not None and dx.dtype == ct) else np.empty((n if need_dx else 0, d), ct)
    parts = partials(num_chunks(n, n * d))
    stream = need_dx and (should_stream(dxc) if stream is None else bool(stream))
    launch(kernel, n * d, dyc, xc, *args, dxc, *parts, need_dx, *flags, stream)
    if need_dx and dxc is not dx:
        dx[...] = dxc
    return dx, parts
