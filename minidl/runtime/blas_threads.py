"""NumPy's OpenBLAS: let its idle worker threads sleep almost at once after a matrix product.

OpenBLAS's workers spin for 2^28 cycles (about 0.1 s) after each call, waiting for the
next one. In a training step the next call is often a Numba kernel instead, whose own
threads then share their cores with spinning BLAS workers: on 2 cores a parallel im2col
right after a GEMM ran slower than a serial one. OpenBLAS reads the spin time from
OPENBLAS_THREAD_TIMEOUT (as 2^n cycles, n >= 4) when its pool starts, normally when NumPy is
imported, i.e. before minidl can set anything. ``shorten_blas_spin`` therefore sets the
variable, asks OpenBLAS to re-read its environment (``openblas_read_env``) and stops its pool
(``blas_thread_shutdown_``); the next BLAS call starts a new pool, which spins for 2^4 cycles.
With it, training steps with parallel layer kernels run faster (measurements:
docs/performance.md).

Only for an OpenBLAS that exports those two functions (NumPy's wheels do); anything else
(MKL, Accelerate, a static build) is left alone, as is a timeout the user set. Set
MINIDL_BLAS_SPIN=default to keep OpenBLAS's own.
"""
import ctypes
import os

TIMEOUT = "4"     # 2^4 cycles: sleep almost at once
_VAR = "OPENBLAS_THREAD_TIMEOUT"
SHORT = False     # does BLAS now leave the cores to other threads at once? (set by shorten_blas_spin)


def _loaded_openblas():
    """Paths of the OpenBLAS libraries loaded in this process (Linux: /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line}
    except OSError:
        return []
    return sorted(paths)


def shorten_blas_spin():
    """Restart OpenBLAS's pool with a short spin (see the module docstring); True if done."""
    global SHORT
    if _VAR in os.environ:           # the user's choice: short if at most 2^10 cycles
        SHORT = os.environ[_VAR].strip().isdigit() and int(os.environ[_VAR]) <= 10
        return False
    if os.environ.get("MINIDL_BLAS_SPIN") == "default":
        return False
    done = False
    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
            read_env, shutdown = lib.openblas_read_env, lib.blas_thread_shutdown_
        except (OSError, AttributeError):
            continue
        os.environ[_VAR] = TIMEOUT
        try:
            read_env()
        finally:
            del os.environ[_VAR]       # read: no need to pass it on to child processes
        shutdown()
        done = True
    SHORT = done
    return done
