"""``CUDA_NUMPY``: the NumPy subset minidl.ops call, for cuda arrays (the "cuda" backend's
``xp``), each function built on the generic kernels; a NumPy function it lacks raises
NotImplementedError naming it and the device. Importing this module also wires the array
type's computing methods (``array.IMPL``) to their implementations."""
import builtins
import math
import numbers

import numpy as np

from ...kernels.cuda import gather as _gather
from . import array as _array_module
from .array import CudaArray, asarray, broadcast_to, expand_dims
from .bfloat16 import BFLOAT16, is_bfloat16
from .creation import _arange, _full
from .elementwise import _binary, _copy_into, _logic, _logic_not, _operand, _ufunc1, _ufunc2, _unary
from .namespace_more import MoreNumPy
from .namespace_scan import ScanNumPy
from .namespace_special import SpecialNumPy
from .namespace_strided import StridedNumPy
from .numpy_protocol import array_function, array_ufunc
from .indexing import (_axis_index, _offsets, _scatter, _scatter_axis, _value_for, _where, getitem,
                       setitem)
from .reduction import _arg_reduction, _reduction, matmul, mean


class _AddUfunc:
    """``xp.add`` with NumPy's ``add.at`` (unbuffered scatter-add: repeated indices add up)."""

    def __call__(self, a, b, out=None):
        return _binary("add", a, b, out)

    def at(self, x, index, values):
        if is_bfloat16(x.dtype):   # added on a float32 copy (offsets are of that copy), rounded back once
            x32 = x.astype(np.float32)
            self.at(x32, index, values)
            _copy_into(x, x32)
            return
        on_axis = _axis_index(x, index)
        if on_axis is not None:
            _scatter_axis(x, *on_axis, values, add=True)
        else:
            _scatter(x, _offsets(x, index), values, add=True)


def _array(a, dtype=None, copy=True):
    if isinstance(a, CudaArray) and copy:
        return a.astype(dtype or a.dtype, copy=True)
    return asarray(a, dtype)


def _pad(x, pad_width, mode="constant", constant_values=0):
    if mode != "constant":
        raise NotImplementedError(f"numpy.pad(mode={mode!r}) is not implemented for device 'cuda' (only 'constant')")
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    out = _full(tuple(n + int(lo) + int(hi) for n, (lo, hi) in zip(x.shape, widths)), constant_values, x.dtype)
    _copy_into(out[tuple(slice(int(lo), int(lo) + n) for n, (lo, hi) in zip(x.shape, widths))], x)
    return out


def _concatenate(arrays, axis=0):
    arrays = [asarray(a) for a in arrays]
    if axis is None:
        arrays, axis = [a.reshape(-1) for a in arrays], 0
    ref = arrays[0]
    axis = axis % ref.ndim
    for a in arrays[1:]:
        if a.ndim != ref.ndim or a.shape[:axis] + a.shape[axis + 1:] != ref.shape[:axis] + ref.shape[axis + 1:]:
            raise ValueError(f"concatenate: all the input array dimensions except for the concatenation axis must "
                             f"match exactly, got shapes {ref.shape} and {a.shape} along axis {axis}")
    dt = np.result_type(*[a.dtype for a in arrays])
    shape = list(ref.shape)
    shape[axis] = builtins.sum(a.shape[axis] for a in arrays)
    out = CudaArray.empty(shape, dt)
    start, index = 0, [slice(None)] * ref.ndim
    for a in arrays:
        index[axis] = slice(start, start + a.shape[axis])
        _copy_into(out[tuple(index)], a)
        start += a.shape[axis]
    return out


def _stack(arrays, axis=0):
    arrays = [asarray(a) for a in arrays]
    for a in arrays[1:]:
        if a.shape != arrays[0].shape:
            raise ValueError(f"stack: all input arrays must have the same shape, got {arrays[0].shape} and {a.shape}")
    axis = axis % (arrays[0].ndim + 1)
    return _concatenate([expand_dims(a, axis) for a in arrays], axis)


def _take(a, indices, axis=None):
    if axis is None:
        return a.reshape(-1)[indices]
    axis = axis % a.ndim
    return a[(slice(None),) * axis + (indices,)]


