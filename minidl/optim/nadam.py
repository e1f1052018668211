"""NAdam: Adam with Nesterov momentum, the momentum coefficient warming up over the steps.

PyTorch's update, per parameter p with gradient g (negated with ``maximize``), at step
t = 1, 2, ...:

    decoupled_weight_decay:  p <- p * (1 - lr * weight_decay)
    otherwise:               g <- g + weight_decay * p          (if weight_decay != 0)
    mu_t      = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))
    mu_{t+1}  = beta1 * (1 - 0.5 * 0.96^((t + 1) * momentum_decay))
    P <- P * mu_t                                               (mu_product, starts at 1)
    m <- m + (1 - beta1) * (g - m)
    v <- beta2 * v + (1 - beta2) * g^2
    d = sqrt(v / (1 - beta2^t)) + eps
    p <- p - lr * (1 - mu_t) / (1 - P) * g / d - lr * mu_{t+1} / (1 - P * mu_{t+1}) * m / d
"""
from . import hyper
from .optimizer import Optimizer, new_scalar


class NAdam(Optimizer):
    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        flags = dict(foreach=foreach, capturable=capturable, differentiable=differentiable)
        hyper.implementation_flags(type(self).__name__, **flags)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, **flags))

    @staticmethod
    def _check_group(group):
        hyper.check_common(group)
        hyper.check_nonnegative("momentum_decay", group["momentum_decay"])

    def _state_spec(self, group):
        return {"step": ("step", True), "mu_product": ("scalar", True), "exp_avg": ("param", True),
                "exp_avg_sq": ("param", True)}

    def _initial_state(self, group, w, xp):
        return {"mu_product": new_scalar(1.0, w), "exp_avg": xp.zeros_like(w), "exp_avg_sq": xp.zeros_like(w)}

    def _update_param(self, group, w, g, state, xp, t):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * group["momentum_decay"]))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * group["momentum_decay"]))
        held_product = state["mu_product"]._data   # rounded to its dtype at each product, as PyTorch's
        held_product[()] = held_product * held_product.dtype.type(mu)
        product = float(held_product)
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
        m += (1 - beta1) * (g - m)
        v *= beta2
        v += (1 - beta2) * g * g
        d = xp.sqrt(v / (1 - beta2 ** t)) + eps
        w -= lr * (1.0 - mu) / (1.0 - product) * (g / d)
        w -= lr * mu_next / (1.0 - product * mu_next) * (m / d)
