"""Fused optimizer updates on the CPU: one pass per parameter for Adam / AdamW and SGD (momentum).

The generic path (minidl/optim/adam.py, sgd.py) is 5 to 12 NumPy calls per parameter, each a
pass over a whole array plus a few microseconds of call overhead; a GPT step has about 50
parameters, so the calls add up to a visible share of a step (docs/performance.md). Here one loop
reads w, g and the state once and writes them once, and Adam's updates run eight parameters to a
call. The per-element arithmetic is ``minidl/kernels/optim_math.py``, shared with the cuda
kernels. SGD's loop is serial: the largest parameter of the zoo's models has 65k elements, a
fraction of a millisecond, less than waking the thread pool would cost. Adam's calls of eight
parameters split each parameter between the threads once they hold SERIAL_BELOW elements.
"""
import numba
import numpy as np
from numba import njit, prange

from .. import optim_math
from ._threads import SERIAL_BELOW, chunk_bounds, launch

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


BATCH = 8    # parameters per call of _adam_batch: one compiled signature whatever a model's count.
# (16 ran no faster and took 4.1 s to compile, against 1.8 s; one parameter per call, 0.2 s)


@njit(error_model="numpy", cache=True, parallel=True)
def _adam_batch(ws, gs, ms, vs, vmaxs, scalars, n, nchunks, decoupled, amsgrad, maximize):
    """_adam on the first n of BATCH parameters (tuples of flat arrays, padded with empty ones),
    parameter k with the scalars of row k (``optim_math.adam_scalars``); chunk c of the threads'
    nchunks takes the same share of every parameter."""
    for c in prange(nchunks):
        for k in range(n):
            lo, hi = chunk_bounds(ws[k].size, nchunks, c)
            s = scalars[k]
            _adam(ws[k][lo:hi], gs[k][lo:hi], ms[k][lo:hi], vs[k][lo:hi], vmaxs[k][lo:hi], s[0], s[1], s[2], s[3],
                  s[4], s[5], s[6], s[7], decoupled, amsgrad, maximize)


def adam_many(updates, lr, beta1, beta2, eps, wd, decoupled, amsgrad, maximize):
    """Adam(W) steps in place for a group's parameters, ``updates`` holding each one's
    (w, g, m, v, vmax, step) (vmax None without amsgrad). Those whose arrays are C-contiguous
    float32/float64 arrays of w's shape and dtype run in calls of BATCH parameters each; the
    others come back undone, for the generic path. A call per parameter cost about 10 us of
    Python around the kernel, half a GPT step's update (docs/performance.md, "Eight parameters
    per optimizer call")."""
    left, by_dtype = [], {}
    for u in updates:
        w = u[0]
        if w.dtype in (np.float32, np.float64) and all(_fusable(a, w) for a in u[:4 + bool(amsgrad)]):
            by_dtype.setdefault(w.dtype, []).append(u)
        else:
            left.append(u)
    for dtype, fused in by_dtype.items():
        rows, pad = {}, (np.empty(0, dtype),)
        for first in range(0, len(fused), BATCH):
            batch = fused[first:first + BATCH]
            flat = [tuple(u[i].reshape(-1) for u in batch) + pad * (BATCH - len(batch)) for i in range(4)]
            vmaxs = tuple(u[4].reshape(-1) for u in batch) + pad * (BATCH - len(batch)) if amsgrad else flat[3]
            for u in batch:
                if u[5] not in rows:    # the scalars of each step count met (usually one)
                    rows[u[5]] = optim_math.adam_scalars(dtype, lr, beta1, beta2, eps, wd, u[5], decoupled)
            work = sum(u[0].size for u in batch)
            nchunks = numba.get_num_threads() if work >= SERIAL_BELOW else 1
            launch(_adam_batch, work, *flat, vmaxs, np.array([rows[u[5]] for u in batch], dtype), len(batch),
                   nchunks, bool(decoupled), bool(amsgrad), bool(maximize))
    return left


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
