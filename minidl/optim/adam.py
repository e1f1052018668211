"""Adam (with L2 weight decay) and AdamW (with decoupled weight decay).

PyTorch's update, per parameter p with gradient g, at step t = 1, 2, ...:

    Adam:   g <- g + weight_decay * p                        (L2 penalty folded into g)
    AdamW:  p <- p * (1 - lr * weight_decay)                 (decay applied to p directly)
    m <- m + (1 - beta1) * (g - m)                           (= beta1 m + (1 - beta1) g, as torch's lerp)
    v <- beta2 * v + (1 - beta2) * g^2
    p <- p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

The bias corrections 1 - beta^t undo the zero initialisation of m and v, so that the first
steps are not too small; eps is added *after* the correction of sqrt(v), exactly as PyTorch
does. With ``amsgrad`` the running maximum of v replaces v in the denominator.

``_update`` below is the readable reference (one scratch array per parameter, everything else
in place). By default the updates run instead as fused kernels on their device, one pass per
parameter (kernels/cpu/optim.py, kernels/cuda/optim.py, the same arithmetic in
kernels/optim_math.py; on the CPU one call for up to 8 parameters);
``minidl.optim.implementation`` switches between the two.
"""
import math

from .. import backends
from . import hyper, implementation
from .optimizer import Optimizer, advance, held, new_step


class Adam(Optimizer):
    """``decoupled_weight_decay=True`` makes it AdamW (as in PyTorch, where AdamW is exactly that);
    the choice is a group entry, so it travels with state dicts."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        flags = dict(foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused)
        hyper.implementation_flags(type(self).__name__, **flags)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, **flags, decoupled_weight_decay=bool(decoupled_weight_decay))
        super().__init__(params, defaults)

    @staticmethod
    def _check_group(group):
        betas, eps, wd = group["betas"], group["eps"], group["weight_decay"]
        hyper.check_lr(group["lr"])
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Invalid beta parameters: {betas}; each must be in [0, 1)")
        if wd < 0.0:
            raise ValueError(f"Invalid weight_decay value: {wd}")

    def _state_spec(self, group):
        return {"step": ("step", True), "exp_avg": ("param", True), "exp_avg_sq": ("param", True),
                "max_exp_avg_sq": ("param", bool(group["amsgrad"]))}

    def _update_group(self, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        wd, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        decoupled = group.get("decoupled_weight_decay", False)
        by_device = {}   # each kind of array (each device): its parameters' (w, g, m, v, vmax, step)
        for p in group["params"]:
            if p.grad is None:
                continue
            w, g = p._data, p.grad._data
            state = self.state.setdefault(p, {})
            if not state:
                xp = backends.namespace_of(w)
                state["step"] = new_step()
                state["exp_avg"] = held(xp.zeros_like(w))
                state["exp_avg_sq"] = held(xp.zeros_like(w))
                if amsgrad:
                    state["max_exp_avg_sq"] = held(xp.zeros_like(w))
            vmax = state["max_exp_avg_sq"]._data if amsgrad else None
            by_device.setdefault(type(w), []).append(
                (w, g, state["exp_avg"]._data, state["exp_avg_sq"]._data, vmax, advance(state["step"])))
        for updates in by_device.values():
            fused = implementation.fused(updates[0][0], "fused_adam_many")
            if fused is not None:   # the device's fused kernels: back come the updates they left
                updates = fused(updates, lr, beta1, beta2, eps, wd, decoupled, amsgrad, maximize)
            for w, g, m, v, vmax, t in updates:
                _update(w, g, m, v, vmax, t, lr, beta1, beta2, eps, wd, decoupled, amsgrad, maximize)


def _update(w, g, m, v, vmax, t, lr, beta1, beta2, eps, wd, decoupled, amsgrad, maximize):
    """One parameter's update at step t, as the module docstring writes it."""
    xp = backends.namespace_of(w)
    if maximize:
        g = -g
    if wd != 0:
        if decoupled:
            w *= 1 - lr * wd
        else:
            g = g + wd * w

    tmp = g - m
    tmp *= 1 - beta1
    m += tmp
    xp.multiply(g, g, out=tmp)
    tmp *= 1 - beta2
    v *= beta2
    v += tmp

    if amsgrad:
        xp.maximum(vmax, v, out=vmax)
        v = vmax
    step_size = lr / (1 - beta1 ** t)
    xp.sqrt(v, out=tmp)
    tmp /= math.sqrt(1 - beta2 ** t)
    tmp += eps
    xp.divide(m, tmp, out=tmp)
    tmp *= -step_size
    w += tmp


class AdamW(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=foreach, maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)
