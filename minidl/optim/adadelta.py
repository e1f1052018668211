"""Adadelta: step sizes from the ratio of running RMS of past updates and of past gradients.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``):

    g <- g + weight_decay * p                          (if weight_decay != 0)
    v <- rho * v + (1 - rho) * g^2                     (square_avg)
    delta <- sqrt(u + eps) / sqrt(v + eps) * g         (u: acc_delta, the running mean of delta^2)
    u <- rho * u + (1 - rho) * delta^2
    p <- p - lr * delta
"""
from . import hyper
from .optimizer import Optimizer


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        flags = dict(foreach=foreach, capturable=capturable, differentiable=differentiable)
        hyper.implementation_flags(type(self).__name__, **flags)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      **flags))

    @staticmethod
    def _check_group(group):
        hyper.check_lr(group["lr"])
        rho = group["rho"]
        hyper.check_nonnegative("rho", rho)
        if rho > 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        hyper.check_common(group)

    def _state_spec(self, group):
        return {"step": ("step", True), "square_avg": ("param", True), "acc_delta": ("param", True)}

    def _initial_state(self, group, w, xp):
        return {"square_avg": xp.zeros_like(w), "acc_delta": xp.zeros_like(w)}

    def _update_param(self, group, w, g, state, xp, t):
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        v, u = state["square_avg"]._data, state["acc_delta"]._data
        v *= rho
        v += (1 - rho) * g * g
        delta = xp.sqrt(u + eps) / xp.sqrt(v + eps) * g
        u *= rho
        u += (1 - rho) * delta * delta
        w -= lr * delta
