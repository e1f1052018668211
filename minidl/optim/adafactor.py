"""Adafactor: Adam's second moment without its memory, as torch.optim.Adafactor (Shazeer and
Stern, 2018, with PyTorch's choices for lr and eps1).

For a parameter of two or more dims the running mean of g**2 over its last two dims (m, n) is
not kept element by element but as its row means R (m x 1) and column means C (1 x n), and
estimated as the rank-1 matrix R C / mean(R): m + n numbers instead of m n. A vector (or a
scalar) keeps the full running mean V. Per parameter p with gradient g (negated with
``maximize``), at step t = 1, 2, ...:

    beta2_t = 1 - t**beta2_decay                       (1 at t = 1: the first step takes g**2 itself)
    rho_t = min(lr, 1 / sqrt(t))
    alpha = max(eps2, RMS(p)) * rho_t                  (the step is relative to the parameter's size)
    p <- p * (1 - lr * weight_decay)
    R <- lerp(R, mean(g**2, last dim), 1 - beta2_t)    C <- lerp(C, mean(g**2, dim -2), 1 - beta2_t)
    V_hat = R C / max(mean(R over rows), eps1)         (for a vector: V <- lerp(V, g**2, 1 - beta2_t))
    U = g / sqrt(max(V_hat, eps1**2))
    p <- p - alpha / max(1, RMS(U) / d) * U            (update clipping at RMS d)

eps1 None means the machine epsilon of the parameter's dtype. ``lerp(a, b, w)`` is computed as
PyTorch's (a + w (b - a) for w < 0.5, else b - (b - a)(1 - w)), and the row and column means of
g**2 as squared norms over the length, so the trajectories follow PyTorch's closely.
"""
import numpy as np

from .. import backends
from . import hyper
from .optimizer import Optimizer, advance, held, new_step


class Adafactor(Optimizer):
    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        hyper.implementation_flags(type(self).__name__, foreach=foreach)
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=tuple(eps), d=d,
                                      weight_decay=weight_decay, foreach=foreach, maximize=maximize))

    @staticmethod
    def _check_group(group):
        """PyTorch's checks and messages."""
        lr = group["lr"]
        hyper.check_lr(lr)
        if not 0.0 >= hyper.check_real("beta2_decay", group["beta2_decay"]):
            raise ValueError(f"beta2_decay should be <= 0 but is: {group['beta2_decay']}")
        eps = group["eps"]
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise TypeError(f"eps must be a pair (eps1 or None, eps2), got {eps!r}")
        if eps[0] is not None and not 0.0 <= hyper.check_real("eps[0]", eps[0]):
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= hyper.check_real("eps[1]", eps[1]):
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= hyper.check_real("d", group["d"]):
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {group['d']}")
        if not 0.0 <= hyper.check_real("weight_decay", group["weight_decay"]):
            raise ValueError(f"weight_decay should be >= 0 but is: {group['weight_decay']}")

    def _state_spec(self, group):
        return {"step": ("step", True), "variance": ("param", False)}

    def _update_group(self, group):
        lr, wd, d = group["lr"], group["weight_decay"], group["d"]
        eps1, eps2 = group["eps"]
        for p in group["params"]:
            if p.grad is None:
                continue
            w = p._data
            xp = backends.namespace_of(w)
            g = hyper.prepared_grad(w, p.grad._data, group["maximize"], 0)
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = new_step()
                if g.ndim > 1:   # the factored second moment: row and column means of g**2
                    state["row_var"] = held(xp.zeros(g.shape[:-1] + (1,), dtype=w.dtype))
                    state["col_var"] = held(xp.zeros(g.shape[:-2] + (1,) + g.shape[-1:], dtype=w.dtype))
                else:
                    state["variance"] = held(xp.zeros_like(w))
            t = float(advance(state["step"]))
            e1 = float(np.finfo(w.dtype).eps) if eps1 is None else eps1
            weight = t ** group["beta2_decay"]   # 1 - beta2_t
            rho = min(lr, 1 / t ** 0.5)
            alpha = max(eps2, _rms(w, xp)) * rho
            if wd != 0:
                w *= 1 - lr * wd
            if g.ndim > 1:
                row, col = state["row_var"]._data, state["col_var"]._data
                _lerp(row, xp.sqrt(xp.sum(g * g, axis=-1, keepdims=True)) ** 2 / g.shape[-1], weight)
                _lerp(col, xp.sqrt(xp.sum(g * g, axis=-2, keepdims=True)) ** 2 / g.shape[-2], weight)
                var = (row * col) / xp.maximum(xp.mean(row, axis=-2, keepdims=True), e1)
            else:
                var = state["variance"]._data
                _lerp(var, g * g, weight)
            update = g / xp.sqrt(xp.maximum(var, e1 * e1))
            denom = max(1.0, _rms(update, xp) / d)
            w -= (alpha / denom) * update.astype(w.dtype)


def _rms(a, xp):
    """sqrt(mean(a**2)) as a Python float: the norm over the root of the count, as PyTorch."""
    return float(xp.sqrt(xp.sum(a * a))) / a.size ** 0.5 if a.size else 0.0


def _lerp(a, b, w):
    """a <- lerp(a, b, w) in place, from the nearer end as PyTorch computes it."""
    if w < 0.5:
        a += w * (b - a)
    else:
        a[...] = b - (b - a) * (1 - w)
