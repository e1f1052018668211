"""Reductions (sum / mean / max / min / argmax / argmin over any axes: the ``reduce`` kernel, one
block per output element) and matmul (the ``matmul`` kernel: shared-memory tiles, broadcast
batch dims), accumulating in float32 for float16/float32 and float64 for float64."""
import builtins
import operator

import numpy as np

from ...kernels.cuda import matmul as _matmul
from ...kernels.cuda import reduce as _reduce
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
    axes = _axes(axis, x.ndim)
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(x.shape[d] for d in kept)
    if op == "sum" and x.dtype.kind in "biu":
        dt = np.dtype(np.int64) if x.dtype.kind != "u" else np.dtype(np.uint64)
    else:
        dt = x.dtype
    if not axes:
        out = x.astype(dt)
    else:
        if op != "sum" and builtins.any(x.shape[d] == 0 for d in axes):
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
    axes = _axes(axis, x.ndim)
    s = _reduction("sum", x, axis, keepdims)
    out = s / builtins.max(_prod(x.shape[d] for d in axes), 1) if axes else s.astype(np.result_type(x.dtype, 1.0))
    return out if dtype is None else out.astype(dtype, copy=False)


def matmul(a, b, out=None):
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
    res = CudaArray.empty(batch + (M, N), dt)
    bshape = batch or (1,)
    a_b = CudaArray._strides_for(a2._view(a2.shape[:-2], a2._st[:-2]), bshape) if batch else (0,)
    b_b = CudaArray._strides_for(b2._view(b2.shape[:-2], b2._st[:-2]), bshape) if batch else (0,)
    _matmul.launch(res._buf, a2._buf, a2._off, a_b, a2._st[-2], a2._st[-1], b2._buf, b2._off, b_b,
                   b2._st[-2], b2._st[-1], bshape, M, N, K, _reduce.accumulator_dtype(dt))
    shape = batch + ((M,) if a.ndim > 1 else ()) + ((N,) if b.ndim > 1 else ())
    res = res.reshape(shape)
    if out is not None:
        _copy_into(_out_array(out, shape, out.dtype), res)
        return out
    return res
