"""The "cuda" device: an ndarray-like array over a numba.cuda buffer, and its namespace.

``CudaArray`` is (flat device buffer, shape, strides in elements, offset, dtype), NumPy's
own model of an array. Everything that only relabels elements is therefore a *view* that
shares the buffer and costs no kernel: reshape of a contiguous array, transpose/permute,
swapaxes, expand_dims, broadcast_to (stride 0), and basic slicing (``x[1:, ::2, None]``).
Everything that computes runs one of the generic kernels in ``minidl.kernels.cuda``,
which read any strides, so views are never copied just to be consumed:

- elementwise ops            -> ``map`` (one operand and maybe a scalar) / ``zip`` (two, broadcast);
- sum / mean / max / min     -> ``reduce`` (one block per output element);
- matmul                     -> ``matmul`` (shared-memory tiles, broadcast batch dims);
- where, integer indexing    -> ``gather`` (where, gather, scatter-set, scatter-add).

``CUDA_NUMPY`` (the backend's ``xp``) offers the NumPy functions that minidl.ops call, each
built on those kernels, so the ops run here unchanged. A NumPy function it lacks raises
NotImplementedError naming it and the device.

Host round trips. Every copy goes through ``cuda_transfers`` and is counted:
``with transfer_log() as log: ...`` lists them (bytes, count, call site). A training step of
the zoo models makes none but reading the loss (tests/test_cuda_transfers.py): integer-array
indices (x[i], x[:, i, j], add.at) become element offsets on the device; ``arange`` and
causal masks are computed there; dropout masks are drawn there; index range checks run there
and report at the next read (kernels/cuda/checks.py); optimizers run one fused kernel per
parameter. What still reads back, by nature: ``bool(x)`` / ``float(x)`` / ``item()`` /
``.numpy()``; a bool-mask index ``x[mask]`` with array values, and integer indices separated
by slices (``x[i, :, j]``), whose offsets NumPy's rules compute on the host; and the first use
of a scalar constant in where/scatter (``_const``, cached: one upload per value, once).
"""
import builtins
import math
import numbers
import operator

import numpy as np
from numba import cuda

from ..kernels.cuda import arange as _arange_kernel
from ..kernels.cuda import checks as _checks
from ..kernels.cuda import gather as _gather
from ..kernels.cuda import map as _map
from ..kernels.cuda import matmul as _matmul
from ..kernels.cuda import reduce as _reduce
from ..kernels.cuda import zip as _zip
from ..kernels.cuda._common import SIMULATOR
from . import Backend
from . import cuda_transfers as _tx
from .cuda_transfers import transfer_log  # noqa: F401  (public: minidl.backends.cuda.transfer_log)
from .cuda_flags import (cudnn_sdp_enabled, enable_cudnn_sdp, enable_flash_sdp, enable_math_sdp,  # noqa: F401
                         enable_mem_efficient_sdp, flash_sdp_enabled, is_built, math_sdp_enabled, matmul,
                         mem_efficient_sdp_enabled)   # md.backends.cuda's flags (see cuda_flags.py)


def _contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class _Flags:
    __slots__ = ("writeable", "c_contiguous")

    def __init__(self, writeable, c_contiguous):
        self.writeable, self.c_contiguous = writeable, c_contiguous

    def __getitem__(self, key):
        return getattr(self, {"WRITEABLE": "writeable", "C_CONTIGUOUS": "c_contiguous"}[key.upper()])


