"""Adagrad: per-coordinate step sizes that shrink with the sum of all squared gradients seen.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``), at step
t = 1, 2, ...:

    g <- g + weight_decay * p                          (if weight_decay != 0)
    clr <- lr / (1 + (t - 1) * lr_decay)
    s <- s + g^2                                       (sum, starts at initial_accumulator_value)
    p <- p - clr * g / (sqrt(s) + eps)
"""
from . import hyper
from .optimizer import Optimizer


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        flags = dict(foreach=foreach, differentiable=differentiable, fused=fused)
        hyper.implementation_flags(type(self).__name__, **flags)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                                      maximize=maximize, **flags))

    @staticmethod
    def _check_group(group):
        hyper.check_common(group)
        hyper.check_nonnegative("lr_decay", group["lr_decay"])
        hyper.check_nonnegative("initial_accumulator_value", group["initial_accumulator_value"])

    def _state_spec(self, group):
        return {"step": ("step", True), "sum": ("param", True)}

    def _initial_state(self, group, w, xp):
        return {"sum": xp.full_like(w, group["initial_accumulator_value"])}

    def _update_param(self, group, w, g, state, xp, t):
        clr = group["lr"] / (1 + (t - 1) * group["lr_decay"])
        s = state["sum"]._data
        s += g * g
        w -= clr * (g / (xp.sqrt(s) + group["eps"]))
