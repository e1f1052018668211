"""``md.cuda``: PyTorch's torch.cuda over minidl's numba.cuda device.

``is_available()`` says whether numba finds a usable GPU (or its simulator,
NUMBA_ENABLE_CUDASIM=1); asking does not load minidl's GPU kernels. minidl runs on one GPU per
process. Without one, the functions answer as PyTorch's do on a machine without a driver:
``is_available()`` False, ``device_count()`` 0, the memory readings 0, and a RuntimeError
from whatever needs the device.

The modules: ``memory`` (the bytes minidl's tensors hold, counted by ``allocator`` where minidl
allocates; the allocator's statistics; the device's free memory), ``streams`` (Stream, Event;
minidl's kernels run on the default stream), ``properties`` (what the device is; the ``device``
context managers), ``random`` (the GPU's random state, which is the global generator's) and
``legacy`` (``md.cuda.FloatTensor``...).

The seeding functions exist for scripts that call them: minidl's GPU draws (dropout masks) take
their seed from the global generator, so ``md.manual_seed`` already makes them reproducible and
these change nothing.
"""
from . import memory, random, streams  # noqa: F401
from ._device import current_device, device_count, is_available, set_device  # noqa: F401
from .allocator import OutOfMemoryError  # noqa: F401
from .memory import (empty_cache, max_memory_allocated, max_memory_cached, max_memory_reserved,  # noqa: F401
                     mem_get_info, memory_allocated, memory_cached, memory_reserved, memory_stats,
                     memory_stats_as_nested_dict, memory_summary, reset_accumulated_memory_stats,
                     reset_max_memory_allocated, reset_max_memory_cached, reset_peak_memory_stats)
from .properties import (device, device_of, get_arch_list, get_device_capability, get_device_name,  # noqa: F401
                         get_device_properties, is_bf16_supported)
from .random import get_rng_state, get_rng_state_all, initial_seed, set_rng_state, set_rng_state_all  # noqa: F401
from .streams import (Event, Stream, StreamContext, current_stream, default_stream, set_stream,  # noqa: F401
                      stream)
from . import _device


def synchronize(device=None):
    """Wait for the GPU's queued work (nothing to wait for without one)."""
    if is_available():
        _device.numba_cuda().synchronize()


def init():
    """Start the GPU now rather than at its first use (PyTorch's lazy initialization)."""
    _device.lazy_init("init")
    _device.numba_cuda().current_context()


def is_initialized():
    return is_available()


def ipc_collect():
    """Nothing to collect: minidl shares no GPU memory between processes (CUDA IPC)."""
    _device.lazy_init("ipc_collect")


def manual_seed(seed):
    """Accepted for PyTorch scripts; GPU draws are seeded from md.manual_seed's generator."""
    int(seed)


def manual_seed_all(seed):
    int(seed)


def seed():
    pass


def seed_all():
    pass


_LEGACY = {}


def __getattr__(name):
    if name == "amp":   # md.cuda.amp.autocast / GradScaler (minidl/amp/device_amp.py)
        from ..amp import device_amp
        return device_amp.cuda
    if name.endswith("Tensor"):     # md.cuda.FloatTensor... (legacy.py; built on first use)
        if not _LEGACY:
            from .legacy import cuda_legacy_types
            _LEGACY.update(cuda_legacy_types())
        if name in _LEGACY:
            return _LEGACY[name]
    raise AttributeError(f"module 'minidl.cuda' has no attribute {name!r}")
