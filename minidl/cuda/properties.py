"""What the GPU is, and which one is current, as torch.cuda: ``get_device_properties``,
``get_device_capability``, ``get_device_name``, ``get_arch_list``, ``is_bf16_supported``, and
the ``device`` / ``device_of`` context managers.

numba's simulator stands for one device of compute capability 5.2 with one multiprocessor,
whose memory is the host's RAM.
"""
from . import _device

SIMULATOR_NAME = "numba.cuda simulator"


class _CudaDeviceProperties:
    """What ``get_device_properties`` returns (torch's _CudaDeviceProperties' main fields)."""

    def __init__(self, name, major, minor, total_memory, multi_processor_count, **more):
        self.name, self.major, self.minor = name, major, minor
        self.total_memory, self.multi_processor_count = total_memory, multi_processor_count
        for key, value in more.items():
            setattr(self, key, value)

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count}, uuid={self.uuid}, "
                f"L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)")


def _total_memory(idx):
    """The device's memory in bytes: from the CUDA context on the current device, else from the
    driver (numba has no context on the others)."""
    cuda = _device.numba_cuda()
    if idx == _device.current_device():
        return int(cuda.current_context().get_memory_info().total)
    from numba.cuda.cudadrv import driver as drv
    if drv.USE_NV_BINDING:      # pragma: no cover - needs two GPUs
        return int(drv.driver.cuDeviceTotalMem(drv.binding.CUdevice(idx)))
    import ctypes
    size = ctypes.c_size_t()
    drv.driver.lib.cuDeviceTotalMem_v2(ctypes.byref(size), ctypes.c_int(idx))   # pragma: no cover
    return int(size.value)      # pragma: no cover


def get_device_properties(device=None):
    """The device's name, compute capability (``major``, ``minor``), ``total_memory`` in bytes,
    ``multi_processor_count``, ``warp_size``, ``L2_cache_size``, ``uuid``...; read from numba's
    Device."""
    idx = _device.checked_index(device, "get_device_properties")
    if _device.simulated():
        major, minor = _device.numba_cuda().current_context().compute_capability
        return _CudaDeviceProperties(SIMULATOR_NAME, major, minor, _device.host_memory()[1], 1, warp_size=32,
                                     is_integrated=0, is_multi_gpu_board=0, max_threads_per_multi_processor=1024,
                                     L2_cache_size=0, uuid="GPU-00000000-0000-0000-0000-000000000000")
    dev = _device.numba_cuda().gpus[idx]
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    major, minor = dev.compute_capability
    return _CudaDeviceProperties(name, major, minor, _total_memory(idx), int(dev.MULTIPROCESSOR_COUNT),
                                 warp_size=int(dev.WARP_SIZE), is_integrated=int(dev.INTEGRATED),
                                 is_multi_gpu_board=int(dev.IS_MULTI_GPU_BOARD),
                                 max_threads_per_multi_processor=int(dev.MAX_THREADS_PER_MULTI_PROCESSOR),
                                 L2_cache_size=int(dev.L2_CACHE_SIZE), uuid=str(dev.uuid))


def get_device_capability(device=None):
    """(major, minor) compute capability."""
    props = get_device_properties(device)
    return props.major, props.minor


def get_device_name(device=None):
    return get_device_properties(device).name


def get_arch_list():
    """The architectures minidl's kernels can be compiled for, as "sm_XY": numba compiles them
    on first use, for any compute capability its NVVM supports (the simulated one under the
    simulator); [] without a device."""
    if not _device.is_available():
        return []
    if _device.simulated():
        major, minor = _device.numba_cuda().current_context().compute_capability
        return [f"sm_{major}{minor}"]
    from numba.cuda.cudadrv import nvvm
    ccs = nvvm.get_supported_ccs() or (get_device_capability(),)
    return [f"sm_{major}{minor}" for major, minor in ccs]


def is_bf16_supported(including_emulation=True):
    """Whether bfloat16 tensors work on the GPU. They always do on minidl's: they are kept as
    their 16 bits and computed in float32 (backends/cuda/array.py), which counts as emulation;
    ``including_emulation=False`` asks for native bfloat16 arithmetic (compute capability 8.0 or
    newer). False without a device."""
    if not _device.is_available():
        return False
    return True if including_emulation else get_device_capability() >= (8, 0)


class device:   # noqa: N801  (PyTorch's name)
    """``with md.cuda.device(i):`` makes device i current for the block (None or a negative
    index: nothing changes). minidl runs on one GPU per process (see set_device)."""

    def __init__(self, device):
        self.idx = _device.device_index(device, optional=True) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        if self.idx < 0:
            return
        self.prev_idx = _device.current_device()
        if self.prev_idx != self.idx:
            _device.set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev_idx >= 0 and self.prev_idx != self.idx:
            _device.set_device(self.prev_idx)
        return False


class device_of(device):   # noqa: N801
    """``with md.cuda.device_of(t):`` makes the GPU that tensor ``t`` lives on current (a CPU
    tensor changes nothing)."""

    def __init__(self, obj):
        dev = obj.device
        super().__init__((dev.index or 0) if dev.type == "cuda" else -1)
