"""When a CPU kernel runs on one thread or on Numba's pool, and how its work is split.

One threshold decides for every kernel: below SERIAL_BELOW elements a kernel runs on one
thread. Waking the thread pool costs microseconds on an idle machine and whole scheduler time
slices (milliseconds) when another process holds the other cores, while a small kernel takes
a microsecond or two on one core; finite-difference gradchecks make thousands of such calls.

The norm kernels run parallel above the threshold (``threads_for``, ``launch``). The layer
kernels (im2col/col2im, pooling, GELU, recurrent gates) run between multi-threaded BLAS calls
and are parallel only where the process is tuned for it as well (``layer_parallel``, see
``minidl.runtime.layer_threads``).

Row kernels split their rows into one chunk per thread (``num_chunks``, ``chunk_bounds``); the
layer kernels into a few chunks of planes per thread (``plane_chunks``), for balance. A layer
kernel is either one source compiled twice (``serial_and_parallel``: serial, for the calling
thread and the block workers, and parallel, for Numba's pool) or a serial core with a parallel
loop over it, whichever compiles faster (docs/performance.md).
"""
import types
from contextlib import contextmanager

import numba
from numba import njit

from ...runtime import layer_threads

SERIAL_BELOW = 1 << 16   # elements: below this a parallel launch costs more than it saves


def layer_parallel(n_elements):
    """Run a layer kernel's parallel variant for a problem of ``n_elements``?"""
    return layer_threads.allowed() and n_elements >= SERIAL_BELOW


@contextmanager
def threads_for(n_elements):
    """Run the kernels inside on one thread when ``n_elements`` is below SERIAL_BELOW."""
    if n_elements >= SERIAL_BELOW:
        yield
        return
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def launch(kernel, work, *args):
    """kernel(*args), on one thread when ``work`` (elements touched) is below SERIAL_BELOW."""
    with threads_for(work):
        return kernel(*args)


def num_chunks(n, work=None):
    """How many row chunks a kernel splits into: one per Numba thread (at least one row
    each), or one when ``work`` (elements) is small enough to run serially (see ``launch``);
    none for no rows, since the kernels' pipelined loops assume a chunk holds a row."""
    if n <= 0:
        return 0
    if work is not None and work < SERIAL_BELOW:
        return 1
    return max(1, min(int(n), numba.get_num_threads()))


def plane_chunks(n_items):
    """How many chunks a layer kernel splits ``n_items`` planes or images into: four per
    thread, so that a thread that finishes early takes another, and at least one."""
    return max(1, min(n_items, 4 * numba.get_num_threads()))


@njit(error_model="numpy", cache=True)
def chunk_bounds(n, nchunks, c):
    """Rows [start, stop) of chunk c when n rows are split into nchunks near-equal chunks."""
    return (c * n) // nchunks, ((c + 1) * n) // nchunks


def serial_and_parallel(**options):
    """Compile one kernel twice, as ``(serial, parallel)``: ``njit(nogil=True, **options)`` and
    ``njit(parallel=True, **options)``.

    The kernel's outermost loop is ``for chunk in prange(n_chunks)`` over chunks of its work
    (see ``chunk_bounds``); the body must not assign to the loop's name (Numba refuses to
    parallelise a loop whose index is overwritten). The serial compile runs that loop as a plain ``range`` with the GIL released,
    so conv2d's block workers call it concurrently, one image block each, with n_chunks = 1;
    the parallel compile hands the chunks to Numba's pool. The alternative, a parallel kernel
    whose prange loop calls the serial one, can cost LLVM several times the callee's compile
    time: unfold's serial kernel compiled in 1.2-2 s and such a wrapper around it in 12-16 s,
    against 5-7 s for the parallel compile of the one source. It does not always: im2col's and
    unfold_weight_grad's wrappers compile in about a second, less than a second compile of the
    whole kernel would take, and stay (docs/performance.md).

    The parallel compile is of a copy of the function named ``<name>_parallel``: Numba's
    on-disk cache names its files after the function and keys them by signature, not by
    options, so two compiles of one function object would read each other's machine code."""
    def compile_both(fn):
        twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_parallel", fn.__defaults__,
                                  fn.__closure__)
        twin.__qualname__, twin.__module__, twin.__doc__ = fn.__qualname__ + "_parallel", fn.__module__, fn.__doc__
        return njit(nogil=True, **options)(fn), njit(parallel=True, **options)(twin)
    return compile_both
