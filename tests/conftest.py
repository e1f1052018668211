"""Test-session defaults. CI has no GPU: the cuda device runs in numba's CUDA simulator.
Set before numba.cuda is first imported (conftest.py is imported before the test modules);
an explicit NUMBA_ENABLE_CUDASIM=0 on a GPU machine is respected."""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

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
