"""ReLU forward and backward in one pass each: y = max(x, 0) with the mask y != 0 written
beside it, and dx = g where the mask is set, else 0 (the math and the NumPy reference are in
``minidl.ops.unary``'s ``Relu``); and relu(x + r), a residual add with the ReLU after it, in one
forward pass (``AddRelu``; its backward is ReLU's).

NumPy needs two passes for the forward (the maximum, then the comparison that makes the mask)
and a multiply by the boolean mask for the backward, each on one thread. Here each is one loop,
parallel over chunks where the layer kernels may be (``_threads.layer_parallel``). NaN passes
through (``x < 0`` is false for it, so y = x and the mask is set), and -0.0 stays -0.0 with the
mask clear, as PyTorch's relu. float32 and float64 C-contiguous arrays take
the kernels; any other array the reference, and so does every array under NUMBA_DISABLE_JIT=1,
where the loops would run element by element in Python.
"""
import numpy as np
from numba import config, njit, prange

from ._threads import layer_parallel, plane_chunks


# Elements a..b-1, indexed as unsigned offsets: a signed index would make Numba handle negative
# wraparound, and that keeps LLVM from vectorising the loop (about 10x slower).
@njit(error_model="numpy", cache=True, nogil=True)
def _forward(x, y, m, a, b):
    zero = x.dtype.type(0)
    for k in range(b - a):
        i = np.uintp(a) + np.uintp(k)
        v = x[i]
        r = zero if v < zero else v
        y[i] = r
        m[i] = r != zero


@njit(error_model="numpy", cache=True, nogil=True)
def _backward(g, m, dx, a, b):
    zero = g.dtype.type(0)
    for k in range(b - a):
        i = np.uintp(a) + np.uintp(k)
        dx[i] = g[i] if m[i] else zero


@njit(error_model="numpy", cache=True, nogil=True)
def _add_forward(x, r, y, m, a, b):
    """_forward of x + r: the sum rounded once to the dtype, as an add then a ReLU."""
    zero = x.dtype.type(0)
    for k in range(b - a):
        i = np.uintp(a) + np.uintp(k)
        v = x[i] + r[i]
        t = zero if v < zero else v
        y[i] = t
        m[i] = t != zero


@njit(error_model="numpy", cache=True, parallel=True)
def _add_forward_parallel(x, r, y, m, chunks):
    n = x.size
    for k in prange(chunks):
        _add_forward(x, r, y, m, k * n // chunks, (k + 1) * n // chunks)


@njit(error_model="numpy", cache=True, parallel=True)
def _forward_parallel(x, y, m, chunks):
    n = x.size
    for k in prange(chunks):
        _forward(x, y, m, k * n // chunks, (k + 1) * n // chunks)


@njit(error_model="numpy", cache=True, parallel=True)
def _backward_parallel(g, m, dx, chunks):
    n = g.size
    for k in prange(chunks):
        _backward(g, m, dx, k * n // chunks, (k + 1) * n // chunks)


def _takes(a):
    return not config.DISABLE_JIT and type(a) is np.ndarray and a.dtype in (np.float32, np.float64) and a.flags.c_contiguous


def relu_forward(x):
    """(y, mask): y = max(x, 0), mask = y != 0."""
    if not _takes(x):
        from ...ops.unary import relu_forward_reference
        return relu_forward_reference(x)
    y = np.empty_like(x)
    m = np.empty(x.shape, dtype=np.bool_)
    xf, yf, mf = x.reshape(-1), y.reshape(-1), m.reshape(-1)
    if layer_parallel(x.size):
        _forward_parallel(xf, yf, mf, plane_chunks(x.size))
    elif x.size:
        _forward(xf, yf, mf, 0, x.size)
    return y, m


def add_relu_forward(x, r):
    """(y, mask): y = max(x + r, 0), mask = y != 0, in one pass (x and r of one shape and dtype)."""
    if not (_takes(x) and _takes(r) and r.shape == x.shape and r.dtype == x.dtype):
        from ...ops.unary import add_relu_forward_reference
        return add_relu_forward_reference(x, r)
    y = np.empty_like(x)
    m = np.empty(x.shape, dtype=np.bool_)
    xf, rf, yf, mf = x.reshape(-1), r.reshape(-1), y.reshape(-1), m.reshape(-1)
    if layer_parallel(x.size):
        _add_forward_parallel(xf, rf, yf, mf, plane_chunks(x.size))
    elif x.size:
        _add_forward(xf, rf, yf, mf, 0, x.size)
    return y, m


def relu_backward(mask, g):
    """dx = g where mask, else 0."""
    if not (_takes(g) and mask.flags.c_contiguous and mask.shape == g.shape):
        from ...ops.unary import relu_backward_reference
        return relu_backward_reference(mask, g)
    dx = np.empty_like(g)
    gf, mf, df = g.reshape(-1), mask.reshape(-1), dx.reshape(-1)
    if layer_parallel(g.size):
        _backward_parallel(gf, mf, df, plane_chunks(g.size))
    elif g.size:
        _backward(gf, mf, df, 0, g.size)
    return dx
