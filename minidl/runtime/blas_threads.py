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

``single_threaded()`` holds OpenBLAS at one thread while ops run their own threads, each
calling BLAS (``minidl.runtime.block_workers``). OpenBLAS's thread count is one process-wide
number (``openblas_set_num_threads_local`` sets the same number in NumPy's pthreads build), so
the setting is counted: the first of overlapping holders lowers it, the last restores what it
found. Setting it costs well under a microsecond.
"""
import contextlib
import ctypes
import os
import threading

TIMEOUT = "4"     # 2^4 cycles: sleep almost at once
_VAR = "OPENBLAS_THREAD_TIMEOUT"
SHORT = False     # does BLAS now leave the cores to other threads at once? (set by shorten_blas_spin)


def loaded_openblas():
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
    for path in loaded_openblas():
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


# (set, get) thread-count functions under the names OpenBLAS builds export them
_COUNT_FUNCTIONS = (("openblas_set_num_threads", "openblas_get_num_threads"),
                    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
                    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"))
_counts = None          # [(set, get)] of the loaded OpenBLAS libraries, found on first use
_holders = 0            # single_threaded() blocks in progress, over all threads
_saved = []             # the thread counts the first holder found
_hold_lock = threading.Lock()


def _count_functions():
    global _counts
    if _counts is None:
        found = []
        for path in loaded_openblas():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for set_name, get_name in _COUNT_FUNCTIONS:
                try:
                    setter, getter = getattr(lib, set_name), getattr(lib, get_name)
                except AttributeError:
                    continue
                setter.restype, setter.argtypes = None, [ctypes.c_int]
                getter.restype, getter.argtypes = ctypes.c_int, []
                found.append((setter, getter))
                break
        _counts = found
    return _counts


def can_single_thread():
    """Can ``single_threaded`` set NumPy's BLAS to one thread (an OpenBLAS that exports its
    thread-count functions is loaded)?"""
    return bool(_count_functions())


@contextlib.contextmanager
def single_threaded():
    """OpenBLAS on one thread inside the block, for every thread of the process (see the
    module docstring); nothing changes where ``can_single_thread()`` is False."""
    global _holders, _saved
    counts = _count_functions()
    if not counts:
        yield
        return
    with _hold_lock:
        if _holders == 0:
            _saved = [get() for _, get in counts]
            for set_, _ in counts:
                set_(1)
        _holders += 1
    try:
        yield
    finally:
        with _hold_lock:
            _holders -= 1
            if _holders == 0:
                for (set_, _), n in zip(counts, _saved):
                    set_(n)


def _after_fork_in_child():
    """A fork taken while a holder was inside ``single_threaded`` leaves the child with no such
    holder: restore the count it found."""
    global _holders, _hold_lock
    _hold_lock = threading.Lock()
    if _holders:
        _holders = 0
        for (set_, _), n in zip(_counts or [], _saved):
            set_(n)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
