"""RAdam: Adam whose adaptive step is switched on only once the variance of its second
moment estimate is tractable, and then scaled by a rectification term.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``), at step
t = 1, 2, ...:

    decoupled_weight_decay:  p <- p * (1 - lr * weight_decay)
    otherwise:               g <- g + weight_decay * p          (if weight_decay != 0)
    m <- m + (1 - beta1) * (g - m);   v <- beta2 * v + (1 - beta2) * g^2
    m_hat = m / (1 - beta1^t)
    rho_inf = 2 / (1 - beta2) - 1;   rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
    rho_t > 5:  r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
                p <- p - lr * m_hat * r * sqrt(1 - beta2^t) / (sqrt(v) + eps)
    otherwise:  p <- p - lr * m_hat                             (plain momentum SGD)
"""
import math

from . import hyper
from .optimizer import Optimizer


class RAdam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False):
        flags = dict(foreach=foreach, capturable=capturable, differentiable=differentiable)
        hyper.implementation_flags(type(self).__name__, **flags)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, **flags))

    _check_group = staticmethod(hyper.check_common)

    def _state_spec(self, group):
        return {"step": ("step", True), "exp_avg": ("param", True), "exp_avg_sq": ("param", True)}

    def _initial_state(self, group, w, xp):
        return {"exp_avg": xp.zeros_like(w), "exp_avg_sq": xp.zeros_like(w)}

    def _update_param(self, group, w, g, state, xp, t):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
        m += (1 - beta1) * (g - m)
        v *= beta2
        v += (1 - beta2) * g * g
        correction2 = 1 - beta2 ** t
        m_hat = m / (1 - beta1 ** t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2 ** t / correction2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            w -= m_hat * lr * (math.sqrt(correction2) / (xp.sqrt(v) + eps)) * rect
        else:
            w -= m_hat * lr
