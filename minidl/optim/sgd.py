"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

PyTorch's update, per parameter p with gradient g, at learning rate lr:

    g <- g + weight_decay * p                          (L2 penalty, if weight_decay != 0)
    if momentum != 0:
        b <- g                                         on the first step (no dampening then)
        b <- momentum * b + (1 - dampening) * g        afterwards
        g <- g + momentum * b   if nesterov   else   b
    p <- p - lr * g

(with ``maximize``, g is negated first). The momentum buffer b is this parameter's state.
"""
from .. import backends
from . import hyper, implementation
from .optimizer import Optimizer, held


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        flags = dict(foreach=foreach, differentiable=differentiable, fused=fused)
        hyper.implementation_flags(type(self).__name__, **flags)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, **flags)
        super().__init__(params, defaults)

    @staticmethod
    def _check_group(group):
        momentum, dampening = group["momentum"], group["dampening"]
        hyper.check_lr(group["lr"])
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if group["weight_decay"] < 0.0:
            raise ValueError(f"Invalid weight_decay value: {group['weight_decay']}")
        if group["nesterov"] and (momentum <= 0 or dampening != 0):
            raise ValueError(f"Nesterov momentum requires a momentum and zero dampening (got momentum={momentum}, "
                             f"dampening={dampening})")

    def _state_spec(self, group):
        return {"momentum_buffer": ("param", False)}

    def _update_group(self, group):
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            w, g = p._data, p.grad._data
            fused = implementation.fused(w, "fused_sgd")
            if fused is not None:
                state = self.state.setdefault(p, {}) if momentum != 0 else None
                held_buf = None if state is None else state.get("momentum_buffer")
                done, buf = fused(w, g, None if held_buf is None else held_buf._data, lr, wd, momentum, dampening,
                                  nesterov, maximize)
                if done:   # one kernel did the whole update (a device's fused path)
                    if state is not None and held_buf is None:
                        state["momentum_buffer"] = held(buf)
                    continue
            if maximize:
                g = -g
            if wd != 0:
                g = g + wd * w  # a new array: the .grad the user sees is left alone
            if momentum != 0:
                state = self.state.setdefault(p, {})
                held_buf = state.get("momentum_buffer")
                if held_buf is None:
                    buf = backends.namespace_of(g).array(g, copy=True)
                    state["momentum_buffer"] = held(buf)
                else:
                    buf = held_buf._data
                    buf *= momentum
                    buf += (1 - dampening) * g
                g = g + momentum * buf if nesterov else buf
            w -= lr * g
