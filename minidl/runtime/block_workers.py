"""Block workers: run the parts of one op concurrently on a persistent pool of Python threads.

A convolution's batch splits into blocks of whole images that need no communication until a
final sum (conv2d's dW and db). Run as Numba-parallel transforms alternating with BLAS GEMMs,
every block pays two pool hand-overs (Numba's threads, then OpenBLAS's), and the GEMMs are
too skinny for OpenBLAS to split well. Here each thread takes a contiguous share of the
images instead and runs it end to end: serial Numba kernels compiled with ``nogil=True`` and
single-threaded GEMMs (NumPy releases the GIL for both), so the threads meet once per op.

``run(fn, parts)`` calls ``fn(part)`` for every part, the first on the calling thread and the
others on the pool's workers, and returns the results in order. The pool holds up to
NUMBA_NUM_THREADS - 1 workers, started on first use and kept (a worker waits on a queue,
without spinning, between ops). Several user threads may call ``run`` at once: their parts
queue for the same workers, and each caller still does its own first part, so none waits on a
worker that waits on it. A worker that calls ``run`` (nothing in minidl does) runs the parts
itself, in order. An exception in any part is raised in the caller, after every part has
finished (the parts write into the caller's arrays). After ``os.fork`` the child makes a new
pool (a forked process has only the thread that forked).

BLAS: OpenBLAS's thread count is a process-wide setting, even through
``openblas_set_num_threads_local``, which in NumPy's pthreads build sets the same global
count. ``blas_threads.single_threaded`` therefore sets it to one for the time any ``run`` is
in progress (counted, so overlapping calls from two user threads restore it once, at the
end); a BLAS call made by another thread meanwhile runs on one thread too. Where the count
cannot be set (not OpenBLAS, or a build without the functions), ``available()`` is False and
callers keep their own parallel path.
"""
import os
import threading

from . import aligned_arrays

_lock = threading.Lock()
_pool = None
_worker = threading.local()   # .active: this thread is one of the pool's workers


def _mark_worker():
    _worker.active = True
    aligned_arrays.install()      # NumPy's handler is per thread (see aligned_arrays)


def _executor():
    """The pool, created on first use with NUMBA_NUM_THREADS - 1 workers (threads start as
    parts arrive, up to that many)."""
    global _pool
    with _lock:
        if _pool is None:
            import numba
            from concurrent.futures import ThreadPoolExecutor
            _pool = ThreadPoolExecutor(max(1, numba.config.NUMBA_NUM_THREADS - 1),
                                       thread_name_prefix="minidl-block", initializer=_mark_worker)
        return _pool


def _forget_pool():
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def available():
    """Can ``run`` give each part a single-threaded BLAS (see the module docstring)?"""
    from . import blas_threads
    return blas_threads.can_single_thread()


def in_worker():
    """Is the calling thread one of the pool's workers?"""
    return getattr(_worker, "active", False)


def run(fn, parts):
    """[fn(p) for p in parts], the first part on the calling thread and the rest on the
    workers, with BLAS on one thread meanwhile; the first exception (in part order) is
    re-raised once all parts are done."""
    parts = list(parts)
    if not parts:
        return []
    from . import blas_threads
    with blas_threads.single_threaded():
        if len(parts) == 1 or in_worker():
            return [fn(p) for p in parts]
        futures = [_executor().submit(fn, p) for p in parts[1:]]
        first = error = None
        try:
            first = fn(parts[0])
        except BaseException as e:    # still wait for the workers: they write into the caller's arrays
            error = e
        results = [first]
        for f in futures:
            try:
                results.append(f.result())
            except BaseException as e:
                error = error if error is not None else e
                results.append(None)
        if error is not None:
            raise error
        return results


def split(n, parts):
    """[a, b) ranges of n items in ``parts`` near-equal contiguous shares (none empty)."""
    parts = max(1, min(n, parts))
    return [(k * n // parts, (k + 1) * n // parts) for k in range(parts)]
