"""The layer kernels' two compiles of one source (minidl.kernels.cpu._threads.serial_and_parallel):
the serial one releases the GIL (conv2d's block workers call it from several threads), the
parallel one runs its chunk loop on Numba's pool, both cover every item once for any chunk
count, and each has cache files of its own."""
import threading

import numba
import numpy as np
import pytest
from numba import prange

from minidl.kernels.cpu import _threads
from minidl.kernels.cpu import pooling as k_pool
from minidl.kernels.cpu import unfold as k_unfold

PAIRS = {
    "unfold": (k_unfold._unfold_images, k_unfold._unfold_parallel),
    "fold": (k_unfold._fold_images, k_unfold._fold_parallel),
    "max_pool": (k_pool._max_fwd_planes, k_pool._max_fwd_planes_parallel),
    "max_pool_2x2": (k_pool._max_fwd_planes_2x2, k_pool._max_fwd_planes_2x2_parallel),
    "max_pool_backward": (k_pool._max_bwd_planes, k_pool._max_bwd_planes_parallel),
    "avg_pool": (k_pool._avg_fwd_planes, k_pool._avg_fwd_planes_parallel),
    "avg_pool_backward": (k_pool._avg_bwd_planes, k_pool._avg_bwd_planes_parallel),
}


def _square_rows(x, out, n0, n1, n_chunks):
    for chunk in prange(n_chunks):
        lo, hi = _threads.chunk_bounds(n1 - n0, n_chunks, chunk)
        for i in range(n0 + lo, n0 + hi):
            for j in range(x.shape[1]):
                out[i, j] = x[i, j] * x[i, j]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_each_layer_kernel_is_one_source_compiled_twice(name):
    serial, parallel = PAIRS[name]
    if isinstance(serial, numba.core.registry.CPUDispatcher):
        assert serial.targetoptions.get("nogil") and not serial.targetoptions.get("parallel")
        assert parallel.targetoptions.get("parallel") and not parallel.targetoptions.get("nogil")
        # own cache files: Numba keys them by name and signature, not by options
        assert serial._cache._cache_file._index_name != parallel._cache._cache_file._index_name
        serial, parallel = serial.py_func, parallel.py_func
    assert parallel.__code__ is serial.__code__
    assert parallel.__qualname__ == serial.__qualname__ + "_parallel"


@pytest.mark.parametrize("n0, n1, n_chunks", [(0, 7, 1), (0, 7, 3), (2, 7, 5), (0, 7, 7), (3, 3, 2)])
def test_both_compiles_cover_every_item_once_for_any_chunk_count(n0, n1, n_chunks):
    serial, parallel = _threads.serial_and_parallel(error_model="numpy")(_square_rows)
    x = np.random.default_rng(0).standard_normal((7, 5))
    for kernel in (serial, parallel):
        out = np.full_like(x, np.nan)
        kernel(x, out, n0, n1, n_chunks)
        np.testing.assert_array_equal(out[n0:n1], x[n0:n1] ** 2)
        assert np.isnan(out[:n0]).all() and np.isnan(out[n1:]).all()


def test_two_threads_may_call_the_serial_compile_at_once():
    serial, _ = _threads.serial_and_parallel(error_model="numpy")(_square_rows)
    x = np.random.default_rng(1).standard_normal((4000, 500))
    outs = [np.empty_like(x) for _ in range(2)]
    serial(x, outs[0], 0, 1, 1)   # compile first
    errors = []

    def run(out):
        try:
            serial(x, out, 0, len(x), 1)
        except BaseException as e:    # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(o,)) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for out in outs:
        np.testing.assert_array_equal(out, x ** 2)
