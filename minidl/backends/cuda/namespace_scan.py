"""Scans, products, flips and scatters along an axis for cuda arrays: NumPy's cumsum, cumprod,
prod, logaddexp (with ``.accumulate``), flip and unique, einsum (backends/cuda/einsum.py), and
``scatter_along``, the device's form of torch.scatter's write (no NumPy name: ops/scatter_along.py
calls it where the CPU runs NumPy's ufunc.at). ``CudaNamespace`` inherits them.

The scans run kernels/cuda/scan.py (one thread per row), prod the ``reduce`` kernel, and
scatter_along kernels/cuda/scatter.py. bfloat16 (a uint16 buffer: backends/cuda/array.py) and
float16 are computed on float32 copies and rounded once, as the CPU path does for 2-byte floats.
"""
import numbers

import numpy as np

from ...kernels.cuda import scan as _scan
from ...kernels.cuda import scatter as _scatter
from . import bfloat16 as _bf16
from .array import CudaArray, asarray
from .creation import _full
from .einsum import einsum as _einsum
from .elementwise import _binary, _copy_into, _unary
from .indexing import _value_for
from .reduction import _axes, _reduction


def _widened(x):
    """x as the kernels can read it: 2-byte floats (float16, bfloat16) as float32 copies."""
    return x.astype(np.float32) if x.dtype.itemsize == 2 and (x.dtype.kind == "f" or _bf16.involves(x)) else x


def _accumulate(op, x, axis, dtype, out=None):
    """The running ``op`` of x along ``axis`` (None: of the flattened x), NumPy's default dtype
    rule: integers and bools in int64 for sum and prod, others in their own dtype."""
    x = asarray(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    if dtype is None:
        dtype = np.int64 if x.dtype.kind in "biu" and op != "logaddexp" else x.dtype
    dtype = np.dtype(dtype)
    if x.ndim == 0:
        x = x.reshape(1)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(axis, x.ndim)
    wide = _widened(x)
    y = _scan.scan(op, wide, axis, np.float32 if dtype != wide.dtype and dtype.itemsize == 2 else dtype)
    if y.dtype != dtype:
        y = y.astype(dtype)
    if out is not None:
        _copy_into(out, y)
        return out
    return y


def cumsum(x, axis=None, dtype=None, out=None):
    return _accumulate("sum", x, axis, dtype, out)


def cumprod(x, axis=None, dtype=None, out=None):
    return _accumulate("prod", x, axis, dtype, out)


def prod(x, axis=None, dtype=None, keepdims=False, out=None):
    """The product over ``axis`` (the ``reduce`` kernel's "prod"): integers and bools in int64
    unless ``dtype`` says otherwise, an empty product 1."""
    x = asarray(x)
    if dtype is not None and np.dtype(dtype) != x.dtype:
        x = x.astype(dtype)
    axes = _axes(axis, x.ndim)
    if x.size == 0:   # empty inputs never reach a kernel
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if keepdims else \
            tuple(n for d, n in enumerate(x.shape) if d not in axes)
        y = _full(shape, 1, np.int64 if x.dtype.kind in "biu" and dtype is None else x.dtype)
    else:
        y = _reduction("prod", x, axis, keepdims)
    if out is not None:
        _copy_into(out, y)
        return out
    return y


class _LogAddExp:
    """``xp.logaddexp``: ln(e**a + e**b) elementwise (max + log1p(exp(-|a - b|)), nothing overflows),
    and ``.accumulate`` along an axis (the scan kernel)."""

    def __call__(self, a, b, out=None):
        m = _binary("maximum", a, b)
        d = _unary("absolute", _binary("subtract", a, b))
        y = m + _unary("log1p", _unary("exp", -d))
        from .indexing import _where
        y = _where(_binary("equal", a, b), m + np.log(2.0), y)   # inf with inf: a - b is nan
        if out is not None:
            _copy_into(out, y)
            return out
        return y

    def accumulate(self, x, axis=0, dtype=None, out=None):
        x = asarray(x)
        if x.dtype.kind not in "fV":
            raise TypeError(f"logaddexp.accumulate: expected a floating array, got {x.dtype}")
        return _accumulate("logaddexp", x, axis, dtype, out)


def flip(x, axis=None):
    """x reversed along ``axis`` (all axes if None): a view with negated strides."""
    x = asarray(x)
    axes = _axes(axis, x.ndim)
    return x[tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim))]


def unique(x):
    """The sorted distinct values of x (computed on the host, uploaded: a small index's)."""
    return CudaArray.from_host(np.unique(asarray(x).copy_to_host()))


def scatter_along(out, axis, idx, values, how):
    """out[c(p)] (how)= values[p] for every position p of ``idx`` along ``axis``, in place
    (kernels/cuda/scatter.py): ``how`` is "set", "add", "multiply", "max" or "min"; values is a
    CudaArray or a number, cast to out's dtype and broadcast to idx's shape; idx (a CudaArray or
    an ndarray, uploaded) has out's number of dims, every value checked against out.shape[axis]
    before the kernel runs."""
    idx = idx if isinstance(idx, CudaArray) else CudaArray.from_host(np.asarray(idx))
    if not isinstance(axis, numbers.Integral) or not -max(out.ndim, 1) <= axis < max(out.ndim, 1):
        raise np.exceptions.AxisError(axis, out.ndim)
    axis %= max(out.ndim, 1)
    if _bf16.involves(out) or out.dtype == np.float16:   # combined in float32, rounded back once
        wide = out.astype(np.float32)
        v = values if not isinstance(values, CudaArray) else values.astype(np.float32)
        scatter_along(wide, axis, idx, v, how)
        _copy_into(out, wide)
        return out
    v = _value_for(out, values, idx.shape)
    return _scatter.scatter_along(out, axis, idx, v, how)


class ScanNumPy:
    """The functions above, as the namespace's static methods."""

    cumsum = staticmethod(cumsum)
    cumprod = staticmethod(cumprod)
    prod = staticmethod(prod)
    logaddexp = _LogAddExp()
    flip = staticmethod(flip)
    unique = staticmethod(unique)
    einsum = staticmethod(_einsum)
    scatter_along = staticmethod(scatter_along)
