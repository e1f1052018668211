"""The CPU kernels' runtime pieces: the vectorisable float32 exp and the process tuning (minidl.runtime)."""
import ast
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

from minidl.kernels.cpu._fastexp import exp32


@njit(error_model="numpy")
def _exp_all(x, out):
    for i in range(x.size):
        out[i] = exp32(x[i])


def _exp(x):
    x = np.asarray(x, np.float32)
    out = np.empty_like(x)
    _exp_all(x, out)
    return out


def test_exp32_is_as_accurate_as_numpy_float32_exp_over_its_range():
    x = np.linspace(-87.3, 88.3, 200_001, dtype=np.float32)
    exact = np.exp(x.astype(np.float64))
    rel = np.abs(_exp(x) - exact) / exact
    assert rel.max() < 2e-7
    assert rel.max() <= (np.abs(np.exp(x) - exact) / exact).max()


def test_exp32_edges_nan_underflow_and_overflow():
    out = _exp([np.nan, 0.0, -1000.0, -np.inf, -87.4, -87.3, np.inf, 1000.0, 88.4])
    assert np.isnan(out[0])
    assert out[1] == 1.0
    assert (out[2:5] == 0).all()              # below the normal range: exactly 0, never a subnormal
    assert abs(out[5] / np.exp(np.float64(np.float32(-87.3))) - 1) < 2e-7   # the range's edge: still exact
    assert np.isposinf(out[6:]).all()
    sub = _exp(np.linspace(-200, -80, 10_001, dtype=np.float32))
    assert not ((sub != 0) & (sub < np.finfo(np.float32).tiny)).any()


def _run(code, **env):
    full = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("user_value", [None, "5"])
def test_starting_the_pool_leaves_the_environment_as_it_was(user_value):
    env = {} if user_value is None else {"GOMP_SPINCOUNT": user_value}
    out = _run("import os, minidl.kernels.cpu, numba; numba.get_num_threads();"
               "print(os.environ.get('GOMP_SPINCOUNT'))", **env)
    assert out.strip() == str(user_value)


_SPIN_BURN = """
import time, numpy as np, minidl.kernels.cpu, numba
from numba import njit, prange
if numba.get_num_threads() < 2:
    print("skip"); raise SystemExit
@njit(parallel=True)
def touch(a):
    for i in prange(a.shape[0]):
        a[i] += 1.0
a = np.zeros(64)
touch(a)
if numba.threading_layer() != "omp":
    print("skip"); raise SystemExit
burnt = []
for _ in range(15):
    touch(a)                       # its worker then spins before it sleeps
    c0 = time.process_time(); time.sleep(0.02); burnt.append(time.process_time() - c0)
print(sorted(burnt)[len(burnt) // 2])
"""


def test_numbas_idle_worker_stops_spinning_soon_after_a_kernel():
    # the CPU time the process burns while its main thread sleeps 20 ms after a parallel
    # kernel is the worker's spin: minidl's short count against a long one the user sets
    ours = _run(_SPIN_BURN).strip()
    if ours == "skip":
        pytest.skip("needs Numba's OpenMP pool with two threads or more")
    long = float(_run(_SPIN_BURN, GOMP_SPINCOUNT="3000000"))
    assert float(ours) < 0.002 < long, (ours, long)


def test_importing_minidl_keeps_freed_arrays_in_the_process_unless_told_not_to():
    # M_MMAP_THRESHOLD raised: a 64 MB array now comes from the heap, not from a fresh mmap,
    # so freeing it and allocating again does not page-fault (minor faults stay near zero)
    code = ("import resource, numpy as np, minidl\n"
            "a = np.ones(1 << 24, np.float32); del a\n"
            "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
            "for _ in range(5):\n"
            "    a = np.ones(1 << 24, np.float32); del a\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)")
    kept = int(_run(code))
    fresh = int(_run(code, MINIDL_KEEP_FREED_MEMORY="0"))
    assert fresh > 5 * 30            # 5 x 64 MB faulted in again (at least one fault per 2 MB huge page)
    assert kept < fresh / 10, (kept, fresh)


@pytest.mark.parametrize("env, kept", [
    ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}, True),                     # another tunable: thresholds still raised
    ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=0"}, False),
    ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}, False),
    ({"MALLOC_MMAP_THRESHOLD_": "65536"}, False),
    ({"MALLOC_TRIM_THRESHOLD_": "0"}, False)])
def test_the_users_own_malloc_thresholds_stand_and_other_tunables_combine(env, kept):
    out = _run("import minidl; print(minidl.runtime.tune_process()['keep_freed_memory'])", **env)
    assert out.strip() == str(kept)


def test_importing_minidl_shortens_openblas_spin_and_keeps_blas_threaded():
    pytest.importorskip("threadpoolctl")
    code = ("import ctypes, numpy as np, minidl\n"
            "from minidl.runtime import blas_threads\n"
            "from threadpoolctl import threadpool_info\n"
            "a = np.ones((256, 256), np.float32); a @ a\n"
            "timeouts = [ctypes.CDLL(p).openblas_thread_timeout() for p in blas_threads.loaded_openblas()]\n"
            "threads = [i['num_threads'] for i in threadpool_info() if i['internal_api'] == 'openblas']\n"
            "print(blas_threads.SHORT, '|', timeouts, '|', threads)")
    out = _run(code)
    if "[] | []" in out:
        pytest.skip("NumPy is not linked to a loadable OpenBLAS here")
    short, timeouts, threads = (part.strip() for part in out.split("|"))
    # every OpenBLAS loaded by then (NumPy's; SciPy's too where Numba's compiler loaded it) re-read the timeout
    assert short == "True" and set(ast.literal_eval(timeouts)) == {4}
    assert 0 not in ast.literal_eval(threads)                           # its pool still exists
    short, timeouts, _ = (part.strip() for part in _run(code, OPENBLAS_THREAD_TIMEOUT="20").split("|"))
    assert short == "False" and set(ast.literal_eval(timeouts)) == {20}  # the user's own setting stands


def test_process_tuning_has_one_entry_point_that_honours_the_opt_outs():
    code = ("import minidl\n"
            "print(sorted(minidl.runtime.tune_process().items()))")
    assert _run(code, MINIDL_KEEP_FREED_MEMORY="0", MINIDL_BLAS_SPIN="default", MINIDL_ALIGNED_ARRAYS="0").strip() == \
        "[('aligned_arrays', False), ('keep_freed_memory', False), ('short_blas_spin', False)]"
