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
layer kernels into a few chunks of planes per thread (``plane_chunks``), for balance.
"""
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
