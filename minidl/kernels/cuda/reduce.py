"""Reductions (sum, prod, max, min) over any set of axes: one block per output element.

The caller splits the input's axes into kept ones (one output element per multi-index)
and reduced ones (``m`` elements folded into each output). Block o finds its input base
offset from o; its threads stride over the m reduced elements, each folding a private
accumulator; the block then combines the per-thread values with a shared-memory tree
(halving the active threads each step, a barrier between steps), and thread 0 writes
the result (short reductions, m <= SHORT, fold serially in one thread per output
instead). Accumulation runs in ``acc`` (float32 for float16/bfloat16/float32 inputs, float64 for
float64, int64 for integers and bools): float32 or wider, as the norm kernels require.
"""
import math

import numba
import numpy as np
from numba import cuda

from ._common import REDUCE_THREADS, SIMULATOR, grid_for, kernel_cache, strided_offset
from .bfloat16 import is_bfloat16


@cuda.jit(device=True)
def _add(a, b):
    return a + b


@cuda.jit(device=True)
def _max(a, b):
    if a != a or a >= b:   # nan wins, as np.max
        return a
    return b


@cuda.jit(device=True)
def _min(a, b):
    if a != a or a <= b:
        return a
    return b


@cuda.jit(device=True)
def _mul(a, b):
    return a * b


COMBINE = {"sum": _add, "prod": _mul, "max": _max, "min": _min}


def accumulator_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or is_bfloat16(dtype):
        return np.dtype(np.float64) if dtype.itemsize > 4 else np.dtype(np.float32)
    return np.dtype(np.int64)


def identity(op, acc):
    if op == "sum":
        return 0
    if op == "prod":
        return 1
    big = math.inf if acc.kind == "f" else np.iinfo(acc).max
    return -big if op == "max" else big


def _build(op, acc, threads):
    combine = COMBINE[op]
    acc_t = numba.from_dtype(acc)
    start = acc.type(identity(op, acc))

    @cuda.jit
    def kernel(out, x, x_off, kept_shape, kept_strides, red_shape, red_strides, m):
        o = cuda.blockIdx.x
        t = cuda.threadIdx.x
        base = strided_offset(o, kept_shape, kept_strides, x_off)
        total = acc_t(start)
        j = t
        while j < m:
            total = combine(total, acc_t(x[strided_offset(j, red_shape, red_strides, base)]))
            j += threads
        partial = cuda.shared.array(threads, acc_t)
        partial[t] = total
        cuda.syncthreads()
        step = threads // 2
        while step > 0:
            if t < step:
                partial[t] = combine(partial[t], partial[t + step])
            cuda.syncthreads()
            step //= 2
        if t == 0:
            out[o] = partial[0]
    return kernel


_kernel = kernel_cache(_build)


def _build_short(op, acc):
    """For short reductions (m <= SHORT): one *thread* per output element folds its m inputs
    serially. A block per output would leave most of its threads idle (and, in the simulator,
    pay a barrier per step for nothing); e.g. summing a gradient over a batch of 2."""
    combine = COMBINE[op]
    acc_t = numba.from_dtype(acc)
    start = acc.type(identity(op, acc))

    @cuda.jit
    def kernel(out, x, x_off, kept_shape, kept_strides, red_shape, red_strides, m, n_out):
        o = cuda.grid(1)
        if o < n_out:
            base = strided_offset(o, kept_shape, kept_strides, x_off)
            total = acc_t(start)
            for j in range(m):
                total = combine(total, acc_t(x[strided_offset(j, red_shape, red_strides, base)]))
            out[o] = total
    return kernel


_short_kernel = kernel_cache(_build_short)
SHORT = 8 if SIMULATOR else 32


def launch(op, out, x, x_off, kept_shape, kept_strides, red_shape, red_strides, n_out, acc):
    """out[o] = fold(op) of x over the reduced axes, for each of the n_out kept positions."""
    m = 1
    for s in red_shape:
        m *= s
    if m <= SHORT and n_out > 1:
        if n_out:
            _short_kernel(op, np.dtype(acc))[grid_for(n_out)](out, x, x_off, kept_shape, kept_strides,
                                                                        red_shape, red_strides, m, n_out)
        return
    threads = REDUCE_THREADS
    while threads > 1 and threads // 2 >= m:   # no idle half-blocks for short rows
        threads //= 2
    if n_out == 0:
        return
    _kernel(op, np.dtype(acc), threads)[n_out, threads](out, x, x_off, kept_shape, kept_strides,
                                                        red_shape, red_strides, m)


@cuda.jit(device=True)
def _better(v, i, w, j, largest):
    """Is (w at j) a better arg-extremum than (v at i)? nan beats everything and ties go to
    the first index, as np.argmax / np.argmin."""
    if v != v:
        return w != w and j < i
    if w != w:
        return True
    if w == v:
        return j < i
    return (w > v) == largest


def _build_arg(acc, threads, largest):
    acc_t = numba.from_dtype(acc)

    @cuda.jit
    def kernel(out, x, x_off, kept_shape, kept_strides, red_len, red_stride):
        o = cuda.blockIdx.x
        t = cuda.threadIdx.x
        base = strided_offset(o, kept_shape, kept_strides, x_off)
        best_i = -1
        best_v = acc_t(0)
        j = t
        while j < red_len:
            v = acc_t(x[base + j * red_stride])
            if best_i < 0 or _better(best_v, best_i, v, j, largest):
                best_v = v
                best_i = j
            j += threads
        vals = cuda.shared.array(threads, acc_t)
        idx = cuda.shared.array(threads, numba.int64)
        vals[t] = best_v
        idx[t] = best_i
        cuda.syncthreads()
        step = threads // 2
        while step > 0:
            if t < step and idx[t + step] >= 0:
                if idx[t] < 0 or _better(vals[t], idx[t], vals[t + step], idx[t + step], largest):
                    vals[t] = vals[t + step]
                    idx[t] = idx[t + step]
            cuda.syncthreads()
            step //= 2
        if t == 0:
            out[o] = idx[0]
    return kernel


_arg_kernel = kernel_cache(_build_arg)


def launch_arg(largest, out, x, x_off, kept_shape, kept_strides, red_len, red_stride, n_out, acc):
    """out[o] = index of the max (largest) or min along one axis of length red_len."""
    threads = REDUCE_THREADS
    while threads > 1 and threads // 2 >= red_len:
        threads //= 2
    if n_out == 0:
        return
    _arg_kernel(np.dtype(acc), threads, bool(largest))[n_out, threads](out, x, x_off, kept_shape, kept_strides,
                                                                       red_len, red_stride)
