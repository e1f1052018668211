"""Device arrays made from values: filled arrays, ``arange`` (written by a kernel, only the
length is worked out on the host) and cached scalar constants."""
import builtins
import math
import numbers

import numpy as np

from ...kernels.cuda import arange as _arange_kernel
from ...kernels.cuda.bfloat16 import is_bfloat16
from .array import CudaArray
from .elementwise import _copy_into


def _full(shape, fill_value, dtype=None):
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    dt = np.dtype(dtype) if dtype is not None else np.asarray(fill_value).dtype
    out = CudaArray.empty(shape, dt)
    if out.size:
        _copy_into(out, fill_value)
    return out


def _arange(*args, dtype=None):
    """np.arange's values, written by a kernel (only the length is worked out on the host)."""
    dt = np.dtype(dtype) if dtype is not None else np.result_type(*args)
    if is_bfloat16(dt):   # the values in float32, each rounded once
        return _arange(*args, dtype=np.float32).astype(dt)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    if step == 0:
        raise ZeroDivisionError("arange: step must not be zero")
    n = builtins.max(0, math.ceil((stop - start) / step))
    out = CudaArray.empty((n,), dt)
    _arange_kernel.launch(out._buf, dt.type(start), dt.type(step))
    return out


_CONSTS = {}


def _const(value, dtype):
    """A cached 0-d device array holding ``value`` (scalars in where/scatter need an array)."""
    key = (value, np.dtype(dtype))
    c = _CONSTS.get(key)
    if c is None:
        if len(_CONSTS) > 1024:   # many distinct constants: keep the cache bounded
            _CONSTS.clear()
        c = _CONSTS[key] = CudaArray.from_host(np.asarray(value, dtype=dtype))
        c._writeable = False
    return c
