"""Devices and their array namespaces.

Every op is written once against an *array namespace* ``xp``: NumPy on the CPU. A
second device slots in by registering a Backend whose ``xp`` offers the same functions
(``xp.exp``, ``xp.sum``, ``xp.matmul``...) over its own array type, built from generic
map / zip / reduce / matmul kernels, plus its own fused kernels (``minidl.kernels.<device>``).
Ops find the namespace of their operands with ``namespace_of`` and never import NumPy's
device-specific pieces directly, so they run unchanged on any registered device.
"""
import numpy as np


class Backend:
    """What minidl needs to know about one device."""

    name = "?"
    xp = None            # the array namespace (module-like)
    array_type = None    # the type of its arrays

    def from_host(self, array):
        raise NotImplementedError

    def to_host(self, array):
        raise NotImplementedError

    def assert_all(self, ok, error, message):
        """``if not ok.all(): raise error(message)``; a device may defer it (see CudaBackend)."""
        if not bool(ok.all()):
            raise error(message)

    fused_adam = None   # optional one-kernel optimizer updates (minidl/optim uses them when set)
    fused_sgd = None

    def fused_adam_many(self, updates, lr, beta1, beta2, eps, wd, decoupled, amsgrad, maximize):
        """Adam(W) steps for a group's parameters on this device, ``updates`` holding each one's
        (w, g, m, v, vmax, step): returns the updates left undone (for the generic path). Here
        one ``fused_adam`` per parameter; a device may batch them (CPUBackend)."""
        if self.fused_adam is None:
            return list(updates)
        return [u for u in updates
                if not self.fused_adam(*u[:5], lr, beta1, beta2, eps, wd, u[5], decoupled, amsgrad, maximize)]

    def dropout_mask(self, shape, p, dtype):
        """The scaled dropout keep mask drawn on this device (ops/activation.py draws the CPU's)."""
        raise NotImplementedError(f"dropout masks are not implemented for device {self.name!r}")


class CPUBackend(Backend):
    name = "cpu"
    xp = np
    array_type = np.ndarray

    def from_host(self, array):
        return np.asarray(array)

    def to_host(self, array):
        return array

    @staticmethod
    def fused_adam_many(*args):
        from ..kernels.cpu import optim as _optim   # Numba: imported on the first update, not with minidl
        return _optim.adam_many(*args)

    @staticmethod
    def fused_sgd(*args):
        from ..kernels.cpu import optim as _optim
        return _optim.sgd(*args)


_BACKENDS = {"cpu": CPUBackend()}


def register(backend):
    _BACKENDS[backend.name] = backend


def get(device):
    """The Backend for a device name ("cpu", "cuda", "cuda:0")."""
    name = str(device).split(":")[0]
    backend = _BACKENDS.get(name)
    if backend is not None:
        return backend
    if name == "cuda":
        from . import cuda_loader  # registers the backend or explains why it cannot
        return cuda_loader.load()
    raise RuntimeError(f"unknown device {device!r}; expected one of {sorted(_BACKENDS) + ['cuda']}")


def device_of(array):
    """The device name an array lives on."""
    if type(array) is np.ndarray:
        return "cpu"
    for backend in _BACKENDS.values():
        if isinstance(array, backend.array_type):
            return backend.name
    return "cpu"


def namespace_of(array):
    """The array namespace (``xp``) for an array: NumPy for ndarrays."""
    if type(array) is np.ndarray:
        return np
    return get(device_of(array)).xp


# PyTorch's library switches: md.backends.cudnn / .mps / .cuda (flags.py, cuda_flags.py)
from . import cuda_flags as cuda  # noqa: E402  (replaced by the device module of that name once loaded)
from .flags import cudnn, mps  # noqa: E402
