"""Reductions (sum / prod / mean / max / min / argmax / argmin over any axes: the ``reduce`` kernel, one
block per output element) and matmul (the ``matmul`` kernel: shared-memory tiles, broadcast
batch dims), accumulating in float32 for float16/bfloat16/float32 and float64 for float64 (the reductions
widen bfloat16 to float32 and round the result once: array.py's docstring; the matmul kernel
reads float16 and bfloat16 operands as they are and rounds its float32 sums once)."""
import builtins
import contextlib
import operator
import threading

import numpy as np

from ...kernels.cuda import matmul as _matmul
from ...kernels.cuda import reduce as _reduce
from . import bfloat16 as _bf16
from .array import CudaArray, _prod, expand_dims
from .elementwise import _copy_into, _operand, _out_array

def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        a = operator.index(a)
        if not -ndim <= a < max(ndim, 1):
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(set(out))) if ndim else ()


def _reduction(op, x, axis, keepdims):
    if _bf16.involves(x):   # accumulated in float32, rounded once
        return _bf16.narrow(_reduction(op, _bf16.widen(x), axis, keepdims))
    axes = _axes(axis, x.ndim)
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(x.shape[d] for d in kept)
    if op in ("sum", "prod") and x.dtype.kind in "biu":
        dt = np.dtype(np.int64) if x.dtype.kind != "u" else np.dtype(np.uint64)
    else:
        dt = x.dtype
    if not axes:
        out = x.astype(dt)
    else:
        if op not in ("sum", "prod") and builtins.any(x.shape[d] == 0 for d in axes):
            raise ValueError(f"zero-size array to reduction operation {op} which has no identity")
        out = CudaArray.empty(out_shape, dt)
        kshape = out_shape or (1,)
        kstrides = tuple(x._st[d] for d in kept) or (0,)
        _reduce.launch(op, out._buf, x._buf, x._off, kshape, kstrides, tuple(x.shape[d] for d in axes),
                       tuple(x._st[d] for d in axes), out.size, _reduce.accumulator_dtype(x.dtype))
    if keepdims:
        out = out.reshape(tuple(1 if d in axes else n for d, n in enumerate(x.shape)))
    return out


def _arg_reduction(largest, x, axis, keepdims):
    """Index of the max / min along one axis (or of the flattened array), first one on ties."""
    if axis is None:
        flat = x.reshape(-1)
        out = _arg_reduction(largest, flat, 0, False)
        return out.reshape((1,) * x.ndim) if keepdims else out
    if _bf16.involves(x):   # float32 holds every bfloat16 value: the same order, the same index
        return _arg_reduction(largest, _bf16.widen(x), axis, keepdims)
    (a,) = _axes(axis, x.ndim)
    if x.shape[a] == 0:
        raise ValueError("attempt to get argmax of an empty sequence")
    kept = [d for d in range(x.ndim) if d != a]
    out = CudaArray.empty(tuple(x.shape[d] for d in kept), np.int64)
    _reduce.launch_arg(largest, out._buf, x._buf, x._off, tuple(x.shape[d] for d in kept) or (1,),
                       tuple(x._st[d] for d in kept) or (0,), x.shape[a], x._st[a], out.size,
                       _reduce.accumulator_dtype(x.dtype) if x.dtype.kind == "f" else x.dtype)
    return expand_dims(out, a) if keepdims else out


def mean(x, axis=None, keepdims=False, dtype=None):
    if _bf16.involves(x):   # the sum and the division in float32, one rounding (as NumPy's mean)
        out = _bf16.narrow(mean(_bf16.widen(x), axis, keepdims))
        return out if dtype is None else out.astype(dtype, copy=False)
    axes = _axes(axis, x.ndim)
    s = _reduction("sum", x, axis, keepdims)
    out = s / builtins.max(_prod(x.shape[d] for d in axes), 1) if axes else s.astype(np.result_type(x.dtype, 1.0))
    return out if dtype is None else out.astype(dtype, copy=False)


_SUMS = threading.local()   # .depth > 0 inside float32_sums() on this thread


@contextlib.contextmanager
def float32_sums():
    """Inside: ``matmul`` of float16/bfloat16 operands, with neither ``dtype`` nor ``out``, returns
    the kernel's float32 sums unrounded, as ``dtype=np.float32`` does: the value the same call on
    float32 copies of the operands returns, without the copies. minidl/ops/low_precision.py runs
    the GEMM ops that take their operands in the low dtype on cuda inside it, so that their code,
    written for float32 arrays, computes the same float32 values."""
    _SUMS.depth = getattr(_SUMS, "depth", 0) + 1
    try:
        yield
    finally:
        _SUMS.depth -= 1


def _low(dt):
    return dt.itemsize == 2 and (dt.kind == "f" or _bf16.involves(dt))


def matmul(a, b, out=None, dtype=None):
    """NumPy's matmul; ``dtype`` is the result's dtype (NumPy's keyword). float16 and bfloat16
    operands reach the kernel as they are (2 bytes an element): float32 products and sums, and
    one rounding to the result's dtype, so ``dtype=np.float32`` returns the float32 sums of
    low-precision operands unrounded (and so does a call inside ``float32_sums``)."""
    a, b = _operand(a, b), _operand(b, a)
    if not (isinstance(a, CudaArray) and isinstance(b, CudaArray)):
        raise ValueError("matmul: Input operand does not have enough dimensions (a scalar)")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    a2 = a.reshape(1, a.shape[0]) if a.ndim == 1 else a
    b2 = b.reshape(b.shape[0], 1) if b.ndim == 1 else b
    M, K = a2.shape[-2:]
    K2, N = b2.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: mismatch in core dimension: shapes {a.shape} and {b.shape} ({K} != {K2})")
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    dt = np.result_type(a.dtype, b.dtype)
    if dtype is None and out is None and getattr(_SUMS, "depth", 0) and (_low(a.dtype) or _low(b.dtype)):
        dtype = np.dtype(np.float32)
    if dtype is not None:
        dtype = np.dtype(dtype)
        acc = _reduce.accumulator_dtype(np.result_type(dt, dtype))
    else:
        acc = _reduce.accumulator_dtype(dt)
        if out is not None and _bf16.involves(dt):
            dtype = np.dtype(np.float32)   # out gets the float32 sums, rounded once to its dtype
    res_dt = dt if dtype is None else dtype
    if _bf16.involves(res_dt) and acc != np.float32:   # a float64 sum: rounded once from float64
        r = matmul(a, b, dtype=np.float64)
        if out is not None:
            _copy_into(_out_array(out, r.shape, out.dtype), r)
            return out
        return _bf16.narrow(r)
    res = CudaArray.empty(batch + (M, N), res_dt)
    bshape = batch or (1,)
    a_b = CudaArray._strides_for(a2._view(a2.shape[:-2], a2._st[:-2]), bshape) if batch else (0,)
    b_b = CudaArray._strides_for(b2._view(b2.shape[:-2], b2._st[:-2]), bshape) if batch else (0,)
    _matmul.launch(res._buf, a2._buf, a2._off, a_b, a2._st[-2], a2._st[-1], b2._buf, b2._off, b_b,
                   b2._st[-2], b2._st[-1], bshape, M, N, K, acc,
                   (_bf16.involves(a.dtype), _bf16.involves(b.dtype), _bf16.involves(res_dt)))
    shape = batch + ((M,) if a.ndim > 1 else ()) + ((N,) if b.ndim > 1 else ())
    res = res.reshape(shape)
    if out is not None:
        _copy_into(_out_array(out, shape, out.dtype), res)
        return out
    return res