def _along_axis(a, indices, axis):
    """(axis, int64 indices, result shape, a's strides over it with 0 on the axis)."""
    axis = axis % a.ndim
    idx = indices if isinstance(indices, CudaArray) else CudaArray.from_host(np.asarray(indices))
    if idx.dtype.kind not in "iu" or idx.ndim != a.ndim:
        raise ValueError(f"take/put_along_axis: expected integer indices with {a.ndim} dims, "
                         f"got dtype {idx.dtype} and shape {idx.shape}")
    if idx.dtype != np.int64:
        idx = idx.astype(np.int64)
    ones = a.shape[:axis] + (1,) + a.shape[axis + 1:]
    shape = np.broadcast_shapes(ones, idx.shape)
    a_st = a._view(ones, a._st[:axis] + (0,) + a._st[axis + 1:])._strides_for(shape)
    return axis, idx, shape, a_st


def _take_along_axis(a, indices, axis):
    axis, idx, shape, a_st = _along_axis(a, indices, axis)
    out = CudaArray.empty(shape, a.dtype)
    _gather.take_along(out._buf, a._buf, a._off, a_st, a._st[axis], a.shape[axis], idx._buf,
                       idx._strides_for(shape), idx._off, shape)
    return out


def _put_along_axis(a, indices, values, axis):
    axis, idx, shape, a_st = _along_axis(a, indices, axis)
    v = _value_for(a, values, shape)
    _gather.put_along(a._buf, a._off, a_st, a._st[axis], a.shape[axis], idx._buf, idx._strides_for(shape),
                      idx._off, v._buf, v._strides_for(shape), v._off, shape)


def _copyto(dst, src, where=None):
    """dst[...] = src (broadcast, cast), only where ``where`` is True if given."""
    if where is not None:
        src = _where(where, src, dst)
    _copy_into(dst, src if isinstance(src, CudaArray) else _operand(src, dst))


def _clip(x, a_min=None, a_max=None, out=None):
    y = x
    if a_min is not None:
        y = _binary("maximum", y, a_min)
    if a_max is not None:
        y = _binary("minimum", y, a_max)
    if y is x:
        y = x.copy()
    if out is not None:
        _copy_into(out, y)
        return out
    return y


def _ascontiguousarray(x, dtype=None):
    x = asarray(x, dtype)
    return x if x.is_contiguous() else x.copy()


