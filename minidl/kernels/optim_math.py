"""The per-element arithmetic of the fused optimizer kernels, shared by every device.

Plain Python on scalars: ``kernels/cpu/optim.py`` compiles these with ``numba.njit`` and
``kernels/cuda/optim.py`` with ``cuda.jit(device=True)``, each inside its own loop over the
elements, so the two devices cannot drift apart. The arithmetic is the generic path's
(minidl/optim/adam.py, sgd.py, where the update is derived) in the same order, with the
scalars already cast to the parameter's dtype:

Adam(W):
    g <- -g if maximize;  w <- w * decay (AdamW) | g <- g + wd * w (Adam with wd)
    m <- m + (g - m) (1 - b1);  v <- v b2 + g g (1 - b2);  vmax <- max(vmax, v) (amsgrad)
    w <- w + (m / (sqrt(v) / sqrt(1 - b2^t) + eps)) * (-lr / (1 - b1^t))
SGD:
    g <- -g if maximize;  g <- g + wd * w;  b <- g (first step) | b <- b mu + g (1 - dampening)
    g <- g + mu b (nesterov) | b;  w <- w - g lr

Each intermediate of the generic path is rounded when stored to an array; here it stays in
a register, so float32 results can differ from it in the last bit.
"""
import math


def adam_element(w, g, m, v, vmax, decay, wd, one_m_b1, b2, one_m_b2, bc2_sqrt, eps, neg_step, decoupled, amsgrad,
                 maximize):
    """One element's Adam(W) step: returns the new (w, m, v, vmax)."""
    if maximize:
        g = -g
    if decoupled:
        w = w * decay
    elif wd != 0:
        g = g + wd * w
    m = m + (g - m) * one_m_b1
    v = v * b2 + g * g * one_m_b2
    denom_v = v
    if amsgrad:   # vmax <- maximum(vmax, v), NaN-propagating as NumPy's maximum
        if vmax != vmax or vmax >= v:
            denom_v = vmax
        vmax = denom_v
    w = w + (m / (math.sqrt(denom_v) / bc2_sqrt + eps)) * neg_step
    return w, m, v, vmax


def sgd_element(w, g, b, lr, wd, momentum, one_m_damp, first, nesterov, maximize):
    """One element's SGD step: returns the new (w, momentum buffer)."""
    if maximize:
        g = -g
    if wd != 0:
        g = g + wd * w
    if momentum != 0:
        b = g if first else b * momentum + g * one_m_damp
        g = g + momentum * b if nesterov else b
    return w - g * lr, b


def adam_scalars(dtype, lr, beta1, beta2, eps, wd, step, decoupled):
    """The step's scalars cast to the parameter's dtype, in the order ``adam_element`` takes them
    after vmax: decay, wd, 1 - b1, b2, 1 - b2, sqrt(1 - b2^t), eps, -lr / (1 - b1^t)."""
    t = dtype.type
    decay = t(1 - lr * wd) if decoupled else t(1)
    return (decay, t(wd), t(1 - beta1), t(beta2), t(1 - beta2), t(math.sqrt(1 - beta2 ** step)), t(eps),
            t(-(lr / (1 - beta1 ** step))))


def sgd_scalars(dtype, lr, wd, momentum, dampening):
    """lr, wd, momentum, 1 - dampening cast to the parameter's dtype, as ``sgd_element`` takes them."""
    t = dtype.type
    return t(lr), t(wd), t(momentum), t(1 - dampening)
