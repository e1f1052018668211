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
from .. import backends
from . import hyper
from .optimizer import Optimizer


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 maximize=False):
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        centered=centered, maximize=maximize)
        self._check_group(defaults)
        super().__init__(params, defaults)

    @staticmethod
    def _check_group(group):
        hyper.check_lr(group["lr"])
        hyper.check_nonnegative("epsilon", group["eps"])
        hyper.check_nonnegative("momentum", group["momentum"])
        hyper.check_nonnegative("weight_decay", group["weight_decay"])
        hyper.check_nonnegative("alpha", group["alpha"])

    def _state_spec(self, group):
        return {"step": ("count", True), "square_avg": ("param", True),
                "momentum_buffer": ("param", group["momentum"] > 0), "grad_avg": ("param", bool(group["centered"]))}

    def _update_group(self, group):
        lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
        for p in group["params"]:
            if p.grad is None:
                continue
            w = p._data
            xp = backends.namespace_of(w)
            g = hyper.prepared_grad(w, p.grad._data, group["maximize"], group["weight_decay"])
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = 0
                state["square_avg"] = xp.zeros_like(w)
            state["step"] += 1
            v = state["square_avg"]
            v *= alpha
            v += (1 - alpha) * g * g
            if group["centered"]:
                a = state.get("grad_avg")
                if a is None:
                    a = state["grad_avg"] = xp.zeros_like(w)
                a += (1 - alpha) * (g - a)
                d = xp.sqrt(v - a * a)
            else:
                d = xp.sqrt(v)
            d += eps
            if momentum > 0:
                b = state.get("momentum_buffer")
                if b is None:
                    b = state["momentum_buffer"] = xp.zeros_like(w)
                b *= momentum
                b += g / d
                w -= lr * b
            else:
                w -= lr * (g / d)
