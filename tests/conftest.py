"""Test-session defaults. CI has no GPU: the cuda device runs in numba's CUDA simulator.
Set before numba.cuda is first imported (conftest.py is imported before the test modules);
an explicit NUMBA_ENABLE_CUDASIM=0 on a GPU machine is respected."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def _simulator_hands_over_the_gil():
    """The simulator runs each CUDA thread of a block as a Python thread, and the launching
    thread polls them (``is_alive``) until all have ended or reached a barrier. That poll holds
    the GIL for a whole switch interval (5 ms) each time it gets it, while the simulated threads
    wait for it to take their next step (a tiny ResNet-8's step on cuda: 89 s, most of it in the
    matmul kernel's barriers). Yielding the GIL at each poll lets them run (20 s). A shorter switch
    interval would too, but it interleaves the simulated threads mid-statement, and the
    simulator's ``cuda.shared.array`` is not safe against that: two threads of a block can each
    allocate their own copy of one shared array, and the kernels' results go wrong. Only the
    launching thread's waiting changes here, not what the simulated threads compute."""
    if os.environ["NUMBA_ENABLE_CUDASIM"] != "1":
        return
    import time

    from numba.cuda.simulator import kernel
    thread = getattr(kernel, "BlockThread", None)
    alive = getattr(thread, "is_alive", None)
    if alive is None:
        return

    def is_alive(self):
        time.sleep(0)
        return alive(self)
    thread.is_alive = is_alive


_simulator_hands_over_the_gil()

# hypothesis profiles: "ci" (the default: few examples, so the fuzz tests take seconds) and "long"
# (a deeper search, on demand): MINIDL_FUZZ=long pytest tests/test_fuzz_indices.py, or hypothesis's own
# --hypothesis-profile=long. Tests that pass their own settings (test_properties.py) keep them.
from hypothesis import HealthCheck, settings  # noqa: E402

_QUIET = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=12, deadline=None, suppress_health_check=_QUIET, print_blob=True)
settings.register_profile("long", max_examples=2000, deadline=None, suppress_health_check=_QUIET, print_blob=True)
settings.load_profile(os.environ.get("MINIDL_FUZZ", "ci"))


import pytest  # noqa: E402


@pytest.fixture(params=["numba", "reference"])
def impl(request):
    """Each test that takes it runs with both implementations of every kernel family: the CPU
    kernels, then the NumPy references."""
    from minidl.ops._kernel_switch import implementation as layer_implementation
    from minidl.ops.normalization import implementation as norm_implementation
    with norm_implementation(request.param), layer_implementation(request.param):
        yield request.param


@pytest.fixture(params=["serial", "parallel"])
def threads(request, monkeypatch):
    """Each test that takes it runs the layer kernels on the calling thread, then every problem
    (however small) on the prange kernels of Numba's pool."""
    if request.param == "parallel":
        from minidl.kernels.cpu import _threads
        from minidl.runtime import layer_threads
        monkeypatch.setattr(_threads, "SERIAL_BELOW", 1)
        monkeypatch.setattr(layer_threads, "PARALLEL", True)
    return request.param
