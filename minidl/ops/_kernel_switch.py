"""Which implementation the layer ops (conv2d, pooling, gelu) run: Numba kernels or the NumPy reference.

Each of these ops has a readable NumPy reference of its gathers and scatters and a Numba
CPU kernel for the same math (``minidl.kernels.cpu``). By default the kernel runs on NumPy
arrays; ``MINIDL_LAYER_IMPL=reference`` at import, ``set_implementation("reference")``
or ``with implementation("reference"):`` switch to the reference (tests run both).
"""
import os
from contextlib import contextmanager

IMPLEMENTATIONS = ("numba", "reference")
_current = os.environ.get("MINIDL_LAYER_IMPL", "numba")
if _current not in IMPLEMENTATIONS:
    raise ValueError(f"MINIDL_LAYER_IMPL: expected one of {IMPLEMENTATIONS}, got {_current!r}")


def set_implementation(name):
    """Select "numba" (default) or "reference"; returns the previous setting."""
    global _current
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"set_implementation: expected one of {IMPLEMENTATIONS}, got {name!r}")
    previous, _current = _current, name
    return previous


def get_implementation():
    return _current


@contextmanager
def implementation(name):
    previous = set_implementation(name)
    try:
        yield
    finally:
        set_implementation(previous)


def use_kernel(array):
    """True when the Numba kernel should handle ``array`` (a NumPy array, "numba" selected)."""
    return _current == "numba" and type(array).__module__ == "numpy"
