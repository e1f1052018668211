"""The special functions for cuda arrays (``CudaNamespace`` inherits them): lgamma, erfc, erfinv,
digamma, trigamma, i0, i1, polygamma, Hurwitz's zeta and nextafter, each one launch of the generic
map or zip kernel with the device function of minidl/kernels/cuda/special.py (the math is there).
They are not NumPy functions (NumPy has none of them but i0 and nextafter); minidl's special ops
call them on device arrays where the CPU computes the same math with NumPy on the host."""
import numbers

import numpy as np

from ...kernels.cuda import map as _map
from . import bfloat16 as _bf16
from .array import CudaArray, asarray
from .elementwise import _binary, _copy_into, _ufunc1


def _floating(op, *arrays):
    for a in arrays:
        if not isinstance(a, CudaArray):
            raise TypeError(f"cuda {op}: expected cuda arrays, got {type(a).__name__}")
        if a.dtype.kind not in "fV":
            raise TypeError(f"cuda {op}: expected a floating array, got dtype {a.dtype}")


def _polygamma(n, x):
    """psi^(n)(x) (n >= 0): the map kernel with n as its scalar."""
    x = asarray(x)
    _floating("polygamma", x)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"cuda polygamma: expected an integer n >= 0, got {n!r}")
    if _bf16.involves(x) or x.dtype == np.float16:   # computed in float32, rounded once
        out = CudaArray.empty(x.shape, x.dtype)
        _copy_into(out, _polygamma(n, x.astype(np.float32)))
        return out
    out = CudaArray.empty(x.shape, x.dtype)
    xb, shape, xst, xoff = x._kernel_view()
    ob, _, ost, ooff = out._kernel_view()
    _map.launch("polygamma", ob, ost, ooff, xb, xst, xoff, shape, np.float64(n))   # nothing runs when empty
    return out


def _zeta(x, q):
    x, q = asarray(x), asarray(q)
    _floating("zeta", x, q)
    return _binary("zeta", x, q)


def _nextafter(a, b):
    """The next float after a towards b: one device function per precision (the step depends on it)."""
    a, b = asarray(a), asarray(b)
    _floating("nextafter", a, b)
    dt = np.result_type(a.dtype, b.dtype)
    if dt not in (np.float32, np.float64):
        raise NotImplementedError(f"numpy.nextafter is not implemented for device 'cuda' for dtype {dt} "
                                  "(float32 and float64 only)")
    return _binary("nextafter_f32" if dt == np.float32 else "nextafter_f64", a.astype(dt, copy=False),
                   b.astype(dt, copy=False))


class SpecialNumPy:
    lgamma, erfc, erfinv, digamma, trigamma, i0, i1 = (_ufunc1(n) for n in (
        "lgamma", "erfc", "erfinv", "digamma", "trigamma", "i0", "i1"))
    polygamma = staticmethod(_polygamma)
    zeta = staticmethod(_zeta)
    nextafter = staticmethod(_nextafter)

