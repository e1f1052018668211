"""Adamax: Adam with the infinity norm, a running maximum of |g|, in place of the RMS.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``), at step
t = 1, 2, ...:

    g <- g + weight_decay * p                          (if weight_decay != 0)
    m <- m + (1 - beta1) * (g - m)                     (exp_avg)
    u <- max(beta2 * u, |g| + eps)                     (exp_inf)
    p <- p - (lr / (1 - beta1^t)) * m / u
"""
from . import hyper
from .optimizer import Optimizer


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        flags = dict(foreach=foreach, differentiable=differentiable, capturable=capturable)
        hyper.implementation_flags(type(self).__name__, **flags)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, **flags))

    _check_group = staticmethod(hyper.check_common)

    def _state_spec(self, group):
        return {"step": ("step", True), "exp_avg": ("param", True), "exp_inf": ("param", True)}

    def _initial_state(self, group, w, xp):
        return {"exp_avg": xp.zeros_like(w), "exp_inf": xp.zeros_like(w)}

    def _update_param(self, group, w, g, state, xp, t):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        m, u = state["exp_avg"]._data, state["exp_inf"]._data
        m += (1 - beta1) * (g - m)
        u *= beta2
        xp.maximum(u, xp.abs(g) + eps, out=u)
        w -= (lr / (1 - beta1 ** t)) * (m / u)
