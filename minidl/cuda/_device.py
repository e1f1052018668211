"""What the other ``md.cuda`` modules ask of numba.cuda: whether there is a device, which one
is current, and PyTorch's parsing of device arguments.

minidl runs on one GPU per process, the one numba's CUDA context is on (device 0 unless
``set_device`` picks another before the first GPU work). Without a device every function
that needs one raises the RuntimeError PyTorch raises there (built with CUDA, no driver).
"""
import os

_current = 0    # the device index set_device chose


def numba_cuda():
    try:
        from numba import cuda
    except ImportError:     # pragma: no cover - numba is a hard dependency
        return None
    return cuda


def simulated():
    """Whether numba.cuda is its simulator (NUMBA_ENABLE_CUDASIM=1): one device, kernels run
    on the host, synchronously."""
    from numba import config
    return bool(config.ENABLE_CUDASIM)


def is_available():
    cuda = numba_cuda()
    try:
        return bool(cuda is not None and cuda.is_available())
    except Exception:   # a broken driver install: no GPU to use, as PyTorch answers
        return False


def device_count():
    if not is_available():
        return 0
    return len(numba_cuda().gpus)


def lazy_init(what):
    """Raise PyTorch's no-driver RuntimeError unless there is a device (``what`` names the
    function that needs it)."""
    if not is_available():
        raise RuntimeError(f"Found no NVIDIA driver on your system: minidl.cuda.{what} needs a GPU, and "
                           f"numba.cuda finds none (set NUMBA_ENABLE_CUDASIM=1 to run minidl's cuda device in "
                           f"numba's simulator)")


def current_device():
    lazy_init("current_device")
    return _current


def device_index(device, optional=False):
    """PyTorch's ``_get_device_index``: an int is the index; a "cuda:i" string or device gives
    i; "cuda" and None give the current device when ``optional``; any other type of device is a
    ValueError."""
    from ..tensor.device import device as _device
    if isinstance(device, bool):
        raise ValueError(f"Expected a minidl.device with a specified index or an integer, but got:{device}")
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = _device(device)
    if isinstance(device, _device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        if device.index is not None:
            return device.index
    elif device is not None:
        raise ValueError(f"Expected a minidl.device with a specified index or an integer, but got:{device}")
    if optional:
        return current_device()
    raise ValueError(f"Expected a minidl.device with a specified index or an integer, but got:{device}")


def checked_index(device, what):
    """The index of an existing device (``device`` None: the current one)."""
    lazy_init(what)
    idx = device_index(device, optional=True)
    if not 0 <= idx < device_count():
        raise AssertionError(f"Invalid device id {idx} for minidl.cuda.{what}: this process sees "
                             f"{device_count()} CUDA device(s)")
    return idx


def set_device(device):
    """Make ``device`` the current device (a negative index does nothing, as in PyTorch).

    minidl uses one GPU per process: numba binds its CUDA context to one device for good, so
    another device can be chosen only before the first GPU work (or with CUDA_VISIBLE_DEVICES)."""
    global _current
    idx = device_index(device)
    if idx < 0:
        return
    lazy_init("set_device")
    if idx >= device_count():
        raise RuntimeError(f"CUDA error: invalid device ordinal: minidl.cuda.set_device({idx}) on a process "
                           f"that sees {device_count()} CUDA device(s)")
    if idx != _current:
        try:
            numba_cuda().select_device(idx)
        except RuntimeError as exc:
            raise RuntimeError(f"minidl.cuda.set_device({idx}): minidl runs on one GPU per process and its CUDA "
                               f"context is already on device {_current}; choose the device before the first "
                               f"GPU work, or with CUDA_VISIBLE_DEVICES ({exc})") from exc
    _current = idx


def host_memory():
    """(free, total) bytes of the host's RAM: the simulator's device memory is the host's."""
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    except (ValueError, OSError, AttributeError):   # pragma: no cover - not a POSIX host
        return 0, 0
