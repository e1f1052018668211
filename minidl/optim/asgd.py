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
from .optimizer import Optimizer


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
        return {"step": ("count", True), "eta": ("real", True), "mu": ("real", True), "ax": ("param", True)}

    def _initial_state(self, group, w, xp):
        return {"eta": float(group["lr"]), "mu": 1.0, "ax": xp.zeros_like(w)}

    def _update_param(self, group, w, g, state, xp):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        t, eta, ax = state["step"], state["eta"], state["ax"]
        w *= 1 - lambd * eta
        w -= eta * g
        if state["mu"] != 1:
            ax += (w - ax) * state["mu"]
        else:
            ax[...] = w
        state["eta"] = lr / ((1 + lambd * lr * t) ** alpha)
        state["mu"] = 1 / max(1, t - t0)
