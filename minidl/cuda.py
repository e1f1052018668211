"""``md.cuda``: PyTorch's torch.cuda basics over minidl's numba.cuda device.

``is_available()`` says whether numba finds a usable GPU (or its simulator,
NUMBA_ENABLE_CUDASIM=1); asking does not load minidl's GPU kernels. The seeding functions
exist for scripts that call them: minidl's GPU draws (dropout masks) take their seed from
the global generator, so ``md.manual_seed`` already makes them reproducible and these change
nothing.
"""


def _numba_cuda():
    try:
        from numba import cuda
    except ImportError:     # pragma: no cover - numba is a hard dependency
        return None
    return cuda


def is_available():
    cuda = _numba_cuda()
    try:
        return bool(cuda is not None and cuda.is_available())
    except Exception:   # a broken driver install: no GPU to use, as PyTorch answers
        return False


def device_count():
    if not is_available():
        return 0
    return len(_numba_cuda().gpus)


def current_device():
    if not is_available():
        raise RuntimeError("Found no NVIDIA driver on your system (md.cuda.current_device needs a GPU)")
    return 0


def get_device_name(device=None):
    if not is_available():
        raise RuntimeError("Found no NVIDIA driver on your system (md.cuda.get_device_name needs a GPU)")
    name = _numba_cuda().get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def synchronize(device=None):
    """Wait for the GPU's queued work (nothing to wait for without one)."""
    if is_available():
        _numba_cuda().synchronize()


def manual_seed(seed):
    """Accepted for PyTorch scripts; GPU draws are seeded from md.manual_seed's generator."""
    int(seed)


def manual_seed_all(seed):
    int(seed)


def seed():
    pass


def seed_all():
    pass


def empty_cache():
    """Nothing to release: minidl keeps no GPU memory cache of its own."""


def is_initialized():
    return is_available()


def __getattr__(name):
    if name == "amp":   # md.cuda.amp.autocast / GradScaler (minidl/amp/device_amp.py)
        from .amp import device_amp
        return device_amp.cuda
    raise AttributeError(f"module 'minidl.cuda' has no attribute {name!r}")
