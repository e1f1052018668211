"""md.set_num_threads / md.get_num_threads: the threads minidl's CPU kernels use.

The kernels run on Numba's thread pool; ``set_num_threads`` sets how many of its threads
they use, as torch.set_num_threads sets PyTorch's intra-op threads. Numba cannot grow its
pool beyond the size it started with (NUMBA_NUM_THREADS, the number of cores by default), so
a larger request uses the whole pool. NumPy's BLAS keeps its own thread count
(OPENBLAS_NUM_THREADS before start-up).
"""
import numbers


def _start():
    from .runtime import thread_pool
    thread_pool.start()       # with the short spinning it is meant to start with
    import numba
    return numba


def set_num_threads(num):
    if isinstance(num, bool) or not isinstance(num, numbers.Integral):
        raise TypeError(f"set_num_threads expected an int, got {type(num).__name__}")
    if num <= 0:
        raise RuntimeError(f"Expected num_threads > 0, got {num}")
    numba = _start()
    numba.set_num_threads(min(int(num), numba.config.NUMBA_NUM_THREADS))


def get_num_threads():
    return int(_start().get_num_threads())


def set_num_interop_threads(num):
    """Accepted for PyTorch scripts; minidl runs one op at a time, with no inter-op pool."""
    if isinstance(num, bool) or not isinstance(num, numbers.Integral) or num <= 0:
        raise RuntimeError(f"Expected num_threads > 0, got {num!r}")


def get_num_interop_threads():
    return 1
