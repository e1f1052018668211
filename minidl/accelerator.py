"""``md.accelerator``: which accelerator this process can use, as torch.accelerator.

minidl's only accelerator is the CUDA device (numba.cuda): ``current_accelerator()`` is
``md.device("cuda", 0)`` when md.cuda.is_available(), else None.
"""
from . import cuda as _cuda


def is_available():
    return _cuda.is_available()


def device_count():
    return _cuda.device_count()


def current_accelerator(check_available=False):
    from .tensor.device import device
    return device("cuda", 0) if _cuda.is_available() else None


def current_device_index():
    return 0 if _cuda.is_available() else -1


def synchronize(device=None):
    _cuda.synchronize(device)
