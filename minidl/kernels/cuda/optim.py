"""Fused optimizer updates: one kernel per parameter for Adam / AdamW and SGD (momentum).

The generic path (minidl/optim/adam.py, sgd.py) runs 5 to 12 elementwise kernels per
parameter, each reading and writing whole arrays; here one thread per element reads w, g and
the state once, and writes them once. The arithmetic is the generic path's, in the same
order and in the parameter's dtype (the scalars arrive cast to it), so the two paths agree
to rounding (each intermediate of the generic path is rounded when stored; here it stays in
a register, so float32 results can differ in the last bit).

Adam(W), per element (see optim/adam.py for the derivation):
    g <- -g if maximize;  w <- w * decay (AdamW) | g <- g + wd * w (Adam with wd)
    m <- m + (g - m) (1 - b1);  v <- v b2 + g g (1 - b2);  vmax <- max(vmax, v) (amsgrad)
    w <- w + (m / (sqrt(v) / sqrt(1 - b2^t) + eps)) * (-lr / (1 - b1^t))
SGD, per element (optim/sgd.py):
    g <- -g if maximize;  g <- g + wd * w;  b <- g (first step) | b <- b mu + g (1 - dampening)
    g <- g + mu b (nesterov) | b;  w <- w - g lr
"""
import math

from numba import cuda

from ._common import grid_for


@cuda.jit(cache=True)
def _adam(w, g, m, v, vmax, n, decay, wd, one_m_b1, b2, one_m_b2, bc2_sqrt, eps, neg_step, decoupled, amsgrad,
          maximize):
    i = cuda.grid(1)
    if i < n:
        gi = g[i]
        if maximize:
            gi = -gi
        wi = w[i]
        if decoupled:
            wi = wi * decay
        elif wd != 0:
            gi = gi + wd * wi
        mi = m[i] + (gi - m[i]) * one_m_b1
        vi = v[i] * b2 + gi * gi * one_m_b2
        m[i] = mi
        v[i] = vi
        if amsgrad:   # vmax <- maximum(vmax, v), NaN-propagating as the generic kernel
            vm = vmax[i]
            if vm != vm or vm >= vi:
                vi = vm
            vmax[i] = vi
        w[i] = wi + (mi / (math.sqrt(vi) / bc2_sqrt + eps)) * neg_step


@cuda.jit(cache=True)
def _sgd(w, g, buf, n, lr, wd, momentum, one_m_damp, first, nesterov, maximize):
    i = cuda.grid(1)
    if i < n:
        gi = g[i]
        if maximize:
            gi = -gi
        if wd != 0:
            gi = gi + wd * w[i]
        if momentum != 0:
            if first:
                b = gi
            else:
                b = buf[i] * momentum + gi * one_m_damp
            buf[i] = b
            if nesterov:
                gi = gi + momentum * b
            else:
                gi = b
        w[i] = w[i] - gi * lr


def adam(w, g, m, v, vmax, lr, beta1, beta2, eps, wd, step, decoupled, amsgrad, maximize):
    """One Adam(W) step on contiguous device buffers of one dtype (vmax: any buffer if not amsgrad)."""
    n = w.size
    if not n:
        return
    t = w.dtype.type
    decay = t(1 - lr * wd) if decoupled else t(1)
    _adam[grid_for(n)](w, g, m, v, vmax, n, decay, t(wd), t(1 - beta1), t(beta2), t(1 - beta2),
                       t(math.sqrt(1 - beta2 ** step)), t(eps), t(-(lr / (1 - beta1 ** step))), bool(decoupled),
                       bool(amsgrad), bool(maximize))


def sgd(w, g, buf, lr, wd, momentum, dampening, first, nesterov, maximize):
    """One SGD step on contiguous device buffers of one dtype (buf: any buffer if momentum is 0)."""
    n = w.size
    if not n:
        return
    t = w.dtype.type
    _sgd[grid_for(n)](w, g, buf, n, t(lr), t(wd), t(momentum), t(1 - dampening), bool(first), bool(nesterov),
                      bool(maximize))
