"""Which implementation the normalization Functions run: the fast kernel or the NumPy reference.

Every norm in this package has two implementations of the same math: a readable, vectorised
NumPy reference (``<norm>_forward_reference`` / ``<norm>_backward_reference``) and a fused
kernel for the array's device (Numba on the CPU, ``minidl.kernels.cpu.<norm>``). Functions
ask ``use_kernel(array)`` at forward and at backward time; the switch below lets a reader,
a test or a benchmark run the very same layer on the reference instead.
"""
import numpy as np

from ...kernels.switch import ImplementationSwitch

NORMS = ImplementationSwitch("norm", "MINIDL_NORM_IMPL")
IMPLEMENTATIONS = NORMS.choices
set_implementation, get_implementation, implementation, use_kernel = NORMS.set, NORMS.get, NORMS.use, NORMS.use_kernel


def param_grad(g, shape, dtype):
    """A float64 (D,) sum over rows as a fresh array of the parameter's shape and dtype (fresh
    and unshared, so the engine can keep it as .grad without a defensive copy)."""
    out = np.empty(shape, dtype)
    out.reshape(-1)[...] = g
    return out
