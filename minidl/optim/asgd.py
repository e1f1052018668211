"""ASGD: SGD with a decaying step size and a running (Polyak) average of the iterates.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``), at step
t = 1, 2, ..., with eta starting at lr and mu at 1:

    g <- g + weight_decay * p                          (if weight_decay != 0)
    p <- p * (1 - lambd * eta) - eta * g
    ax <- ax + mu * (p - ax)                           (ax <- p while mu == 1)
    eta <- lr / (1 + lambd * lr * t)^alpha
    mu <- 1 / max(1, t - t0)                           (averaging starts after t0 steps)

``ax``, the averaged parameter, is kept in the state; the parameter itself is the plain iterate.
"""
from . import hyper
from .optimizer import Optimizer, new_scalar


class ASGD(Optimizer):
    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None, maximize=False,
                 differentiable=False, capturable=False):
        flags = dict(foreach=foreach, differentiable=differentiable, capturable=capturable)
        hyper.implementation_flags(type(self).__name__, **flags)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      maximize=maximize, **flags))

    @staticmethod
    def _check_group(group):
        hyper.check_common(group)
        for name in ("lambd", "alpha", "t0"):
            hyper.check_real(name, group[name])

    def _state_spec(self, group):
        return {"step": ("step", True), "eta": ("scalar", True), "mu": ("scalar", True), "ax": ("param", True)}

    def _initial_state(self, group, w, xp):
        return {"eta": new_scalar(group["lr"], w), "mu": new_scalar(1.0, w), "ax": xp.zeros_like(w)}

    def _update_param(self, group, w, g, state, xp, t):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        eta, mu, ax = state["eta"]._data, state["mu"]._data, state["ax"]._data   # eta, mu: 0-d float32
        eta_value = float(eta)
        w *= 1 - lambd * eta_value
        w -= eta_value * g
        if float(mu) != 1:
            ax += (w - ax) * mu.astype(ax.dtype)
        else:
            ax[...] = w
        eta[()] = lr / ((1 + lambd * lr * t) ** alpha)
        mu[()] = 1 / max(1, t - t0)
