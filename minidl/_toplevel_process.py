"""PyTorch's top-level functions about objects, interchange and process-wide settings:
typename, is_storage, DLPack (from_dlpack, to_dlpack, Tensor.__dlpack__), frombuffer,
set_flush_denormal, set_warn_always, the deprecated per-device autocast accessors, and the
deprecated set_default_tensor_type.

DLPack is NumPy's: a CPU tensor's array exports itself (``ndarray.__dlpack__``) and
``np.from_dlpack`` imports any CPU producer (PyTorch, JAX, CuPy's host arrays...), both without
a copy, so the two sides share memory: a write through one is seen by the other.
"""
import warnings

import numpy as np

from .tensor import dtype as _dtypes
from .tensor.tensor import Tensor

_KDLCPU = 1   # DLPack's device type of host memory


def _md():
    import minidl
    return minidl


def typename(obj, /):
    """The qualified name of obj's type: a tensor's legacy type ("minidl.FloatTensor"), else
    module.qualname of obj (a class or function) or of its class."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module, qualname = obj.__class__.__module__ or "", obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def is_storage(obj, /):
    """Whether ``obj`` is a storage (what ``t.untyped_storage()`` and ``t.storage()`` return)."""
    from .tensor.storage import TypedStorage, UntypedStorage
    return isinstance(obj, (UntypedStorage, TypedStorage))


def set_flush_denormal(mode):
    """Whether the asked denormal mode is in effect: NumPy cannot make the CPU flush denormals
    to zero, so asking for it (mode True) returns False, as PyTorch does on a CPU that cannot;
    mode False, NumPy's only behaviour, returns True."""
    return not bool(mode)


_WARN_ALWAYS = [False]


def set_warn_always(b, /):
    """Record whether warnings PyTorch gives once per process should be given every time (a
    flag read by is_warn_always_enabled; minidl's warnings follow Python's warning filters)."""
    _WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled():
    return _WARN_ALWAYS[0]


# DLPack ----------------------------------------------------------------------------------------
def _cpu_array(t, op):
    if t.device.type != "cpu":
        raise NotImplementedError(f"{op}: only CPU tensors can be exchanged through DLPack in minidl, got a "
                                  f"tensor on {t.device}; move it with .cpu() first")
    return t._data


def _tensor_dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """The DLPack capsule of a CPU tensor's memory (Tensor.__dlpack__, NumPy's protocol)."""
    if self.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device), ("copy", copy))
              if v is not None}
    return _cpu_array(self, "__dlpack__").__dlpack__(stream=stream, **kwargs)


def _tensor_dlpack_device(self):
    _cpu_array(self, "__dlpack_device__")
    return (_KDLCPU, 0)


class _Capsule:
    """A DLPack capsule (as to_dlpack returns) in the protocol np.from_dlpack reads."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (_KDLCPU, 0)


def to_dlpack(tensor):
    """The DLPack capsule of ``tensor``'s memory (no copy; the capsule can be consumed once). It
    is a versioned (DLPack 1.0) capsule, which says whether the memory may be written: NumPy
    imports a legacy one read-only."""
    return np.asarray(_cpu_array(tensor, "to_dlpack")).__dlpack__(max_version=(1, 0))


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor over the memory of ``ext_tensor`` (an object with ``__dlpack__``, as a PyTorch
    or NumPy array, or a capsule from to_dlpack), without a copy unless ``copy=True``. A legacy
    capsule (torch.utils.dlpack.to_dlpack's) gives a tensor that refuses in-place writes, as
    NumPy imports it read-only."""
    if device is not None and _md().device(device).type != "cpu":
        raise NotImplementedError(f"from_dlpack: minidl imports DLPack tensors to the CPU only, got device={device!r}")
    if type(ext_tensor).__name__ == "PyCapsule":
        ext_tensor = _Capsule(ext_tensor)
    elif not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got "
                        f"{type(ext_tensor).__name__}")
    if hasattr(ext_tensor, "__dlpack_device__") and ext_tensor.__dlpack_device__()[0] != _KDLCPU:
        raise NotImplementedError(f"from_dlpack: only host (CPU) memory can be imported, got DLPack device "
                                  f"{tuple(ext_tensor.__dlpack_device__())}")
    array = np.from_dlpack(ext_tensor, copy=copy)
    _dtypes.to_dtype(array.dtype)   # a TypeError naming the supported dtypes for any other
    return Tensor._wrap(array, None, 0)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over the memory of an object with the buffer protocol (bytes, bytearray,
    array.array, memoryview...), ``count`` elements of ``dtype`` from byte ``offset`` (count -1:
    all that fit). No copy: a write to a writable buffer shows in the tensor and back; the
    tensor over a read-only buffer (bytes) refuses in-place writes."""
    dt = np.dtype(_dtypes.to_dtype(dtype))
    length = memoryview(buffer).nbytes
    if length == 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if not 0 <= offset < length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % dt.itemsize:
            raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be a "
                             f"multiple of element size ({dt.itemsize})")
    elif offset + count * dt.itemsize > length:
        raise ValueError(f"requested buffer length ({count} * {dt.itemsize} bytes) after offset ({offset} bytes) "
                         f"must not be greater than actual buffer length ({length} bytes)")
    t = Tensor._wrap(np.frombuffer(buffer, dt, count, offset), None, 0)
    if requires_grad:
        t.requires_grad_(True)
    return t


# deprecated accessors --------------------------------------------------------------------------
def _amp():
    from . import amp
    return amp


def _deprecated(old, new):
    warnings.warn(f"minidl.{old} is deprecated. Please use minidl.{new} instead.", DeprecationWarning, stacklevel=3)


def get_autocast_cpu_dtype():
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return _amp().get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype):
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    _amp().set_autocast_dtype("cpu", dtype)


def is_autocast_cpu_enabled():
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return _amp().is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled):
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    _amp().set_autocast_enabled("cpu", enabled)


def get_autocast_gpu_dtype():
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return _amp().get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype):
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    _amp().set_autocast_dtype("cuda", dtype)


def set_default_tensor_type(t, /):
    """Make the floating dtype of ``t`` (md.FloatTensor, md.DoubleTensor, md.HalfTensor or its
    name, "torch.FloatTensor" or "minidl.FloatTensor") the default dtype, as set_default_dtype;
    a CUDA type is refused (minidl's factories default to the CPU), as an integer type is."""
    warnings.warn("set_default_tensor_type() is deprecated as of PyTorch 2.1, please use set_default_dtype() and "
                  "set_default_device() as alternatives.", UserWarning, stacklevel=2)
    from .tensor.dtype import LEGACY_TYPE_NAMES
    from .tensor.legacy import LegacyTensorType
    if isinstance(t, LegacyTensorType):
        dtype = t.dtype
    elif isinstance(t, str):
        parts = t.split(".")
        if "cuda" in parts[:-1]:
            raise NotImplementedError(f"set_default_tensor_type({t!r}): minidl's factories always default to the "
                                      "CPU; use set_default_dtype and pass device='cuda' to them")
        by_legacy = {f"{v}Tensor": k for k, v in LEGACY_TYPE_NAMES.items()}
        if len(parts) != 2 or parts[0] not in ("torch", "minidl") or parts[1] not in by_legacy:
            raise TypeError(f"invalid type: {t!r}; expected a tensor type such as 'torch.FloatTensor'")
        dtype = by_legacy[parts[1]]
    else:
        raise TypeError(f"invalid type: expected a tensor type or its name, got {type(t).__name__}")
    _md().set_default_dtype(dtype)


METHODS = {"__dlpack__": _tensor_dlpack, "__dlpack_device__": _tensor_dlpack_device}
