"""Running reductions along one axis (cumsum, cumprod, logcumsumexp): one thread per row.

A row is the line of elements along the scanned axis at one position of the other axes. Rows are
independent, so thread r folds its row serially, in order, and writes each partial result:

    sum:        y_i = y_{i-1} + x_i                        (y_{-1} = 0)
    prod:       y_i = y_{i-1} * x_i                        (y_{-1} = 1)
    logaddexp:  y_i = ln(e**y_{i-1} + e**x_i)              (y_{-1} = -inf)
                    = m + ln(1 + e**-|y_{i-1} - x_i|),  m = max(y_{i-1}, x_i)

the last written so that nothing overflows and no small term underflows beside a large one
(NumPy's np.logaddexp). The running value is kept in ``acc`` (float32 for float16 and float32,
float64 for float64, int64 for integers: kernels/cuda/reduce.py's accumulator) and each partial
result is cast to the output's dtype as it is written, so float16 scans add in float32 and round
each output once, as the CPU path does. One thread per row is a serial scan of length n: fine for
the row lengths these ops see; a long single row would want a block-wide (Blelloch) scan instead.

The input may have any strides (read through ``strided_offset``); the output is contiguous.
"""
import math

import numba
import numpy as np
from numba import cuda

from ._common import grid_for, kernel_cache, strided_offset
from .reduce import accumulator_dtype

OPS = ("sum", "prod", "logaddexp")


@cuda.jit(device=True)
def _logaddexp(a, b):
    """ln(e**a + e**b) as np.logaddexp: -inf with -inf stays -inf, a nan operand gives nan."""
    if a == b:
        return a + math.log(2.0)   # also inf + inf = inf and -inf + -inf = -inf, where a - b is nan
    d = a - b
    if d != d:
        return d
    if d > 0:
        return a + math.log1p(math.exp(-d))
    return b + math.log1p(math.exp(d))


def _build(op, acc):
    acc_t = numba.from_dtype(acc)
    start = {"sum": 0.0, "prod": 1.0, "logaddexp": -math.inf}[op]
    if acc.kind != "f":
        start = int(start)

    @cuda.jit
    def kernel(out, x, x_off, row_shape, row_strides, n, step, rows):
        r = cuda.grid(1)
        if r < rows:
            src = strided_offset(r, row_shape, row_strides, x_off)
            total = acc_t(start)
            for i in range(n):
                v = acc_t(x[src + i * step])
                if op == "sum":
                    total = total + v
                elif op == "prod":
                    total = total * v
                else:
                    total = _logaddexp(total, v)
                out[r * n + i] = total
    return kernel


_kernel = kernel_cache(_build)


def scan(op, x, axis, dtype):
    """y = the running ``op`` ("sum", "prod" or "logaddexp") of the CudaArray x along ``axis``,
    a new contiguous array of ``dtype``, with ``axis`` moved last while the kernel writes it and
    moved back (a transposed view) before it is returned. x must be a non-bfloat16 array (the
    caller widens bfloat16 to float32); ``axis`` must be a valid axis of x (x has >= 1 dim)."""
    if op not in OPS:
        raise ValueError(f"scan: expected one of {OPS}, got {op!r}")
    if x.ndim == 0:
        raise ValueError("scan: expected an array with at least one dim, got a 0-d array")
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(axis, x.ndim)
    axis %= x.ndim
    dtype = np.dtype(dtype)
    kept = [d for d in range(x.ndim) if d != axis]
    moved_shape = tuple(x.shape[d] for d in kept) + (x.shape[axis],)
    out = type(x).empty(moved_shape, dtype)
    n = x.shape[axis]
    rows = out.size // n if n else 0
    if rows:   # empty arrays never reach the kernel
        buf, _, strides, off = x._kernel_view()
        row_shape = tuple(x.shape[d] for d in kept) or (1,)
        row_strides = tuple(strides[d] for d in kept) or (0,)
        acc = accumulator_dtype(np.result_type(x.dtype, dtype))
        _kernel(op, acc)[grid_for(rows)](out._buf[out._off:out._off + out.size], buf, off, row_shape, row_strides,
                                         n, strides[axis], rows)
    order = list(range(x.ndim - 1))
    order.insert(axis, x.ndim - 1)
    return out.transpose(tuple(order))
