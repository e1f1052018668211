"""``CudaArray``: a strided view of a flat numba.cuda buffer (NumPy's own model of an array), and
the functions that only relabel its elements (views: no kernel runs).

Everything that computes (operators, copies, reductions, advanced indexing) is built on the
kernels in ``minidl.kernels.cuda`` by the other modules of this package, and those modules
need this type; so the methods here dispatch through ``IMPL``, which ``namespace.py`` fills in
when the package is imported. The kernels themselves never import this package: a composed
kernel allocates with ``type(x).empty`` and reaches the namespace with
``x.__array_namespace__()``, so the layering stays kernels below backends.

bfloat16 on the device. numba.cuda has no bfloat16 type: neither the GPU compiler nor the
simulator can type an ``ml_dtypes.bfloat16`` buffer. A bfloat16 CudaArray therefore keeps the
same 16 bits in a uint16 buffer, and ``dtype`` (the array's own attribute, not the buffer's)
reads bfloat16. The bits are the value, so everything that only moves elements works on the
buffer unchanged: views, copies between bfloat16 arrays, gathers, scatters, ``where``, padding,
concatenation, and the host transfers (``from_host`` uploads a uint16 view of the ndarray,
``copy_to_host`` views the downloaded uint16 as bfloat16: round trips are bit-exact). What
computes converts: ``elementwise``, ``reduction`` and the fused kernels widen bfloat16
operands to float32 on the device (``bits << 16``, exact), compute in float32, and round the
result to bfloat16 once (to nearest even, kernels/cuda/bfloat16.py), which is what
ml_dtypes' NumPy loops do on the CPU (float32 arithmetic, one rounding per op) and what a GPU's
bfloat16 kernels do. The integer kernels never see a bfloat16 buffer as numbers: every
computing entry point of this package checks ``is_bfloat16`` first.
"""
import numbers
import operator
import types

import numpy as np
from numba import cuda

from ...cuda import allocator as _allocator
from ...kernels.cuda import checks as _checks
from ...kernels.cuda._common import SIMULATOR
from ...kernels.cuda.bfloat16 import STORAGE as _BF16_STORAGE
from ...kernels.cuda.bfloat16 import is_bfloat16
from .. import cuda_transfers as _tx

