"""NumPy's array buffers on 64-byte cache lines once minidl is imported (minidl.runtime.aligned_arrays)."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import minidl as md
from minidl.runtime import aligned_arrays

pytestmark = pytest.mark.skipif(not aligned_arrays.supported(), reason="needs Linux with glibc and Numba compiling")

SIZES = (aligned_arrays.ALIGNED_BYTES, 4096 + 8, 65_536 + 24, 3 << 20)    # bytes, none a multiple of 64 but one


def _run(code, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("MINIDL_ALIGNED_ARRAYS", "NUMBA_DISABLE_JIT")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                          check=True).stdout.strip()


def _handler():
    from numpy._core.multiarray import get_handler_name
    return get_handler_name()


def test_importing_minidl_installs_the_handler():
    assert _handler() == aligned_arrays.NAME
    assert md.runtime.tune_process()["aligned_arrays"] is True     # again: already installed


@pytest.mark.parametrize("nbytes", SIZES)
def test_arrays_of_every_making_start_on_a_cache_line(nbytes):
    n = nbytes // 8
    made = [np.empty(n), np.zeros(n), np.ones(n), np.full(n, 2.5), np.arange(n, dtype=np.float64),
            np.empty(n) + 1.0, np.exp(np.zeros(n)), np.ones((n, 1)) @ np.ones((1, 1)), np.zeros(n).copy(),
            np.concatenate([np.ones(n // 2), np.ones(n - n // 2)]), md.randn(nbytes // 4).numpy(), md.zeros(nbytes // 4).numpy()]
    assert all(aligned_arrays.is_aligned(a) for a in made)


def test_zeroed_memory_is_zero_after_dirty_memory_was_freed():
    for nbytes in SIZES:
        dirty = np.full(nbytes // 4, np.float32(7.0))
        del dirty
        z = np.zeros(nbytes // 4, np.float32)
        assert aligned_arrays.is_aligned(z) and not z.any()


def test_growing_arrays_keep_their_values_and_land_on_a_line():
    # np.fromiter of unknown length grows its buffer with realloc
    a = np.fromiter((float(i) for i in range(100_003)), dtype=np.float64)
    np.testing.assert_array_equal(a, np.arange(100_003, dtype=np.float64))
    assert aligned_arrays.is_aligned(a)
    b = np.resize(np.arange(10.0), 70_001)
    np.testing.assert_array_equal(b[:20], np.r_[np.arange(10.0), np.arange(10.0)])


def test_small_arrays_from_numpys_own_handler_are_zeroed_and_hold_their_values():
    # below ALIGNED_BYTES the callbacks pass NumPy's handler its context and its small-block cache
    for n in (1, 3, 17, aligned_arrays.ALIGNED_BYTES // 8 - 1):
        dirty = [np.full(n, 7.0) for _ in range(16)]
        del dirty
        assert not np.zeros(n).any()
        a = np.arange(n, dtype=np.float64)
        assert a.sum() == n * (n - 1) / 2


def test_arrays_of_another_thread_are_freed_by_their_own_handler():
    made = []

    def make():
        made.append(np.ones(100_000))         # NumPy's default handler: the thread did not install ours
        aligned_arrays.install()
        made.append(np.ones(100_000))

    t = threading.Thread(target=make)
    t.start()
    t.join()
    assert aligned_arrays.is_aligned(made[1])
    assert float(made[0].sum() + made[1].sum()) == 200_000.0
    del made[:]                               # each freed by the handler that made it


def test_allocating_and_freeing_does_not_grow_the_process():
    import resource
    for _ in range(200):
        np.ones(1 << 20).sum()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(2000):
        a = np.ones(1 << 20)                  # 8 MB each time
        del a
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024    # KiB


@pytest.mark.parametrize("env", [{"MINIDL_ALIGNED_ARRAYS": "0"}, {"NUMBA_DISABLE_JIT": "1"}])
def test_opt_out_and_no_jit_keep_numpys_handler(env):
    out = _run("import minidl, numpy as np; from numpy._core.multiarray import get_handler_name;"
               "print(get_handler_name(), minidl.runtime.tune_process()['aligned_arrays'], np.ones(10**5).sum())", **env)
    assert out == "default_allocator False 100000.0"


def test_a_users_own_handler_is_left_alone():
    code = ("import numpy as np; from minidl.runtime import aligned_arrays as A\n"
            "from numpy._core.multiarray import get_handler_name\n"
            "A.install(); A.NAME = 'someone_else'\n"      # ours now counts as the user's
            "print(A.install(), get_handler_name())")
    assert _run(code) == "False minidl_aligned_64"


def test_block_workers_allocate_aligned():
    from minidl.runtime import block_workers
    pool = block_workers._executor()
    assert pool.submit(lambda: aligned_arrays.is_aligned(np.ones(100_000))).result()


def test_the_process_exits_cleanly_with_arrays_freed_at_shutdown():
    code = ("import numpy as np, minidl, sys\n"
            "from minidl.runtime import aligned_arrays as A\n"
            "class Late:\n"
            "    def __init__(self): self.a = [np.ones(100_000) for _ in range(20)]\n"
            "keep = [np.ones(100_000) for _ in range(20)]\n"
            "sys.modules['zz_late'] = Late()\n"     # freed among the last modules at shutdown
            "print(all(A.is_aligned(a) for a in keep + sys.modules['zz_late'].a))")
    assert _run(code) == "True"               # check=True: a crash at exit would fail here


def test_ctypes_shared_python_api_is_left_as_it_was():
    code = "import ctypes, minidl; f = ctypes.pythonapi; print(f.PyCapsule_New.argtypes, f.PyCapsule_New.restype)"
    assert _run(code) == "None <class 'ctypes.c_int'>"
