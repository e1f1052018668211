"""Elementwise ops on cuda arrays: NumPy's dtype rules for their results, operands and ``out=``
checks, and the launches of the ``map`` (one operand and maybe a scalar) and ``zip`` (two,
broadcast) kernels; plus the broadcasting copy every assignment is built on."""
import numbers

import numpy as np

from ...kernels.cuda import map as _map
from ...kernels.cuda import zip as _zip
from . import bfloat16 as _bf16
from .array import CudaArray

_DTYPES = {}   # (op, dtype a, dtype or Python type of b, scalar first) -> result dtype (NumPy's rules)


def _result_dtype(name, a, b):
    """The dtype NumPy gives ``np.<name>(a, b)``; a Python number is a *weak* scalar (NEP 50),
    so float32 array + 2.0 stays float32."""
    ka = a.dtype if isinstance(a, CudaArray) else type(a)
    kb = b.dtype if isinstance(b, CudaArray) else type(b)
    key = (name, ka, kb)
    dt = _DTYPES.get(key)
    if dt is None:
        sa = np.ones(1, ka) if isinstance(a, CudaArray) else ka(1)
        sb = np.ones(1, kb) if isinstance(b, CudaArray) else kb(1)
        with np.errstate(all="ignore"):
            dt = _DTYPES[key] = np.dtype(getattr(np, _SAME_DTYPE_AS.get(name, name))(sa, sb).dtype)
    return dt


def _operand(x, other):
    """A CudaArray or a Python scalar; anything else is a clear device error."""
    if isinstance(x, CudaArray):
        return x
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item()
    if isinstance(x, np.ndarray):
        raise TypeError(f"cuda: expected all arrays on the same device, but found cuda and cpu "
                        f"(a NumPy array of shape {x.shape}); move it with Tensor.to('cuda')")
    raise TypeError(f"cuda: unsupported operand of type {type(x).__name__} (with a {type(other).__name__})")


