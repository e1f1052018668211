"""A tensor's storage as an object: PyTorch's ``Tensor.untyped_storage()``, the deprecated
``Tensor.storage()`` and ``Tensor.is_set_to``.

minidl keeps no storage objects: a tensor's memory is its array, and its storage is the array
that owns that memory (``ops/as_strided.py``: ``storage_root``, ``flat_storage``). The objects
here are made on request over that memory: ``UntypedStorage`` sees it as bytes, ``TypedStorage``
as elements of the tensor's dtype; both share it (a write through one is seen by the tensor).

So the usual "do these tensors share memory?" check ports unchanged: every view of a tensor
(a slice, a transpose, ``view``, ``expand``) has the same storage, hence the same
``untyped_storage().data_ptr()``, while a copy has another.
"""
import warnings

import numpy as np

from ..ops.as_strided import flat_storage, storage_root, strides_of

_TYPED_DEPRECATED = ("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
                     "only storage class. This should only matter to you if you are using storages directly.  To "
                     "access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()")


def _host_array(t, what):
    data = t._data
    if type(data) is not np.ndarray:
        raise NotImplementedError(f"{what} is not supported for tensors on device '{t.device}' (minidl exposes "
                                  "storages of CPU tensors only)")
    return data


def _owner(a):
    """The array whose whole memory is ``a``'s storage (flat_storage's choice of it)."""
    root = storage_root(a)
    if root.ndim and not (root.flags.c_contiguous or root.flags.f_contiguous):
        return a
    return root


def _bytes_of(root):
    return root.reshape(-1, order="A").view(np.uint8) if root.size else np.zeros(0, np.uint8)


class UntypedStorage:
    """Memory as bytes: ``UntypedStorage(n)`` allocates n zeroed bytes (PyTorch leaves them
    uninitialised); ``t.untyped_storage()`` is the memory of tensor t."""

    def __init__(self, size=0, *, device=None):
        if device is not None and str(device) != "cpu":
            raise NotImplementedError(f"UntypedStorage is not supported on device '{device}' (cpu only)")
        if isinstance(size, (bool, float)) or not hasattr(size, "__index__"):
            raise TypeError(f"UntypedStorage(): argument 'size' must be int, not {type(size).__name__}")
        if int(size) < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {int(size)}: [{int(size)}]")
        self._bytes = np.zeros(int(size), np.uint8)

    @classmethod
    def _over(cls, data):
        s = object.__new__(cls)
        s._bytes = _bytes_of(_owner(data))
        return s

    @property
    def device(self):
        from .device import device
        return device("cpu")

    @property
    def is_cuda(self):
        return False

    @property
    def dtype(self):
        from . import dtype
        return dtype.uint8

    def nbytes(self):
        return int(self._bytes.nbytes)

    def size(self):
        return self.nbytes()

    def __len__(self):
        return self.nbytes()

    def element_size(self):
        return 1

    def data_ptr(self):
        return int(self._bytes.ctypes.data)

    def tolist(self):
        return self._bytes.tolist()

    def __getitem__(self, i):
        return int(self._bytes[i]) if not isinstance(i, slice) else UntypedStorage._from_bytes(self._bytes[i])

    def __setitem__(self, i, value):
        self._bytes[i] = value

    @classmethod
    def _from_bytes(cls, b):
        s = object.__new__(cls)
        s._bytes = b
        return s

    def fill_(self, value):
        self._bytes[...] = value
        return self

    def is_shared(self):
        return False

    def is_pinned(self, device="cuda"):
        return False

    def cpu(self):
        return self

    def clone(self):
        return UntypedStorage._from_bytes(self._bytes.copy())

    def copy_(self, source, non_blocking=None):
        if source.nbytes() != self.nbytes():
            raise RuntimeError(f"size mismatch: copying a storage of {source.nbytes()} bytes into one of "
                               f"{self.nbytes()} bytes")
        self._bytes[...] = source._bytes
        return self

    def __iter__(self):
        return iter(self.tolist())

    def __repr__(self):
        body = "\n".join(f" {v}" for v in self._bytes.tolist())
        return f"{body}\n[minidl.storage.UntypedStorage(device=cpu) of size {self.nbytes()}]".lstrip("\n")


class TypedStorage:
    """Memory as elements of one dtype (PyTorch's deprecated storage class): ``t.storage()``."""

    def __init__(self, *args, **kwargs):
        raise TypeError("TypedStorage(): minidl makes typed storages from tensors only (tensor.storage())")

    @classmethod
    def _over(cls, data):
        s = object.__new__(cls)
        s._flat = flat_storage(data)[0]
        return s

    @property
    def dtype(self):
        from . import dtype
        return dtype.wrap(self._flat.dtype)

    @property
    def device(self):
        from .device import device
        return device("cpu")

    @property
    def is_cuda(self):
        return False

    def size(self):
        return int(self._flat.size)

    def __len__(self):
        return self.size()

    def element_size(self):
        return int(self._flat.dtype.itemsize)

    def nbytes(self):
        return self.size() * self.element_size()

    def data_ptr(self):
        return int(self._flat.ctypes.data)

    def tolist(self):
        return self._flat.tolist()

    def __getitem__(self, i):
        return self._flat[i].item()

    def __setitem__(self, i, value):
        self._flat[i] = value

    def __iter__(self):
        return iter(self.tolist())

    def untyped(self):
        return UntypedStorage._over(self._flat)

    def _untyped_storage(self):
        return self.untyped()

    def fill_(self, value):
        self._flat[...] = value
        return self

    def is_shared(self):
        return False

    def cpu(self):
        return self

    def __repr__(self):
        body = "\n".join(f" {v}" for v in self._flat.tolist())
        return f"{body}\n[minidl.storage.TypedStorage(dtype={self.dtype}, device=cpu) of size {self.size()}]".lstrip()


def untyped_storage(self):
    """The tensor's memory as an UntypedStorage (shared, not copied)."""
    return UntypedStorage._over(_host_array(self, "untyped_storage()"))


def storage(self):
    """The tensor's memory as a TypedStorage of its dtype (deprecated, as in PyTorch)."""
    warnings.warn(_TYPED_DEPRECATED, UserWarning, stacklevel=2)
    return TypedStorage._over(_host_array(self, "storage()"))


def is_set_to(self, tensor):
    """True when both tensors name the same memory the same way: one storage, and the same storage
    offset, size and stride."""
    a, b = self._data, tensor._data
    if type(a) is not np.ndarray or type(b) is not np.ndarray:
        return a is b
    if a.dtype != b.dtype or a.shape != b.shape or strides_of(a) != strides_of(b):
        return False
    ra, rb = _bytes_of(_owner(a)), _bytes_of(_owner(b))
    return (ra.ctypes.data == rb.ctypes.data and ra.nbytes == rb.nbytes
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


# installed by _namespace.py's tables
BOTH = {}
MODULE_ONLY = {"UntypedStorage": UntypedStorage, "TypedStorage": TypedStorage}
METHODS_ONLY = {"untyped_storage": untyped_storage, "storage": storage, "is_set_to": is_set_to}
