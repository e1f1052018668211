"""Casts between float32 and float16/bfloat16 arrays, and their sum, as one parallel pass.

NumPy converts float16 element by element in C without the CPU's conversion instructions
(about 1.7 ns per element to float32 and 2.7 ns back on the test machine; ml_dtypes' bfloat16
0.4 and 0.9 ns), and mixed precision converts every activation at least once per op. These
kernels run ``_half``'s conversions (F16C's vcvtph2ps / vcvtps2ph for float16, the bit
formulas in 32-bit lanes for bfloat16), vectorised and split over Numba's threads, with the
same results as NumPy/ml_dtypes' casts (round to nearest even; a float32 past float16's range
becomes inf; see ``_half`` for the one difference, a float16 signalling NaN read as quiet).

``add(a, b)`` sums two 2-byte arrays of one dtype and shape the same way (each element widened,
added in float32 and rounded once: NumPy's result, since float32 holds the exact sum of two
float16 or bfloat16 values to within the half-ulp that makes one rounding correct) for the
residual adds and the gradient sums of a float16 network, which NumPy runs several times slower
than float32 ones. Two float32 or float64 arrays take the same parallel loop when Numba has
more than one thread: NumPy's add runs on one, and a sum of large arrays is bound by one
core's memory bandwidth (two threads: 1.7-1.9x faster at 4-8 MB, docs/performance.md).

``copy(a)`` copies a float32 or float64 array through the same loop (a widening from a dtype
to itself), split over Numba's threads like the sum, for the gradient copies autograd makes when
two leaves would otherwise share one array.

``astype(a, dtype)`` takes this path for a C-contiguous NumPy array of at least SERIAL_BELOW
elements cast between float32 and a 2-byte float, and NumPy's ``astype`` for anything else
(other dtypes, strided views, small arrays, NUMBA_DISABLE_JIT=1, where a Python loop would be
far slower than NumPy).
"""
import numba
import numpy as np
from numba import njit, prange

from ._half import is_half, narrow, storage, widen
from ._threads import SERIAL_BELOW

_FLOAT32 = np.dtype(np.float32)
_CHUNK = 1 << 14


@njit(error_model="numpy", cache=True)
def _widen_all(src, out):
    for i in range(src.size):
        out[i] = widen(src[i])


@njit(error_model="numpy", cache=True)
def _narrow_all(src, out):
    for i in range(src.size):
        out[i] = narrow(src[i], out)


# Each chunk is a slice handed to a loop over the whole slice: written inline in the prange body,
# or as a loop from start to stop, LLVM cannot tell that the indices are non-negative, keeps
# NumPy's negative-index wrap-around in the loop and does not vectorise it (10x slower).
@njit(error_model="numpy", cache=True, parallel=True)
def _widen_flat(src, out):
    n = src.size
    for c in prange((n + _CHUNK - 1) // _CHUNK):
        a, b = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _widen_all(src[a:b], out[a:b])


@njit(error_model="numpy", cache=True, parallel=True)
def _narrow_flat(src, out):
    n = src.size
    for c in prange((n + _CHUNK - 1) // _CHUNK):
        a, b = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _narrow_all(src[a:b], out[a:b])


@njit(error_model="numpy", cache=True)
def _add_all(a, b, out):
    for i in range(a.size):
        out[i] = narrow(widen(a[i]) + widen(b[i]), out)


@njit(error_model="numpy", cache=True, parallel=True)
def _add_flat(a, b, out):
    n = a.size
    for c in prange((n + _CHUNK - 1) // _CHUNK):
        lo, hi = c * _CHUNK, min(n, (c + 1) * _CHUNK)
        _add_all(a[lo:hi], b[lo:hi], out[lo:hi])


_WIDE = (np.dtype(np.float32), np.dtype(np.float64))


def add(a, b):
    """``a + b`` for two C-contiguous NumPy arrays of one shape and float dtype, in one parallel
    pass (see the module docstring); anything else as NumPy adds it."""
    if (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape
            and a.size >= SERIAL_BELOW and a.flags.c_contiguous and b.flags.c_contiguous
            and not numba.config.DISABLE_JIT):
        if is_half(a.dtype):
            out = np.empty(a.shape, a.dtype)
            _add_flat(storage(a).reshape(-1), storage(b).reshape(-1), storage(out).reshape(-1))
            return out
        if a.dtype in _WIDE and numba.get_num_threads() > 1:
            out = np.empty(a.shape, a.dtype)
            _add_flat(a.reshape(-1), b.reshape(-1), out.reshape(-1))
            return out
    return a + b


def copy(a):
    """``a.copy()``: a C-contiguous float32/float64 NumPy array of at least SERIAL_BELOW elements in
    one parallel pass when Numba has more than one thread; anything else by NumPy."""
    if (type(a) is np.ndarray and a.dtype in _WIDE and a.size >= SERIAL_BELOW and a.flags.c_contiguous
            and not numba.config.DISABLE_JIT and numba.get_num_threads() > 1):
        out = np.empty(a.shape, a.dtype)
        _widen_flat(a.reshape(-1), out.reshape(-1))
        return out
    return a.copy()


def astype(a, dtype):
    """``a.astype(dtype)`` (a new array), by the kernels above where they apply (see the module
    docstring); values past float16's range become inf and NaN stays NaN, without NumPy's warnings."""
    dtype = np.dtype(dtype)
    fast = (type(a) is np.ndarray and a.size >= SERIAL_BELOW and a.flags.c_contiguous
            and not numba.config.DISABLE_JIT)
    if fast and is_half(a.dtype) and dtype == _FLOAT32:
        out = np.empty(a.shape, _FLOAT32)
        _widen_flat(storage(a).reshape(-1), out.reshape(-1))
        return out
    if fast and a.dtype == _FLOAT32 and is_half(dtype):
        out = np.empty(a.shape, dtype)
        _narrow_flat(a.reshape(-1), storage(out).reshape(-1))
        return out
    with np.errstate(over="ignore", invalid="ignore"):   # overflow to inf, NaN to NaN: no warnings
        return a.astype(dtype)