def _out_array(out, shape, dtype):
    if out is None:
        return CudaArray.empty(shape, dtype)
    if not isinstance(out, CudaArray):
        raise TypeError(f"cuda: out= must be a cuda array, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"cuda: out has shape {out.shape} but the result has shape {tuple(shape)}")
    if not out._writeable:
        raise ValueError("cuda: out= is a read-only (broadcast) view")
    return out


def _same_view(a, b):
    return a._buf is b._buf and a._off == b._off and a._st == b._st and a.shape == b.shape


def _unaliased(x, out):
    """x, or a copy of it when it shares memory with ``out`` in another layout (``acc += acc.T``):
    a thread could otherwise read an element another thread already overwrote."""
    if out is not None and isinstance(x, CudaArray) and x._buf is out._buf and not _same_view(x, out):
        return x.copy()
    return x


def _binary(name, a, b, out=None):
    a, b = _unaliased(_operand(a, b), out), _unaliased(_operand(b, a), out)
    dt = _result_dtype(name, a, b)
    if _bf16.involves(a, b, out):
        return _bf16_binary(name, a, b, dt, out)
    if isinstance(a, CudaArray) and isinstance(b, CudaArray):
        shape = np.broadcast_shapes(a.shape, b.shape)
        o = _out_array(out, shape, dt)
        ob, shape_k, ost, ooff = o._kernel_view()
        a_st = a._strides_for(shape) if shape else (0,)
        b_st = b._strides_for(shape) if shape else (0,)
        _zip.launch(name, ob, ost, ooff, a._buf, a_st, a._off, b._buf, b_st, b._off, shape_k)
        return o
    x, c, scalar_first = (a, b, False) if isinstance(a, CudaArray) else (b, a, True)
    c = np.result_type(x.dtype, c).type(c)
    o = _out_array(out, x.shape, dt)
    xb, shape, xst, xoff = x._kernel_view()
    ob, _, ost, ooff = o._kernel_view()
    _map.launch(name, ob, ost, ooff, xb, xst, xoff, shape, c, scalar_first)
    return o


def _bf16_binary(name, a, b, dt, out):
    """``name(a, b)`` with a bfloat16 operand or out=: computed on float32 copies (a scalar is first
    rounded to bfloat16, NumPy's weak-scalar rule) and rounded once to ``dt`` (array.py's docstring)."""
    wa = _bf16.widen(a) if isinstance(a, CudaArray) else _bf16.weak_scalar(a, b.dtype)
    wb = _bf16.widen(b) if isinstance(b, CudaArray) else _bf16.weak_scalar(b, a.dtype)
    if not _bf16.involves(dt, out):   # a float32 / bool result: written straight
        return _binary(name, wa, wb, out)
    r = _binary(name, wa, wb)
    o = _out_array(out, r.shape, dt)
    _copy_into(o, r)
    return o


_UNARY_DTYPES = {}
# functions NumPy lacks (or whose NumPy version is no ufunc): the ufunc whose output dtype they share
_SAME_DTYPE_AS = {"erf": "sqrt", "erfc": "sqrt", "erfinv": "sqrt", "lgamma": "sqrt", "digamma": "sqrt",
                  "trigamma": "sqrt", "i0": "sqrt", "i1": "sqrt", "polygamma": "sqrt", "zeta": "arctan2",
                  "nextafter_f32": "nextafter", "nextafter_f64": "nextafter"}


def _unary(name, x, out=None):
    x = _unaliased(_operand(x, None), out)
    if not isinstance(x, CudaArray):
        return getattr(np, name)(x)
    dt = _UNARY_DTYPES.get((name, x.dtype))
    if dt is None:
        with np.errstate(all="ignore"):
            like = getattr(np, _SAME_DTYPE_AS.get(name, name))
            dt = _UNARY_DTYPES[(name, x.dtype)] = np.dtype(like(np.ones(1, x.dtype)).dtype)
    if _bf16.involves(x, out):   # computed in float32, rounded once (array.py's docstring)
        r = _unary(name, _bf16.widen(x))
        if out is None and not _bf16.involves(dt):
            return r
        o = _out_array(out, x.shape, dt)
        _copy_into(o, r)
        return o
    o = _out_array(out, x.shape, dt)
    xb, shape, xst, xoff = x._kernel_view()
    ob, _, ost, ooff = o._kernel_view()
    _map.launch(name, ob, ost, ooff, xb, xst, xoff, shape, x.dtype.type(0))
    return o


def _logic(name, a, b):
    for v in (a, b):
        if isinstance(v, CudaArray) and v.dtype.kind != "b":
            raise NotImplementedError(f"cuda: & and | are implemented for bool arrays only (logical and/or), "
                                      f"got dtype {v.dtype}")
    return _binary(name, a, b)


def _logic_not(x):
    if x.dtype.kind != "b":
        raise NotImplementedError(f"cuda: ~ is implemented for bool arrays only, got dtype {x.dtype}")
    return _unary("logical_not", x)


def _copy_into(dst, src):
    """dst[...] = src, src broadcast to dst's shape and cast to its dtype."""
    shape = dst.shape
    if _bf16.involves(dst, src):   # bfloat16 storage: bit copies and conversion kernels
        if isinstance(src, CudaArray):
            _bf16.convert_into(dst, src)
        else:
            _bf16.fill(dst, src)
        return
    ob, shape_k, ost, ooff = dst._kernel_view()
    if isinstance(src, CudaArray):
        if src.shape != shape and np.broadcast_shapes(src.shape, shape) != shape:
            raise ValueError(f"could not broadcast input array from shape {src.shape} into shape {shape}")
        sst = src._strides_for(shape) if shape else (0,)
        _map.launch("identity", ob, ost, ooff, src._buf, sst, src._off, shape_k, dst.dtype.type(0))
    else:   # fill with a scalar: identity(c, x) returns c
        _map.launch("identity", ob, ost, ooff, ob, ost, ooff, shape_k, dst.dtype.type(src), scalar_first=True)


def _assign(target, value):
    if isinstance(value, np.ndarray) and value.ndim > 0:
        value = CudaArray.from_host(value)   # an explicit host -> device copy (e.g. load_state_dict)
    elif isinstance(value, (np.ndarray, np.generic)):
        value = value.item()
    _copy_into(target, _unaliased(value, target))   # x[1:] = x[:-1] reads before it writes


# a namespace class's NumPy function of one or two operands, as a static method on the generic kernels
def _ufunc1(name):
    def f(x, out=None):
        return _unary(name, x, out)
    f.__name__ = name
    return staticmethod(f)


def _ufunc2(name):
    def f(a, b, out=None):
        return _binary(name, a, b, out)
    f.__name__ = name
    return staticmethod(f)
