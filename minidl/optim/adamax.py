"""Adamax: Adam with the infinity norm, a running maximum of |g|, in place of the RMS.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``), at step
t = 1, 2, ...:

    g <- g + weight_decay * p                          (if weight_decay != 0)
    m <- m + (1 - beta1) * (g - m)                     (exp_avg)
    u <- max(beta2 * u, |g| + eps)                     (exp_inf)
    p <- p - (lr / (1 - beta1^t)) * m / u
"""
from .. import backends
from . import hyper
from .optimizer import Optimizer


class Adamax(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize)
        self._check_group(defaults)
        super().__init__(params, defaults)

    @staticmethod
    def _check_group(group):
        hyper.check_lr(group["lr"])
        hyper.check_nonnegative("epsilon", group["eps"])
        hyper.check_betas(group["betas"])
        hyper.check_nonnegative("weight_decay", group["weight_decay"])

    def _state_spec(self, group):
        return {"step": ("count", True), "exp_avg": ("param", True), "exp_inf": ("param", True)}

    def _update_group(self, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        for p in group["params"]:
            if p.grad is None:
                continue
            w = p._data
            xp = backends.namespace_of(w)
            g = hyper.prepared_grad(w, p.grad._data, group["maximize"], group["weight_decay"])
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = 0
                state["exp_avg"] = xp.zeros_like(w)
                state["exp_inf"] = xp.zeros_like(w)
            state["step"] += 1
            m, u = state["exp_avg"], state["exp_inf"]
            m += (1 - beta1) * (g - m)
            u *= beta2
            xp.maximum(u, xp.abs(g) + eps, out=u)
            w -= (lr / (1 - beta1 ** state["step"])) * (m / u)