class CudaNamespace(MoreNumPy, ScanNumPy, SpecialNumPy, StridedNumPy):
    """The NumPy subset minidl.ops call, for cuda arrays (the "cuda" backend's ``xp``)."""

    name = "minidl.backends.cuda"
    inf, nan, pi, e, newaxis = math.inf, math.nan, math.pi, math.e, None
    float16, float32, float64, bfloat16 = np.float16, np.float32, np.float64, BFLOAT16
    int32, int64, bool_, uint8 = np.int32, np.int64, np.bool_, np.uint8
    ndarray = CudaArray
    errstate = staticmethod(np.errstate)
    result_type = staticmethod(np.result_type)
    shape = staticmethod(np.shape)
    broadcast_shapes = staticmethod(np.broadcast_shapes)
    ndim = staticmethod(np.ndim)

    add = _AddUfunc()
    subtract, multiply, divide, true_divide, power = (_ufunc2(n) for n in
                                                      ("subtract", "multiply", "divide", "divide", "power"))
    maximum, minimum = _ufunc2("maximum"), _ufunc2("minimum")
    floor_divide, remainder = _ufunc2("floor_divide"), _ufunc2("remainder")
    less, less_equal, greater, greater_equal, equal, not_equal = (_ufunc2(n) for n in (
        "less", "less_equal", "greater", "greater_equal", "equal", "not_equal"))
    logical_and, logical_or = _ufunc2("logical_and"), _ufunc2("logical_or")
    exp, log, sqrt, tanh, sign, negative, isfinite, logical_not, erf = (_ufunc1(n) for n in (
        "exp", "log", "sqrt", "tanh", "sign", "negative", "isfinite", "logical_not", "erf"))
    abs = absolute = _ufunc1("absolute")
    sin, cos, tan, log1p, expm1, log2 = (_ufunc1(n) for n in ("sin", "cos", "tan", "log1p", "expm1", "log2"))

    matmul = staticmethod(matmul)
    where = staticmethod(_where)
    clip = staticmethod(_clip)
    copyto = staticmethod(_copyto)
    broadcast_to = staticmethod(broadcast_to)
    expand_dims = staticmethod(expand_dims)
    concatenate = staticmethod(_concatenate)
    stack = staticmethod(_stack)
    take = staticmethod(_take)
    take_along_axis = staticmethod(_take_along_axis)
    put_along_axis = staticmethod(_put_along_axis)
    asarray = staticmethod(asarray)
    array = staticmethod(_array)
    pad = staticmethod(_pad)
    ascontiguousarray = staticmethod(_ascontiguousarray)
    arange = staticmethod(_arange)
    full = staticmethod(_full)
    mean = staticmethod(mean)

    @staticmethod
    def zeros(shape, dtype=float):
        return _full(shape, 0, dtype)

    @staticmethod
    def ones(shape, dtype=float):
        return _full(shape, 1, dtype)

    @staticmethod
    def empty(shape, dtype=float):
        shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        return CudaArray.empty(shape, dtype)

    @staticmethod
    def zeros_like(x, dtype=None):
        return _full(x.shape, 0, dtype or x.dtype)

    @staticmethod
    def ones_like(x, dtype=None):
        return _full(x.shape, 1, dtype or x.dtype)

    @staticmethod
    def empty_like(x, dtype=None):
        return CudaArray.empty(x.shape, dtype or x.dtype)

    @staticmethod
    def full_like(x, fill_value, dtype=None):
        return _full(x.shape, fill_value, dtype or x.dtype)

    @staticmethod
    def sum(x, axis=None, dtype=None, keepdims=False):
        return asarray(x).sum(axis=axis, dtype=dtype, keepdims=keepdims)

    @staticmethod
    def max(x, axis=None, keepdims=False):
        return asarray(x).max(axis=axis, keepdims=keepdims)

    amax = max

    @staticmethod
    def min(x, axis=None, keepdims=False):
        return asarray(x).min(axis=axis, keepdims=keepdims)

    amin = min

    @staticmethod
    def argmax(x, axis=None, keepdims=False):
        return asarray(x).argmax(axis=axis, keepdims=keepdims)

    @staticmethod
    def argmin(x, axis=None, keepdims=False):
        return asarray(x).argmin(axis=axis, keepdims=keepdims)

    @staticmethod
    def any(x, axis=None, keepdims=False):
        return asarray(x).any(axis=axis, keepdims=keepdims)

    @staticmethod
    def all(x, axis=None, keepdims=False):
        return asarray(x).all(axis=axis, keepdims=keepdims)

    @staticmethod
    def reshape(x, shape):
        return asarray(x).reshape(shape)

    @staticmethod
    def transpose(x, axes=None):
        return asarray(x).transpose(axes)

    @staticmethod
    def swapaxes(x, a, b):
        return asarray(x).swapaxes(a, b)

    @staticmethod
    def squeeze(x, axis=None):
        return asarray(x).squeeze(axis)

    @staticmethod
    def copy(x):
        return asarray(x).copy()

    def __getattr__(self, name):
        raise NotImplementedError(f"numpy.{name} is not implemented for device 'cuda' (minidl.backends.cuda); "
                                  "add it to CudaNamespace on top of the generic kernels")


CUDA_NUMPY = CudaNamespace()

# the array type's computing methods (array.py dispatches through IMPL)
_array_module.IMPL.__dict__.update(
    binary=_binary, unary=_unary, logic=_logic, logic_not=_logic_not, matmul=matmul, copy_into=_copy_into,
    reduction=_reduction, arg_reduction=_arg_reduction, mean=mean, getitem=getitem, setitem=setitem,
    namespace=CUDA_NUMPY, array_ufunc=array_ufunc, array_function=array_function)
