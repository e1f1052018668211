"""Fused optimizer updates on the GPU: one kernel per parameter for Adam / AdamW and SGD (momentum).

The generic path (minidl/optim/adam.py, sgd.py) runs 5 to 12 elementwise kernels per
parameter, each reading and writing whole arrays; here one thread per element reads w, g and
the state once, and writes them once. The per-element arithmetic is
``minidl/kernels/optim_math.py``, shared with the CPU kernels.
"""
from numba import cuda

from .. import optim_math
from ._common import grid_for

_adam_element = cuda.jit(device=True)(optim_math.adam_element)
_sgd_element = cuda.jit(device=True)(optim_math.sgd_element)


@cuda.jit(cache=True)
def _adam(w, g, m, v, vmax, n, decay, wd, one_m_b1, b2, one_m_b2, bc2_sqrt, eps, neg_step, decoupled, amsgrad,
          maximize):
    i = cuda.grid(1)
    if i < n:
        wi, mi, vi, vmi = _adam_element(w[i], g[i], m[i], v[i], vmax[i], decay, wd, one_m_b1, b2, one_m_b2,
                                        bc2_sqrt, eps, neg_step, decoupled, amsgrad, maximize)
        w[i] = wi
        m[i] = mi
        v[i] = vi
        if amsgrad:
            vmax[i] = vmi


@cuda.jit(cache=True)
def _sgd(w, g, buf, n, lr, wd, momentum, one_m_damp, first, nesterov, maximize):
    i = cuda.grid(1)
    if i < n:
        wi, b = _sgd_element(w[i], g[i], buf[i], lr, wd, momentum, one_m_damp, first, nesterov, maximize)
        w[i] = wi
        if momentum != 0:
            buf[i] = b


def adam(w, g, m, v, vmax, lr, beta1, beta2, eps, wd, step, decoupled, amsgrad, maximize):
    """One Adam(W) step on contiguous device buffers of one dtype (vmax: any buffer if not amsgrad)."""
    n = w.size
    if not n:
        return
    _adam[grid_for(n)](w, g, m, v, vmax, n, *optim_math.adam_scalars(w.dtype, lr, beta1, beta2, eps, wd, step, decoupled),
                       bool(decoupled), bool(amsgrad), bool(maximize))


def sgd(w, g, buf, lr, wd, momentum, dampening, first, nesterov, maximize):
    """One SGD step on contiguous device buffers of one dtype (buf: any buffer if momentum is 0)."""
    n = w.size
    if not n:
        return
    _sgd[grid_for(n)](w, g, buf, n, *optim_math.sgd_scalars(w.dtype, lr, wd, momentum, dampening), bool(first),
                      bool(nesterov), bool(maximize))
