"""Rprop: resilient backpropagation, steps of a per-coordinate size that follows only the
gradient's sign.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``), with step
sizes s starting at lr and the previous gradient q at 0, (eta_minus, eta_plus) = etas:

    where g * q > 0:  s <- min(s * eta_plus, step_size_max)     (same sign: speed up)
    where g * q < 0:  s <- max(s * eta_minus, step_size_min)    (sign flipped: slow down,
                      g <- 0                                     and skip this coordinate)
    p <- p - sign(g) * s
    q <- g
"""
from . import hyper
from .optimizer import Optimizer


class Rprop(Optimizer):
    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        flags = dict(capturable=capturable, foreach=foreach, differentiable=differentiable)
        hyper.implementation_flags(type(self).__name__, **flags)
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), maximize=maximize,
                                      **flags))

    @staticmethod
    def _check_group(group):
        hyper.check_lr(group["lr"])
        etas = group["etas"]
        hyper.check_pair("etas", etas)
        hyper.check_pair("step_sizes", group["step_sizes"])
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")

    def _state_spec(self, group):
        return {"step": ("step", True), "prev": ("param", True), "step_size": ("param", True)}

    def _initial_state(self, group, w, xp):
        return {"prev": xp.zeros_like(w), "step_size": xp.full_like(w, group["lr"])}

    def _update_param(self, group, w, g, state, xp, t):
        (eta_minus, eta_plus), (size_min, size_max) = group["etas"], group["step_sizes"]
        prev = state["prev"]._data
        sign = xp.sign(g * prev)
        factor = xp.where(sign > 0, eta_plus, xp.where(sign < 0, eta_minus, 1.0)).astype(w.dtype)
        s = state["step_size"]._data
        s *= factor
        xp.clip(s, size_min, size_max, out=s)
        g = xp.where(sign < 0, 0, g).astype(w.dtype)
        w -= xp.sign(g) * s
        prev[...] = g
