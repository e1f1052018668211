"""RMSprop: divide the gradient by a running root mean square of recent gradients.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``):

    g <- g + weight_decay * p                          (if weight_decay != 0)
    v <- alpha * v + (1 - alpha) * g^2                 (square_avg)
    centered:  a <- a + (1 - alpha) * (g - a)          (grad_avg, the running mean of g)
               d <- sqrt(v - a^2) + eps                (an estimate of the standard deviation)
    otherwise: d <- sqrt(v) + eps
    momentum > 0:  b <- momentum * b + g / d;  p <- p - lr * b
    otherwise:     p <- p - lr * g / d
"""
from . import hyper
from .optimizer import Optimizer, held


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        flags = dict(capturable=capturable, foreach=foreach, differentiable=differentiable)
        hyper.implementation_flags(type(self).__name__, **flags)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize, **flags))

    @staticmethod
    def _check_group(group):
        hyper.check_common(group)
        hyper.check_nonnegative("momentum", group["momentum"])
        hyper.check_nonnegative("alpha", group["alpha"])

    def _state_spec(self, group):
        return {"step": ("step", True), "square_avg": ("param", True),
                "momentum_buffer": ("param", group["momentum"] > 0), "grad_avg": ("param", bool(group["centered"]))}

    def _initial_state(self, group, w, xp):
        state = {"square_avg": xp.zeros_like(w)}   # the buffers the options use, from the start, as PyTorch
        if group["momentum"] > 0:
            state["momentum_buffer"] = xp.zeros_like(w)
        if group["centered"]:
            state["grad_avg"] = xp.zeros_like(w)
        return state

    def _update_param(self, group, w, g, state, xp, t):
        lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
        v = state["square_avg"]._data
        v *= alpha
        v += (1 - alpha) * g * g
        if group["centered"]:
            a = _buffer(state, "grad_avg", w, xp)
            a += (1 - alpha) * (g - a)
            d = xp.sqrt(v - a * a)
        else:
            d = xp.sqrt(v)
        d += eps
        if momentum > 0:
            b = _buffer(state, "momentum_buffer", w, xp)
            b *= momentum
            b += g / d
            w -= lr * b
        else:
            w -= lr * (g / d)


def _buffer(state, name, w, xp):
    """The array of the state's buffer ``name``, started at zeros where the state has none (a group
    whose momentum or centering was switched on after its first update, or an older state dict)."""
    buf = state.get(name)
    if buf is None:
        buf = state[name] = held(xp.zeros_like(w))
    return buf._data