class CudaArray:
    """A strided view of a numba.cuda device buffer, with the subset of ndarray's API that
    minidl's ops use. ``copy_to_host()`` (or ``to_host``) returns an ndarray."""

    __array_ufunc__ = None      # ndarray <op> CudaArray defers to our reflected operators
    __hash__ = None

    def __init__(self, buf, shape, strides=None, offset=0, base=None, writeable=True):
        self._buf = buf
        self.shape = tuple(int(n) for n in shape)
        self._st = _contiguous_strides(self.shape) if strides is None else tuple(int(s) for s in strides)
        self._off = int(offset)
        self.dtype = np.dtype(buf.dtype)
        self.base = base
        self._writeable = writeable

    # construction ----------------------------------------------------------------
    @classmethod
    def empty(cls, shape, dtype):
        shape = tuple(int(n) for n in shape)
        return cls(cuda.device_array(_prod(shape), dtype=np.dtype(dtype)), shape)

    @classmethod
    def from_host(cls, array):
        a = np.asarray(array)
        if a.dtype == object:
            raise TypeError("cuda: cannot move an object array to the device")
        return cls(_tx.upload(np.ascontiguousarray(a).reshape(-1)), a.shape)

    def _view(self, shape, strides, offset=None, writeable=None):
        return CudaArray(self._buf, shape, strides, self._off if offset is None else offset,
                         base=self if self.base is None else self.base,
                         writeable=self._writeable if writeable is None else writeable)

    # ndarray attributes -------------------------------------------------------------
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return _prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def strides(self):
        """Strides in bytes, as ndarray.strides (``elem_strides`` has them in elements)."""
        return tuple(s * self.itemsize for s in self._st)

    @property
    def elem_strides(self):
        return self._st

    @property
    def offset(self):
        return self._off

    @property
    def flags(self):
        return _Flags(self._writeable, self.is_contiguous())

    @property
    def T(self):
        return self.transpose()

    @property
    def device(self):
        return "cuda"

    def is_contiguous(self):
        return all(st == c for st, c, n in zip(self._st, _contiguous_strides(self.shape), self.shape) if n != 1)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        return f"CudaArray({np.array2string(self.copy_to_host(), separator=', ')}, dtype={self.dtype})"

    def __array__(self, dtype=None, copy=None):
        raise TypeError("cuda: a device array cannot be used as a NumPy array implicitly; "
                        "copy it to the host with .copy_to_host() (Tensor.numpy() / .cpu())")

    def __getattr__(self, name):
        if not name.startswith("__") and hasattr(np.ndarray, name):
            raise NotImplementedError(f"ndarray.{name} is not implemented for device 'cuda' (minidl.backends.cuda)")
        raise AttributeError(f"'CudaArray' object has no attribute {name!r}")

    # host transfer ------------------------------------------------------------------
    def copy_to_host(self):
        _checks.raise_pending()   # a read is where deferred device checks report (kernels/cuda/checks.py)
        a = self if self._is_whole_buffer() else self.copy()
        return _tx.download(a._buf).reshape(self.shape)

    def _is_whole_buffer(self):
        return self._off == 0 and self.is_contiguous() and self.size == self._buf.size

    def item(self):
        if self.size != 1:
            raise ValueError(f"can only convert an array of size 1 to a Python scalar, got shape {self.shape}")
        return self.copy_to_host().reshape(()).item()

    def tolist(self):
        return self.copy_to_host().tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu":
            raise TypeError(f"only integer arrays can be used as an index, got {self.dtype}")
        return int(self.item())

    @property
    def __cuda_array_interface__(self):
        """CUDA Array Interface v3, so CuPy / PyTorch / numba can read this array in place.

        Under the simulator the "device pointer" is the host address of the simulated
        buffer (there is no device); on a GPU it is the real device pointer."""
        if SIMULATOR:
            ptr = self._buf._ary.__array_interface__["data"][0]
        else:
            ptr = self._buf.__cuda_array_interface__["data"][0]
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (ptr + self._off * self.itemsize if self.size else 0, not self._writeable),
            "strides": None if self.is_contiguous() else self.strides,
            "version": 3,
        }

    # kernel plumbing ----------------------------------------------------------------
    def _kernel_view(self):
        """(buffer, shape, strides, offset) with at least one dim, as the kernels need."""
        if not self.shape:
            return self._buf, (1,), (0,), self._off
        return self._buf, self.shape, self._st, self._off

    def _strides_for(self, shape):
        """Strides reading this array broadcast to ``shape`` (0 on broadcast axes)."""
        lead = len(shape) - self.ndim
        out = [0] * lead
        for n, st, m in zip(self.shape, self._st, shape[lead:]):
            out.append(0 if n == 1 and m != 1 else st)
        return tuple(out) if out else (0,)

    # views ---------------------------------------------------------------------------
    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(operator.index(n) for n in shape)
        if shape.count(-1) > 1:
            raise ValueError("can only specify one unknown dimension")
        if -1 in shape:
            known = _prod(n for n in shape if n != -1)
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape array of size {self.size} into shape {shape}")
            shape = tuple(self.size // known if n == -1 else n for n in shape)
        if _prod(shape) != self.size:
            raise ValueError(f"cannot reshape array of size {self.size} into shape {shape}")
        if shape == self.shape:
            return self._view(self.shape, self._st)
        src = self if self.is_contiguous() else self.copy()
        return src._view(shape, _contiguous_strides(shape), src._off)

    def transpose(self, *axes):
        if not axes or (len(axes) == 1 and axes[0] is None):
            axes = tuple(reversed(range(self.ndim)))
        elif len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        axes = tuple(operator.index(a) % max(self.ndim, 1) for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"axes {axes} don't match array of {self.ndim} dims")
        return self._view(tuple(self.shape[a] for a in axes), tuple(self._st[a] for a in axes))

    def swapaxes(self, a, b):
        axes = list(range(self.ndim))
        a, b = a % self.ndim, b % self.ndim
        axes[a], axes[b] = axes[b], axes[a]
        return self.transpose(axes)

    def squeeze(self, axis=None):
        axes = ({i for i, n in enumerate(self.shape) if n == 1} if axis is None else
                {a % self.ndim for a in (axis if isinstance(axis, tuple) else (axis,))})
        keep = [i for i in range(self.ndim) if i not in axes]
        return self._view(tuple(self.shape[i] for i in keep), tuple(self._st[i] for i in keep))

    def ravel(self):
        return self.reshape(-1)

    def flatten(self):
        return self.copy().reshape(-1)

    # copies ---------------------------------------------------------------------------
    def copy(self):
        out = CudaArray.empty(self.shape, self.dtype)
        _copy_into(out, self)
        return out

    def astype(self, dtype, copy=True):
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        out = CudaArray.empty(self.shape, dtype)
        _copy_into(out, self)
        return out

    # indexing --------------------------------------------------------------------------
    def __getitem__(self, index):
        basic = _basic_index(self, index)
        if basic is not None:
            return basic
        on_axis = _axis_index(self, index)
        if on_axis is not None:
            return _gather_axis(self, *on_axis)
        offsets = _offsets(self, index)
        out = CudaArray.empty(offsets.shape, self.dtype)
        _gather.gather(out._buf, self._buf, _flat_buffer(offsets))
        return out

    def __setitem__(self, index, value):
        if not self._writeable:
            raise ValueError("assignment destination is read-only (a broadcast view)")
        target = _basic_index(self, index)
        if target is not None:
            _assign(target, value)
            return
        on_axis = _axis_index(self, index)
        if on_axis is not None:
            _scatter_axis(self, *on_axis, value, add=False)
            return
        if (isinstance(index, CudaArray) and index.dtype.kind == "b" and index.shape == self.shape
                and not (isinstance(value, (CudaArray, np.ndarray)) and np.ndim(value))):
            _copyto(self, value, where=index)   # x[mask] = scalar: a where on the device, no host copy
            return
        offsets = _offsets(self, index)
        _scatter(self, offsets, value, add=False)

    # arithmetic --------------------------------------------------------------------------
    def __add__(self, o): return _binary("add", self, o)
    def __radd__(self, o): return _binary("add", o, self)
    def __sub__(self, o): return _binary("subtract", self, o)
    def __rsub__(self, o): return _binary("subtract", o, self)
    def __mul__(self, o): return _binary("multiply", self, o)
    def __rmul__(self, o): return _binary("multiply", o, self)
    def __truediv__(self, o): return _binary("divide", self, o)
    def __rtruediv__(self, o): return _binary("divide", o, self)
    def __floordiv__(self, o): return _binary("floor_divide", self, o)
    def __rfloordiv__(self, o): return _binary("floor_divide", o, self)
    def __mod__(self, o): return _binary("remainder", self, o)
    def __rmod__(self, o): return _binary("remainder", o, self)
    def __pow__(self, o): return _binary("power", self, o)
    def __rpow__(self, o): return _binary("power", o, self)
    def __matmul__(self, o): return matmul(self, o)
    def __rmatmul__(self, o): return matmul(o, self)
    def __neg__(self): return _unary("negative", self)
    def __pos__(self): return self
    def __abs__(self): return _unary("absolute", self)
    def __iadd__(self, o): return _binary("add", self, o, out=self)
    def __isub__(self, o): return _binary("subtract", self, o, out=self)
    def __imul__(self, o): return _binary("multiply", self, o, out=self)
    def __itruediv__(self, o): return _binary("divide", self, o, out=self)
    def __lt__(self, o): return _binary("less", self, o)
    def __le__(self, o): return _binary("less_equal", self, o)
    def __gt__(self, o): return _binary("greater", self, o)
    def __ge__(self, o): return _binary("greater_equal", self, o)
    def __eq__(self, o): return _binary("equal", self, o)
    def __ne__(self, o): return _binary("not_equal", self, o)
    def __and__(self, o): return _logic("logical_and", self, o)
    def __rand__(self, o): return _logic("logical_and", o, self)
    def __or__(self, o): return _logic("logical_or", self, o)
    def __ror__(self, o): return _logic("logical_or", o, self)
    def __invert__(self): return _logic_not(self)

    # reductions --------------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, keepdims=False):
        out = _reduction("sum", self, axis, keepdims)
        return out if dtype is None else out.astype(dtype, copy=False)

    def mean(self, axis=None, keepdims=False):
        return mean(self, axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return _reduction("max", self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _reduction("min", self, axis, keepdims)

    def any(self, axis=None, keepdims=False):
        x = self if self.dtype.kind == "b" else (self != 0)
        return _reduction("max", x, axis, keepdims)

    def all(self, axis=None, keepdims=False):
        x = self if self.dtype.kind == "b" else (self != 0)
        return _reduction("min", x, axis, keepdims)

    def argmax(self, axis=None, keepdims=False):
        return _arg_reduction(True, self, axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        return _arg_reduction(False, self, axis, keepdims)


# elementwise ----------------------------------------------------------------------------------

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
            dt = _DTYPES[key] = np.dtype(getattr(np, name)(sa, sb).dtype)
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


_UNARY_DTYPES = {}
_SAME_DTYPE_AS = {"erf": "sqrt"}   # functions NumPy lacks: the ufunc whose output dtype they share


def _unary(name, x, out=None):
    x = _unaliased(_operand(x, None), out)
    if not isinstance(x, CudaArray):
        return getattr(np, name)(x)
    dt = _UNARY_DTYPES.get((name, x.dtype))
    if dt is None:
        with np.errstate(all="ignore"):
            like = getattr(np, _SAME_DTYPE_AS.get(name, name))
            dt = _UNARY_DTYPES[(name, x.dtype)] = np.dtype(like(np.ones(1, x.dtype)).dtype)
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


# indexing ----------------------------------------------------------------------------------

def _basic_index(x, index):
    """x[index] as a view when ``index`` holds only ints, slices, None and Ellipsis; else None."""
    items = index if isinstance(index, tuple) else (index,)
    for i in items:
        if not (i is None or i is Ellipsis or isinstance(i, slice) or
                (isinstance(i, (numbers.Integral, np.integer)) and not isinstance(i, (bool, np.bool_))) or
                (isinstance(i, np.ndarray) and i.ndim == 0 and i.dtype.kind in "iu")):
            return None
    n_real = builtins.sum(1 for i in items if i is not None and i is not Ellipsis)
    if n_real > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {n_real} were indexed")
    if builtins.sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    expanded = []
    for i in items:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (x.ndim - n_real))
        else:
            expanded.append(i)
    if Ellipsis not in items:
        expanded.extend([slice(None)] * (x.ndim - n_real))
    shape, strides, offset, d = [], [], x._off, 0
    for i in expanded:
        if i is None:
            shape.append(1)
            strides.append(0)
            continue
        n, st = x.shape[d], x._st[d]
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            shape.append(len(range(start, stop, step)))
            strides.append(st * step)
            offset += start * st if shape[-1] else 0
        else:
            k = int(i)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {d} with size {n}")
            offset += (k % n) * st
        d += 1
    return x._view(tuple(shape), tuple(strides), offset)


def _index_array(i):
    """An integer index array as a contiguous int64 CudaArray (host arrays are uploaded)."""
    i = i if isinstance(i, CudaArray) else CudaArray.from_host(np.asarray(i))
    if i.dtype != np.int64 or not i.is_contiguous():
        i = i.astype(np.int64)
    return i


def _flat_buffer(a):
    return a._buf[a._off:a._off + a.size]


def _is_int_array(i):
    if isinstance(i, list):
        i = np.asarray(i)
    return isinstance(i, (CudaArray, np.ndarray)) and i.dtype.kind in "iu" and i.ndim >= 1


def _axis_index(x, index):
    """(axis, indices) when ``index`` picks along one axis with one integer array and takes
    every element of the others (``x[idx]``, ``x[:, idx]``): gathered on the device."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) > x.ndim:
        return None
    axis = None
    for d, i in enumerate(items):
        if isinstance(i, slice) and i == slice(None):
            continue
        if axis is None and _is_int_array(i):
            axis = d
            continue
        return None
    if axis is None:
        return None
    return axis, _index_array(items[axis])


def _axis_geometry(x, axis):
    pre, post = x.shape[:axis], x.shape[axis + 1:]
    return (pre or (1,), x._st[:axis] or (0,), x.shape[axis], x._st[axis], post or (1,), x._st[axis + 1:] or (0,))


def _gather_axis(x, axis, idx):
    out = CudaArray.empty(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)
    pre_s, pre_st, n, st, post_s, post_st = _axis_geometry(x, axis)
    _gather.take_axis(out._buf, x._buf, x._off, pre_s, pre_st, _flat_buffer(idx), n, st, post_s, post_st)
    return out


def _value_for(x, value, shape):
    """``value`` as a CudaArray of x's dtype that broadcasts to ``shape``."""
    if isinstance(value, np.ndarray) and value.ndim:
        value = CudaArray.from_host(value)
    value = _operand(value, x)
    if not isinstance(value, CudaArray):
        value = _const(value, x.dtype)
    if value.dtype != x.dtype:
        value = value.astype(x.dtype)
    if np.broadcast_shapes(value.shape, shape) != shape:
        raise ValueError(f"shape mismatch: value array of shape {value.shape} could not be broadcast "
                         f"to indexing result of shape {shape}")
    return _unaliased(value, x)


def _scatter_axis(x, axis, idx, value, add):
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    value = _value_for(x, value, shape)
    pre_s, pre_st, n, st, post_s, post_st = _axis_geometry(x, axis)
    _gather.put_axis(x._buf, x._off, pre_s, pre_st, _flat_buffer(idx), n, st, post_s, post_st,
                     value._buf, value._strides_for(shape), value._off, shape, add)


def _host_index(index):
    items = index if isinstance(index, tuple) else (index,)
    return tuple(i.copy_to_host() if isinstance(i, CudaArray) else i for i in items)


def _offsets(x, index):
    """Buffer offsets (a contiguous int64 CudaArray) of the elements of x[index] for an
    advanced index: computed on the device when ``_device_offsets`` can, else by NumPy's own
    rules on the host (a round trip: device index arrays are read back, the offsets copied up)."""
    on_device = _device_offsets(x, index)
    if on_device is not None:
        return on_device
    pos = np.full((), x._off, dtype=np.int64)
    for d, (n, st) in enumerate(zip(x.shape, x._st)):
        shape = [1] * x.ndim
        shape[d] = n
        pos = pos + np.arange(n, dtype=np.int64).reshape(shape) * st
    pos = np.broadcast_to(pos, x.shape)
    return CudaArray.from_host(np.ascontiguousarray(pos[_host_index(index)]))


def _device_offsets(x, index):
    """Offsets of x[i0, i1, ..., :, :] on the device, or None for other index forms.

    Handles a run of adjacent integer indices (arrays, or ints, which broadcast with them),
    optionally after and before full slices: NumPy puts the broadcast index shape B in place
    of the run, so x[:, i, j] has shape x.shape[:1] + B + x.shape[3:], and element
    (p, b, q) lives at off + p . st_pre + sum_d wrap(i_d[b]) st_d + q . st_post. Every term is
    a small integer array, summed with broadcasting by the zip kernel. Index ranges are
    checked on the device (deferred, see kernels/cuda/checks.py). Bool masks, None,
    Ellipsis and partial slices return None (the host path)."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) > x.ndim:
        return None
    kinds = []
    for i in items:
        if isinstance(i, slice) and i == slice(None):
            kinds.append("s")
        elif _is_int_array(i) or _is_int_scalar(i):
            kinds.append("a")
        else:
            return None
    run = "".join(kinds).strip("s")
    if not run or "s" in run:
        return None
    first = kinds.index("a")
    last = first + len(run)
    arrays = []
    for d in range(first, last):
        i = items[d]
        arrays.append(_index_array(i) if _is_int_array(i) else _const(int(i), np.int64))
    bshape = np.broadcast_shapes(*[a.shape for a in arrays])
    pre, post = x.shape[:first], x.shape[last:]
    out_shape = pre + bshape + post
    nd = len(out_shape)
    pos = _const(x._off, np.int64)
    for d, n in enumerate(pre):
        pos = pos + _expand_to(_arange(n, dtype=np.int64) * x._st[d], d, nd)
    for d, a in zip(range(first, last), arrays):
        n = x.shape[d]
        _checks.assert_all((a >= -n) & (a < n), IndexError,
                           f"index out of bounds for axis {d} with size {n} (an integer index array on device 'cuda')")
        wrapped = a + (a < 0).astype(np.int64) * n
        pos = pos + wrapped.reshape((1,) * len(pre) + (1,) * (len(bshape) - a.ndim) + a.shape + (1,) * len(post)) \
            * x._st[d]
    for k, n in enumerate(post):
        pos = pos + _expand_to(_arange(n, dtype=np.int64) * x._st[last + k], len(pre) + len(bshape) + k, nd)
    pos = _broadcast_to(pos, out_shape)
    return pos if pos.is_contiguous() else pos.copy()


def _is_int_scalar(i):
    return isinstance(i, (numbers.Integral, np.integer)) and not isinstance(i, (bool, np.bool_))


def _expand_to(v, axis, ndim):
    """A 1-d array as the ``axis`` of an ndim-d array (size 1 elsewhere)."""
    return v.reshape((1,) * axis + (v.size,) + (1,) * (ndim - axis - 1))


def _scatter(x, offsets, value, add):
    shape = offsets.shape
    value = _value_for(x, value, shape)
    shape_k = shape if shape else (1,)
    _gather.scatter(x._buf, _flat_buffer(offsets), value._buf,
                    value._strides_for(shape_k) if shape else (0,), value._off, shape_k, add)


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


# reductions and matmul ----------------------------------------------------------------------

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
    return _expand_dims(out, a) if keepdims else out


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


# the namespace -------------------------------------------------------------------------------

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


class _AddUfunc:
    """``xp.add`` with NumPy's ``add.at`` (unbuffered scatter-add: repeated indices add up)."""

    def __call__(self, a, b, out=None):
        return _binary("add", a, b, out)

    def at(self, x, index, values):
        on_axis = _axis_index(x, index)
        if on_axis is not None:
            _scatter_axis(x, *on_axis, values, add=True)
        else:
            _scatter(x, _offsets(x, index), values, add=True)


def _asarray(a, dtype=None):
    if isinstance(a, CudaArray):
        return a if dtype is None else a.astype(dtype, copy=False)
    return CudaArray.from_host(np.asarray(a, dtype=dtype))


def _array(a, dtype=None, copy=True):
    if isinstance(a, CudaArray) and copy:
        return a.astype(dtype or a.dtype, copy=True)
    return _asarray(a, dtype)


def _pad(x, pad_width, mode="constant", constant_values=0):
    if mode != "constant":
        raise NotImplementedError(f"numpy.pad(mode={mode!r}) is not implemented for device 'cuda' (only 'constant')")
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    out = _full(tuple(n + int(lo) + int(hi) for n, (lo, hi) in zip(x.shape, widths)), constant_values, x.dtype)
    _copy_into(out[tuple(slice(int(lo), int(lo) + n) for n, (lo, hi) in zip(x.shape, widths))], x)
    return out


def _full(shape, fill_value, dtype=None):
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    dt = np.dtype(dtype) if dtype is not None else np.asarray(fill_value).dtype
    out = CudaArray.empty(shape, dt)
    if out.size:
        _copy_into(out, fill_value)
    return out


def _where(cond, a=None, b=None):
    if a is None or b is None:
        raise NotImplementedError("where(cond) with one argument (nonzero) is not implemented for device 'cuda'")
    cond = _operand(cond, a)
    a, b = _operand(a, cond), _operand(b, cond)
    arrays = [v for v in (cond, a, b) if isinstance(v, CudaArray)]
    if not arrays:
        raise TypeError("cuda where: expected at least one cuda array")
    dt = np.result_type(*[v.dtype if isinstance(v, CudaArray) else v for v in (a, b)])
    cond = cond if isinstance(cond, CudaArray) else _const(bool(cond), np.bool_)
    a = a if isinstance(a, CudaArray) else _const(a, dt)
    b = b if isinstance(b, CudaArray) else _const(b, dt)
    shape = np.broadcast_shapes(cond.shape, a.shape, b.shape)
    out = CudaArray.empty(shape, dt)
    sk = shape or (1,)
    st = (lambda v: v._strides_for(sk) if shape else (0,))
    _gather.where(out._buf, cond._buf, st(cond), cond._off, a._buf, st(a), a._off, b._buf, st(b), b._off, sk)
    return out


def _broadcast_to(x, shape):
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    x = _asarray(x)
    if len(shape) < x.ndim or np.broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {x.shape} and requested shape {shape}")
    return x._view(shape, x._strides_for(shape) if shape else (), writeable=False)


def _expand_dims(x, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = x.ndim + len(axes)
    axes = sorted(a % nd for a in axes)
    shape, strides, it = [], [], iter(zip(x.shape, x._st))
    for d in range(nd):
        if d in axes:
            shape.append(1)
            strides.append(0)
        else:
            n, st = next(it)
            shape.append(n)
            strides.append(st)
    return x._view(tuple(shape), tuple(strides))


def _concatenate(arrays, axis=0):
    arrays = [_asarray(a) for a in arrays]
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
    arrays = [_asarray(a) for a in arrays]
    for a in arrays[1:]:
        if a.shape != arrays[0].shape:
            raise ValueError(f"stack: all input arrays must have the same shape, got {arrays[0].shape} and {a.shape}")
    axis = axis % (arrays[0].ndim + 1)
    return _concatenate([_expand_dims(a, axis) for a in arrays], axis)


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
    x = _asarray(x, dtype)
    return x if x.is_contiguous() else x.copy()


def _arange(*args, dtype=None):
    """np.arange's values, written by a kernel (only the length is worked out on the host)."""
    dt = np.dtype(dtype) if dtype is not None else np.result_type(*args)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (tuple(args) + (1,))[:3]
    if step == 0:
        raise ZeroDivisionError("arange: step must not be zero")
    n = builtins.max(0, math.ceil((stop - start) / step))
    out = CudaArray.empty((n,), dt)
    _arange_kernel.launch(out._buf, dt.type(start), dt.type(step))
    return out


class CudaNamespace:
    """The NumPy subset minidl.ops call, for cuda arrays (the "cuda" backend's ``xp``)."""

    name = "minidl.backends.cuda"
    inf, nan, pi, e, newaxis = math.inf, math.nan, math.pi, math.e, None
    float16, float32, float64 = np.float16, np.float32, np.float64
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

    matmul = staticmethod(matmul)
    where = staticmethod(_where)
    clip = staticmethod(_clip)
    copyto = staticmethod(_copyto)
    broadcast_to = staticmethod(_broadcast_to)
    expand_dims = staticmethod(_expand_dims)
    concatenate = staticmethod(_concatenate)
    stack = staticmethod(_stack)
    take = staticmethod(_take)
    take_along_axis = staticmethod(_take_along_axis)
    put_along_axis = staticmethod(_put_along_axis)
    asarray = staticmethod(_asarray)
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
        return _asarray(x).sum(axis=axis, dtype=dtype, keepdims=keepdims)

    @staticmethod
    def max(x, axis=None, keepdims=False):
        return _asarray(x).max(axis=axis, keepdims=keepdims)

    amax = max

    @staticmethod
    def min(x, axis=None, keepdims=False):
        return _asarray(x).min(axis=axis, keepdims=keepdims)

    amin = min

    @staticmethod
    def argmax(x, axis=None, keepdims=False):
        return _asarray(x).argmax(axis=axis, keepdims=keepdims)

    @staticmethod
    def argmin(x, axis=None, keepdims=False):
        return _asarray(x).argmin(axis=axis, keepdims=keepdims)

    @staticmethod
    def any(x, axis=None, keepdims=False):
        return _asarray(x).any(axis=axis, keepdims=keepdims)

    @staticmethod
    def all(x, axis=None, keepdims=False):
        return _asarray(x).all(axis=axis, keepdims=keepdims)

    @staticmethod
    def reshape(x, shape):
        return _asarray(x).reshape(shape)

    @staticmethod
    def transpose(x, axes=None):
        return _asarray(x).transpose(axes)

    @staticmethod
    def swapaxes(x, a, b):
        return _asarray(x).swapaxes(a, b)

    @staticmethod
    def squeeze(x, axis=None):
        return _asarray(x).squeeze(axis)

    @staticmethod
    def copy(x):
        return _asarray(x).copy()

    def __getattr__(self, name):
        raise NotImplementedError(f"numpy.{name} is not implemented for device 'cuda' (minidl.backends.cuda); "
                                  "add it to CudaNamespace on top of the generic kernels")


CUDA_NUMPY = CudaNamespace()


def _fusable(a, w):
    return isinstance(a, CudaArray) and a.dtype == w.dtype and a.shape == w.shape and a._is_whole_buffer()


class CudaBackend(Backend):
    name = "cuda"
    xp = CUDA_NUMPY
    array_type = CudaArray

    def from_host(self, array):
        if isinstance(array, CudaArray):
            return array
        return CudaArray.from_host(array)

    def to_host(self, array):
        return array.copy_to_host()

    def assert_all(self, ok, error, message):
        """``if not ok.all(): raise error(message)``, deferred to the next read from the device."""
        _checks.assert_all(ok, error, message)

    @staticmethod
    def fused_adam(w, g, m, v, vmax, lr, beta1, beta2, eps, wd, step, decoupled, amsgrad, maximize):
        """One Adam(W) kernel for the parameter (kernels/cuda/optim.py); False (use the generic
        path) unless every array is a contiguous whole buffer of w's dtype."""
        arrays = [w, g, m, v] + ([vmax] if amsgrad else [])
        if not all(_fusable(a, w) for a in arrays):
            return False
        from ..kernels.cuda import optim as _optim
        _optim.adam(w._buf, g._buf, m._buf, v._buf, (vmax if amsgrad else v)._buf, lr, beta1, beta2, eps, wd,
                    step, decoupled, amsgrad, maximize)
        return True

    @staticmethod
    def fused_sgd(w, g, buf, lr, wd, momentum, dampening, nesterov, maximize):
        """One SGD kernel for the parameter: (True, momentum buffer, allocated on the first step;
        None without momentum), or (False, None) (use the generic path) unless the arrays are
        contiguous whole buffers of w's dtype."""
        first = momentum != 0 and buf is None
        if first:
            buf = CudaArray.empty(w.shape, w.dtype)
        if not all(_fusable(a, w) for a in ([w, g] + ([buf] if momentum != 0 else []))):
            return False, None
        from ..kernels.cuda import optim as _optim
        _optim.sgd(w._buf, g._buf, (buf if momentum != 0 else w)._buf, lr, wd, momentum, dampening, first, nesterov,
                   maximize)
        return True, buf

    def dropout_mask(self, shape, p, dtype):
        """The scaled keep mask drawn on the device (kernels/cuda/random.py), seeded from
        minidl's generator: reproducible under md.manual_seed, but not the CPU's mask."""
        from .. import random
        from ..kernels.cuda import random as _random
        out = CudaArray.empty(shape, dtype)
        _random.keep_mask(out._buf, float(p), int(random.generator().integers(0, 2 ** 62)))
        return out
