"""Loads the numba.cuda backend on first use of device="cuda"."""


def load():
    try:
        from numba import cuda
    except ImportError as exc:  # pragma: no cover - numba is a hard dependency
        raise RuntimeError("device 'cuda' needs numba.cuda, which failed to import") from exc
    if not cuda.is_available():
        raise RuntimeError(
            "device 'cuda' was asked for but no CUDA GPU is available; on a machine without a GPU "
            "set NUMBA_ENABLE_CUDASIM=1 to run the cuda kernels in numba's simulator")
    from . import register
    from .cuda import CudaBackend
    backend = CudaBackend()
    register(backend)
    return backend
