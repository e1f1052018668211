"""Fused optimizer updates on the CPU: one pass per parameter for Adam / AdamW and SGD (momentum).

The generic path (minidl/optim/adam.py, sgd.py) is 5 to 12 NumPy calls per parameter, each a
pass over a whole array plus a few microseconds of call overhead; a GPT step has about 50
parameters, so the calls add up to a visible share of a step (docs/performance.md). Here one loop
reads w, g and the state once and writes them once. The per-element arithmetic is ``minidl/kernels/optim_math.py``, shared with the cuda
kernels. Serial: the largest parameter of the zoo's models has 65k elements, a fraction of a
millisecond, less than waking the thread pool would cost.
"""
import numpy as np
from numba import njit

from .. import optim_math

_adam_element = njit(inline="always", error_model="numpy", cache=True)(optim_math.adam_element)
_sgd_element = njit(inline="always", error_model="numpy", cache=True)(optim_math.sgd_element)


@njit(error_model="numpy", cache=True)
def _adam(w, g, m, v, vmax, decay, wd, one_m_b1, b2, one_m_b2, bc2_sqrt, eps, neg_step, decoupled, amsgrad,
          maximize):
    for i in range(w.size):
        vm = vmax[i] if amsgrad else v[i]
        wi, mi, vi, vm = _adam_element(w[i], g[i], m[i], v[i], vm, decay, wd, one_m_b1, b2, one_m_b2, bc2_sqrt,
                                       eps, neg_step, decoupled, amsgrad, maximize)
        w[i] = wi
        m[i] = mi
        v[i] = vi
        if amsgrad:
            vmax[i] = vm


@njit(error_model="numpy", cache=True)
def _sgd(w, g, buf, lr, wd, momentum, one_m_damp, first, nesterov, maximize):
    for i in range(w.size):
        b = buf[i] if momentum != 0 else w[i]
        wi, b = _sgd_element(w[i], g[i], b, lr, wd, momentum, one_m_damp, first, nesterov, maximize)
        w[i] = wi
        if momentum != 0:
            buf[i] = b


def _fusable(a, w):
    return type(a) is np.ndarray and a.dtype == w.dtype and a.shape == w.shape and a.flags.c_contiguous


def adam(w, g, m, v, vmax, lr, beta1, beta2, eps, wd, step, decoupled, amsgrad, maximize):
    """One Adam(W) step in place on w, m, v (and vmax with amsgrad); False (nothing done: use the
    generic path) unless all are C-contiguous float32/float64 arrays of w's shape and dtype."""
    arrays = [w, g, m, v] + ([vmax] if amsgrad else [])
    if w.dtype not in (np.float32, np.float64) or not all(_fusable(a, w) for a in arrays):
        return False
    flat = [a.reshape(-1) for a in arrays]
    w_, g_, m_, v_ = flat[:4]
    _adam(w_, g_, m_, v_, flat[4] if amsgrad else v_, *optim_math.adam_scalars(w.dtype, lr, beta1, beta2, eps, wd,
                                                                               step, decoupled),
          bool(decoupled), bool(amsgrad), bool(maximize))
    return True


def sgd(w, g, buf, lr, wd, momentum, dampening, nesterov, maximize):
    """One SGD step in place: (True, momentum buffer, allocated on the first step; None without
    momentum), or (False, None) (use the generic path) for arrays it does not take (see adam)."""
    first = momentum != 0 and buf is None
    if first:
        buf = np.empty_like(w)
    arrays = [w, g] + ([buf] if momentum != 0 else [])
    if w.dtype not in (np.float32, np.float64) or not all(_fusable(a, w) for a in arrays):
        return False, None
    _sgd(w.reshape(-1), g.reshape(-1), (buf if momentum != 0 else w).reshape(-1),
         *optim_math.sgd_scalars(w.dtype, lr, wd, momentum, dampening), bool(first), bool(nesterov), bool(maximize))
    return True, buf
