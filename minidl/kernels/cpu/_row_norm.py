"""What the row norms (LayerNorm, RMSNorm, ScaleNorm over the rows of an (N, D) array) share:
row reductions, and the array-level wrappers around their forward and backward kernels.

Two rules of these kernels, each of which costs several times the run time when ignored:

1. Do not slice rows (``xi = x[i]``) inside a ``prange`` loop. Every view increments and
   decrements the parent array's reference count with an atomic instruction, and two
   threads doing so on the same counter bounce one cache line between cores. The helpers
   below take ``(x, i)`` and index ``x[i, j]`` instead.
2. Sums of many rows into one (N,)->(D,) result (dgamma, dbeta) are split into one chunk of
   rows per thread, each adding into its own row of a small (chunks, D) float64 array
   (through a block in the compute dtype, see ``_numerics.flush``); the chunks are added
   together at the end. No atomics, and nothing of size (N, D). The row loop that writes dx
   also does these sums, so each row is read from memory once.

The reductions are compiled with ``_numerics.REASSOC`` and nothing else, so that they
vectorise while NaN and Inf keep their meaning; they accumulate in the compute dtype (see
``_numerics`` for why that is accurate enough).

2-byte floats. The kernels take float16 and bfloat16 arrays as their integer storage views
(``_half.storage``) and convert in registers: every element read goes through ``widen`` (to
float32), every element written through ``narrow`` (rounded once, to nearest even), and
accumulators and per-row constants are float32 (``compute_zero``, ``compute_type``). No float32
copy of an (N, D) array is made, and the kernel moves half the bytes; for float32 and float64
the helpers are the identity, so their machine code is what it would be without them. The
result equals what the float32 kernel gives on the widened input, rounded once at the end.

The wrappers (``rows_forward``, ``rows_backward``) take (N, D) arrays, pass their storage to the
kernels, run small inputs on one thread (``_threads.launch``) and stream large outputs
(``_stream.should_stream``).
"""
import numpy as np
from numba import njit

from ._half import compute_type, compute_zero, storage, widen
from ._numerics import REASSOC, compute_dtype
from ._stream import should_stream
from ._threads import launch, num_chunks


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_shifted_sums(x, i, shift):
    """(sum_j d_j, sum_j d_j^2) with d = x[i] - shift, in x's compute dtype: the pass of a
    shifted-data variance (see _numerics.mean_var_from_sums)."""
    c = compute_type(x, shift)
    s1 = compute_zero(x)
    s2 = compute_zero(x)
    for j in range(x.shape[1]):
        d = widen(x[i, j]) - c
        s1 += d
        s2 += d * d
    return s1, s2


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_sq_sum(x, i):
    """sum_j x[i, j]^2 in x's compute dtype."""
    s = compute_zero(x)
    for j in range(x.shape[1]):
        v = widen(x[i, j])
        s += v * v
    return s


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_dot(a, b, i):
    """sum_j a[i, j] * b[i, j] in a's compute dtype."""
    s = compute_zero(a)
    for j in range(a.shape[1]):
        s += widen(a[i, j]) * widen(b[i, j])
    return s


@njit(error_model="numpy", cache=True, fastmath=REASSOC)
def row_dy_w_x_dot(dy, x, w, i):
    """sum_j dy_ij w_j x_ij in x's compute dtype (RMSNorm's backward row sum)."""
    s = compute_zero(x)
    for j in range(x.shape[1]):
        s += widen(dy[i, j]) * w[j] * widen(x[i, j])
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


def like_x(a, x, ct):
    """The storage a kernel takes for a second (N, D) input ``a`` read beside ``x`` (dy, a
    residual, a stream gradient): in x's own storage when it has x's dtype (C-contiguous), else
    converted to the compute dtype ``ct`` (one float32 or float64 copy, as a mixed-dtype call
    computes in ``ct`` anyway)."""
    if a.dtype == x.dtype:
        return storage(np.ascontiguousarray(a))
    return np.ascontiguousarray(a, dtype=ct)


def output_buffer(out, shape, dtype):
    """(the array to hand back, the array the kernel writes, through its storage): ``out`` both
    times when it is a C-contiguous array of ``dtype`` (allocated if None), else ``out`` and a
    fresh array to be copied into it after the kernel (``copy_back``)."""
    if out is None:
        out = np.empty(shape, dtype)
    if out.shape != tuple(shape):   # the kernels write shape's rows, unchecked
        raise ValueError(f"expected an output array of shape {tuple(shape)}, got one of shape {out.shape}")
    if out.dtype == dtype and out.flags.c_contiguous:
        return out, out
    return out, np.empty(shape, dtype)


def copy_back(out, buf):
    """out[...] = buf, unless the kernel wrote into out itself (see ``output_buffer``)."""
    if buf is not out:
        out[...] = buf


def rows_forward(kernel, x, out, stream, nstats, params):
    """(y, *stats) of a row norm's forward: ``kernel(x, *params(ct), y, *stats, nchunks, stream)``
    with x and y the storage (``_half.storage``) of C-contiguous (N, D) arrays of x's dtype, ct
    its compute dtype and ``nstats`` float64 (N,) statistics. ``out`` an (N, D) array of x's dtype
    to write y into (allocated if None); ``stream`` forces streaming stores on or off (default:
    on for large outputs)."""
    n, d = x.shape
    ct = compute_dtype(x.dtype)
    out, y = output_buffer(out, (n, d), x.dtype)
    if x.size == 0:
        return empty_rows_forward(out, nstats)
    xs = storage(np.ascontiguousarray(x))
    stats = tuple(np.empty(n, np.float64) for _ in range(nstats))
    stream = should_stream(y) if stream is None else bool(stream)
    launch(kernel, n * d, xs, *params(ct), storage(y), *stats, num_chunks(n, n * d), stream)
    copy_back(out, y)
    return (out,) + stats


def rows_backward(kernel, dy, x, need_dx, dx_out, stream, inputs, partials, flags=()):
    """(dx or None, partials) of a row norm's backward of a non-empty x:
    ``kernel(dy, x, *inputs(ct), dx, *partials(nchunks), need_dx, *flags, stream)`` with x and dx
    the storage of arrays of x's dtype (dx without rows when not needed) and dy as ``like_x``;
    ``partials(nchunks)`` allocates the per-chunk float64 partial sums of the parameter
    gradients, which come back to be summed by the caller."""
    n, d = x.shape
    ct = compute_dtype(x.dtype)
    xs = storage(np.ascontiguousarray(x))
    dys = like_x(dy, x, ct)
    args = inputs(ct)
    dx, buf = output_buffer(dx_out, (n, d), x.dtype) if need_dx else (None, np.empty((0, d), x.dtype))
    parts = partials(num_chunks(n, n * d))
    stream = need_dx and (should_stream(buf) if stream is None else bool(stream))
    launch(kernel, n * d, dys, xs, *args, storage(buf), *parts, need_dx, *flags, stream)
    if need_dx:
        copy_back(dx, buf)
    return dx, parts