# the computing methods' implementations (namespace.py fills them in; see the docstring)
IMPL = types.SimpleNamespace()
_checks.use_host_read(_tx.download)   # deferred device checks report through the counted download


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

    __hash__ = None

    def __init__(self, buf, shape, strides=None, offset=0, base=None, writeable=True, dtype=None):
        self._buf = buf
        self.shape = tuple(int(n) for n in shape)
        self._st = _contiguous_strides(self.shape) if strides is None else tuple(int(s) for s in strides)
        self._off = int(offset)
        self.dtype = np.dtype(buf.dtype) if dtype is None else np.dtype(dtype)   # bfloat16 over uint16 bits
        self.base = base
        self._writeable = writeable

    # construction ----------------------------------------------------------------
    @classmethod
    def empty(cls, shape, dtype):
        shape, dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        n = _prod(shape)    # counted by md.cuda's memory statistics (minidl/cuda/allocator.py)
        if is_bfloat16(dtype):
            buf = _allocator.allocate(cuda.device_array, n, n * dtype.itemsize, dtype=_BF16_STORAGE)
            return cls(buf, shape, dtype=dtype)
        return cls(_allocator.allocate(cuda.device_array, n, n * dtype.itemsize, dtype=dtype), shape)

    @classmethod
    def from_host(cls, array):
        a = np.asarray(array)
        if a.dtype == object:
            raise TypeError("cuda: cannot move an object array to the device")
        flat = np.ascontiguousarray(a).reshape(-1)
        if is_bfloat16(a.dtype):
            return cls(_tx.upload(flat.view(_BF16_STORAGE)), a.shape, dtype=a.dtype)
        return cls(_tx.upload(flat), a.shape)

    def _view(self, shape, strides, offset=None, writeable=None):
        return CudaArray(self._buf, shape, strides, self._off if offset is None else offset,
                         base=self if self.base is None else self.base,
                         writeable=self._writeable if writeable is None else writeable, dtype=self.dtype)

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
                        "copy it to the host with .copy_to_host() (Tensor.cpu() / .numpy(force=True))")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """np.<ufunc>(x) runs on the device (numpy_protocol.py); ndarray <op> CudaArray lands here too."""
        return IMPL.array_ufunc(IMPL.namespace, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return IMPL.array_function(IMPL.namespace, func, args, kwargs)

    def __getattr__(self, name):
        if not name.startswith("__") and hasattr(np.ndarray, name):
            raise NotImplementedError(f"ndarray.{name} is not implemented for device 'cuda' (minidl.backends.cuda)")
        raise AttributeError(f"'CudaArray' object has no attribute {name!r}")

    # host transfer ------------------------------------------------------------------
    def copy_to_host(self):
        _checks.raise_pending()   # a read is where deferred device checks report (kernels/cuda/checks.py)
        a = self if self._is_whole_buffer() else self.copy()
        host = _tx.download(a._buf)
        return (host.view(self.dtype) if is_bfloat16(self.dtype) else host).reshape(self.shape)

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
        IMPL.copy_into(out, self)
        return out

    def astype(self, dtype, copy=True):
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        out = CudaArray.empty(self.shape, dtype)
        IMPL.copy_into(out, self)
        return out

    # indexing --------------------------------------------------------------------------
    def __getitem__(self, index):
        return IMPL.getitem(self, index)

    def __setitem__(self, index, value):
        if not self._writeable:
            raise ValueError("assignment destination is read-only (a broadcast view)")
        IMPL.setitem(self, index, value)

    def __array_namespace__(self, api_version=None):
        """The backend's NumPy-like namespace, so code that holds only an array (the composed
        kernels in minidl/kernels/cuda) reaches it without importing this package."""
        return IMPL.namespace

    # arithmetic --------------------------------------------------------------------------
    def __add__(self, o): return IMPL.binary("add", self, o)
    def __radd__(self, o): return IMPL.binary("add", o, self)
    def __sub__(self, o): return IMPL.binary("subtract", self, o)
    def __rsub__(self, o): return IMPL.binary("subtract", o, self)
    def __mul__(self, o): return IMPL.binary("multiply", self, o)
    def __rmul__(self, o): return IMPL.binary("multiply", o, self)
    def __truediv__(self, o): return IMPL.binary("divide", self, o)
    def __rtruediv__(self, o): return IMPL.binary("divide", o, self)
    def __floordiv__(self, o): return IMPL.binary("floor_divide", self, o)
    def __rfloordiv__(self, o): return IMPL.binary("floor_divide", o, self)
    def __mod__(self, o): return IMPL.binary("remainder", self, o)
    def __rmod__(self, o): return IMPL.binary("remainder", o, self)
    def __pow__(self, o): return IMPL.binary("power", self, o)
    def __rpow__(self, o): return IMPL.binary("power", o, self)
    def __matmul__(self, o): return IMPL.matmul(self, o)
    def __rmatmul__(self, o): return IMPL.matmul(o, self)
    def __neg__(self): return IMPL.unary("negative", self)
    def __pos__(self): return self
    def __abs__(self): return IMPL.unary("absolute", self)
    def __iadd__(self, o): return IMPL.binary("add", self, o, out=self)
    def __isub__(self, o): return IMPL.binary("subtract", self, o, out=self)
    def __imul__(self, o): return IMPL.binary("multiply", self, o, out=self)
    def __itruediv__(self, o): return IMPL.binary("divide", self, o, out=self)
    def __lt__(self, o): return IMPL.binary("less", self, o)
    def __le__(self, o): return IMPL.binary("less_equal", self, o)
    def __gt__(self, o): return IMPL.binary("greater", self, o)
    def __ge__(self, o): return IMPL.binary("greater_equal", self, o)
    def __eq__(self, o): return IMPL.binary("equal", self, o)
    def __ne__(self, o): return IMPL.binary("not_equal", self, o)
    def __and__(self, o): return IMPL.logic("logical_and", self, o)
    def __rand__(self, o): return IMPL.logic("logical_and", o, self)
    def __or__(self, o): return IMPL.logic("logical_or", self, o)
    def __ror__(self, o): return IMPL.logic("logical_or", o, self)
    def __invert__(self): return IMPL.logic_not(self)

    # reductions --------------------------------------------------------------------------
    def sum(self, axis=None, dtype=None, keepdims=False):
        out = IMPL.reduction("sum", self, axis, keepdims)
        return out if dtype is None else out.astype(dtype, copy=False)

    def mean(self, axis=None, keepdims=False):
        return IMPL.mean(self, axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return IMPL.reduction("max", self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return IMPL.reduction("min", self, axis, keepdims)

    def any(self, axis=None, keepdims=False):
        x = self if self.dtype.kind == "b" else (self != 0)
        if x.size == 0:   # max has no identity: an empty any is False, as a count of True values is 0
            return IMPL.reduction("sum", x, axis, keepdims) > 0
        return IMPL.reduction("max", x, axis, keepdims)

    def all(self, axis=None, keepdims=False):
        x = self if self.dtype.kind == "b" else (self != 0)
        if x.size == 0:   # min has no identity: an empty all is True, as a count of False values is 0
            return IMPL.reduction("sum", IMPL.logic_not(x), axis, keepdims) == 0
        return IMPL.reduction("min", x, axis, keepdims)

    def argmax(self, axis=None, keepdims=False):
        return IMPL.arg_reduction(True, self, axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        return IMPL.arg_reduction(False, self, axis, keepdims)


def asarray(a, dtype=None):
    if isinstance(a, CudaArray):
        return a if dtype is None else a.astype(dtype, copy=False)
    return CudaArray.from_host(np.asarray(a, dtype=dtype))


def broadcast_to(x, shape):
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    x = asarray(x)
    if len(shape) < x.ndim or np.broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {x.shape} and requested shape {shape}")
    return x._view(shape, x._strides_for(shape) if shape else (), writeable=False)


def expand_dims(x, axis):
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
