"""Copies into and out of bfloat16 cuda arrays, and the float32 view of the world the computing
functions take of them (array.py's docstring: bfloat16 is kept as its uint16 bits).

``convert_into(dst, src)`` is ``dst[...] = src`` (broadcast, cast) when either side is bfloat16:
a bit copy between two bfloat16 arrays, one strided conversion kernel between bfloat16 and
float32, and a float32 step in between for the other dtypes (float64 -> bfloat16 rounds once,
through float32 rounded to odd: kernels/cuda/bfloat16.py). ``widen`` is the float32 copy an op
computes on, ``narrow`` rounds a float32 result back.
"""
import numpy as np

from ...kernels.cuda import bfloat16 as _k
from ...kernels.cuda import map as _map
from ...kernels.cuda.bfloat16 import BFLOAT16, bits_of, is_bfloat16  # noqa: F401  (re-exported)
from .array import CudaArray

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def involves(*values):
    """True when any of the values is a bfloat16 CudaArray (or a bfloat16 dtype)."""
    for v in values:
        dt = v.dtype if isinstance(v, CudaArray) else (v if isinstance(v, np.dtype) else None)
        if dt is not None and is_bfloat16(dt):
            return True
    return False


def _view(a, shape):
    """(buffer, strides over ``shape``, offset) of ``a`` read broadcast to ``shape``."""
    return a._buf, (a._strides_for(shape) if shape else (0,)), a._off


def convert_into(dst, src):
    """dst[...] = src for CudaArrays of which one (at least) is bfloat16; src broadcasts to dst."""
    shape = dst.shape
    if src.shape != shape and np.broadcast_shapes(src.shape, shape) != shape:
        raise ValueError(f"could not broadcast input array from shape {src.shape} into shape {shape}")
    ob, shape_k, ost, ooff = dst._kernel_view()
    if is_bfloat16(dst.dtype):
        if is_bfloat16(src.dtype):   # the bits are the value
            sb, sst, soff = _view(src, shape)
            _map.launch("identity", ob, ost, ooff, sb, sst, soff, shape_k, _k.STORAGE.type(0))
            return
        if src.dtype == _F64:
            t = CudaArray.empty(shape, _F32)
            tb, _, tst, toff = t._kernel_view()
            sb, sst, soff = _view(src, shape)
            _map.launch("identity", tb, tst, toff, sb, sst, soff, shape_k, _F32.type(0))
            _k.round_to_odd(t._buf, sb, sst, soff, shape_k)
            src = t
        elif src.dtype != _F32:
            t = CudaArray.empty(src.shape, _F32)
            tb, tshape, tst, toff = t._kernel_view()
            xb, _, xst, xoff = src._kernel_view()
            _map.launch("identity", tb, tst, toff, xb, xst, xoff, tshape, _F32.type(0))
            src = t
        sb, sst, soff = _view(src, shape)
        _k.narrow(ob, ost, ooff, sb.view(np.uint32), sst, soff, shape_k)
        return
    # bfloat16 -> another dtype: exact to float32, then NumPy's cast from float32
    if dst.dtype == _F32:
        sb, sst, soff = _view(src, shape)
        _k.widen(ob.view(np.uint32), ost, ooff, sb, sst, soff, shape_k)
        return
    t = widen(src)
    tb, tst, toff = _view(t, shape)
    _map.launch("identity", ob, ost, ooff, tb, tst, toff, shape_k, dst.dtype.type(0))


def fill(dst, value):
    """Every element of the bfloat16 array ``dst`` set to ``value`` (rounded as ml_dtypes)."""
    ob, shape_k, ost, ooff = dst._kernel_view()
    _map.launch("identity", ob, ost, ooff, ob, ost, ooff, shape_k, bits_of(value), scalar_first=True)


def widen(x):
    """A float32 copy of the bfloat16 array ``x`` (contiguous, x's shape); other arrays as they are."""
    if not is_bfloat16(x.dtype):
        return x
    out = CudaArray.empty(x.shape, _F32)
    convert_into(out, x)
    return out


def narrow(x32, out=None):
    """The float32 (or other) array ``x32`` rounded to bfloat16, into ``out`` when given."""
    if out is None:
        out = CudaArray.empty(x32.shape, BFLOAT16)
    convert_into(out, x32)
    return out


def weak_scalar(c, array_dtype):
    """A Python scalar operand of a bfloat16 array, as NumPy's weak-scalar rule (NEP 50) sees it:
    cast to bfloat16 first (``x * 0.1`` multiplies by bfloat16(0.1)), then exactly to float32."""
    if isinstance(c, bool) or not is_bfloat16(array_dtype):
        return c
    return float(np.asarray(c).astype(BFLOAT16))
