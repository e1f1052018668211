"""Which implementation the normalization Functions run: the fast kernel or the NumPy reference.

Every norm in this package has two implementations of the same math: a readable, vectorised
NumPy reference (``<norm>_forward_reference`` / ``<norm>_backward_reference``) and a fused
kernel for the array's device (Numba on the CPU, ``minidl.kernels.cpu.<norm>``). Functions
ask ``use_kernel(array)`` at forward and at backward time; the switch below lets a reader,
a test or a benchmark run the very same layer on the reference instead.
"""
import os
from contextlib import contextmanager

import numpy as np

IMPLEMENTATIONS = ("numba", "reference")
_current = os.environ.get("MINIDL_NORM_IMPL", "numba")
if _current not in IMPLEMENTATIONS:
    raise ValueError(f"MINIDL_NORM_IMPL: expected one of {IMPLEMENTATIONS}, got {_current!r}")


def set_implementation(name):
    """Select "numba" (the fused kernels, default) or "reference" (NumPy) for every norm.
    Returns the previous setting."""
    global _current
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"set_implementation: expected one of {IMPLEMENTATIONS}, got {name!r}")
    previous, _current = _current, name
    return previous


def get_implementation():
    return _current


@contextmanager
def implementation(name):
    """``with implementation("reference"): ...`` runs the norms on the NumPy reference inside."""
    previous = set_implementation(name)
    try:
        yield
    finally:
        set_implementation(previous)


def use_kernel(array):
    """True when the fused kernel should handle ``array``: "numba" is selected and the array
    is a NumPy array (a CPU array; other devices bring their own kernels later)."""
    return _current == "numba" and type(array).__module__ == "numpy"


def param_grad(g, shape, dtype):
    """A float64 (D,) sum over rows as a fresh array of the parameter's shape and dtype (fresh
    and unshared, so the engine can keep it as .grad without a defensive copy)."""
    out = np.empty(shape, dtype)
    out.reshape(-1)[...] = g
    return out
