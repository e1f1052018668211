"""The gradient scaler's per-parameter pass on the CPU: unscale in place and find inf/NaN, in one read.

``GradScaler.unscale_`` must both multiply every gradient by 1/S and learn whether any element
was inf or NaN *before* the multiplication (as PyTorch's ``_amp_foreach_non_finite_check_and_unscale_``
does: an overflowed gradient is what the check is for, and a finite value times 1/S > 1 may
overflow only after it). With NumPy that is three passes and a boolean temporary
(``isfinite``, ``all``, ``multiply``); here it is one loop that reads and writes each element once.

The check is branch-free so the loop vectorises: ``v - v`` is 0 for every finite v and NaN for
inf and NaN, and NaN compares unequal to everything; the flags are OR-ed, an integer reduction
that needs no fastmath. Serial, like the optimizers' fused updates (kernels/cpu/optim.py): the
zoo's largest parameter is far below the size where waking the thread pool pays.
"""
import contextlib

import numpy as np
from numba import config, njit


@njit(error_model="numpy", cache=True)
def _unscale_and_check(g, inv_scale):
    bad = False
    for i in range(g.size):
        v = g[i]
        bad |= (v - v) != 0
        g[i] = v * inv_scale
    return bad


@njit(error_model="numpy", cache=True)
def _check(g):
    bad = False
    for i in range(g.size):
        v = g[i]
        bad |= (v - v) != 0
    return bad


def fusable(g):
    """Does the kernel take this gradient array (C-contiguous float32 / float64 on the host)?"""
    return type(g) is np.ndarray and g.dtype in (np.float32, np.float64) and g.flags.c_contiguous and g.flags.writeable


def unscale_and_check(g, inv_scale):
    """Multiply ``g`` in place by ``inv_scale`` (a float32 number, as PyTorch keeps it; the product
    is taken in g's dtype) and return whether any element of g was inf or NaN before. With
    ``inv_scale == 1`` the values are left untouched and only checked. ``g``: see ``fusable``."""
    flat = g.reshape(-1)
    if flat.size == 0:
        return False
    with _quiet():
        if inv_scale == 1:
            return bool(_check(flat))
        return bool(_unscale_and_check(flat, g.dtype.type(np.float32(inv_scale))))


def _quiet():
    """inf - inf is the check itself: silence NumPy's warning about it when the loops run as Python
    (NUMBA_DISABLE_JIT=1); compiled, they never warn."""
    return np.errstate(invalid="ignore", over="ignore") if config.DISABLE_JIT else contextlib.nullcontext()
