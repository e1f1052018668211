"""Learning-rate schedules, with PyTorch's names and semantics: ``optim.lr_scheduler``.

The protocol and base class are in scheduler_base.py; ExponentialLR, MultiStepLR, ConstantLR,
LinearLR and PolynomialLR in scheduler_decay.py; CyclicLR, OneCycleLR and
CosineAnnealingWarmRestarts in scheduler_cyclic.py; SequentialLR and ChainedScheduler in
scheduler_compose.py; ReduceLROnPlateau in plateau.py. Here:

- LambdaLR:           lr_t = base_lr * lr_lambda(t)
- MultiplicativeLR:   lr_t = lr_{t-1} * lr_lambda(t)
- StepLR:             lr_t = base_lr * gamma ** (t // step_size)   (applied multiplicatively, as torch)
- CosineAnnealingLR:  lr_t = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2
- linear_warmup_cosine: a LambdaLR rising linearly over ``warmup_steps`` then following a
  half cosine down to ``min_lr_ratio * base_lr`` at ``total_steps``.
"""
import math

from . import state_checks
from .plateau import ReduceLROnPlateau
from .scheduler_base import LRScheduler, warn_get_lr_outside_step
from .scheduler_compose import ChainedScheduler, SequentialLR
from .scheduler_cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from .scheduler_decay import ConstantLR, ExponentialLR, LinearLR, MultiStepLR, PolynomialLR


def _lr_lambdas(optimizer, lr_lambda):
    """One function per param group: ``lr_lambda`` repeated, or a list or tuple of as many."""
    n = len(optimizer.param_groups)
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != n:
            raise ValueError(f"expected {n} lr_lambdas, but got {len(lr_lambda)}")
        fns = list(lr_lambda)
    else:
        fns = [lr_lambda] * n
    for fn in fns:
        if not callable(fn):
            raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
    return fns


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); ``lr_lambda`` may be a list, one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _lr_lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        warn_get_lr_outside_step(self)
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]


class MultiplicativeLR(LRScheduler):
    """lr_t = lr_{t-1} * lr_lambda(t) for t >= 1 (the lr of epoch 0 is the group's own); a
    chainable form, so manual lr changes and stacked schedules compose. ``lr_lambda`` may be
    a list, one per group; as LambdaLR's, the functions are not part of ``state_dict()``."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _lr_lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        warn_get_lr_outside_step(self)
        groups = self.optimizer.param_groups
        if self._is_initial:
            return [group["lr"] for group in groups]
        return [group["lr"] * fn(self.last_epoch) for fn, group in zip(self.lr_lambdas, groups)]


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        _check_step_size(step_size)
        self.step_size = int(step_size)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def _check_state(self, state):
        super()._check_state(state)
        _check_step_size(state["step_size"])

    def get_lr(self):
        warn_get_lr_outside_step(self)
        # multiplicative, as PyTorch's chainable form (so manual lr changes are respected)
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Half a cosine from base_lr (epoch 0) to eta_min (epoch T_max), in closed form."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        _check_T_max(T_max)
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _check_state(self, state):
        super()._check_state(state)
        _check_T_max(state["T_max"])

    def get_lr(self):
        warn_get_lr_outside_step(self)
        return self._get_closed_form_lr()

    def _get_closed_form_lr(self):
        c = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]


def _check_step_size(step_size):
    if not (state_checks.is_real(step_size) and math.isfinite(step_size) and int(step_size) == step_size
            and step_size > 0):
        raise ValueError(f"step_size must be a positive integer, got {step_size}")


def _check_T_max(T_max):
    if not (state_checks.is_real(T_max) and T_max > 0):
        raise ValueError(f"T_max must be positive, got {T_max}")


def warmup_cosine_factor(step, warmup_steps, total_steps, min_lr_ratio=0.0):
    """The multiplier of the base lr at ``step`` (0-based): (step + 1) / warmup_steps during
    the warm-up, so the first update already moves and the full lr is reached at step
    warmup_steps - 1; then min + (1 - min) * (1 + cos(pi * progress)) / 2 with progress going
    from 0 at ``warmup_steps`` to 1 at ``total_steps`` (and staying there)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / span)
    return min_lr_ratio + (1 - min_lr_ratio) * (1 + math.cos(math.pi * progress)) / 2


def linear_warmup_cosine(optimizer, warmup_steps, total_steps, min_lr_ratio=0.0):
    """A LambdaLR: linear warm-up over ``warmup_steps`` steps, then cosine decay to
    ``min_lr_ratio * base_lr`` at ``total_steps``. Step it once per optimizer step."""
    if warmup_steps < 0 or total_steps <= 0 or warmup_steps > total_steps:
        raise ValueError(f"need 0 <= warmup_steps <= total_steps and total_steps > 0, "
                         f"got warmup_steps={warmup_steps}, total_steps={total_steps}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")

    def factor(step):
        return warmup_cosine_factor(step, warmup_steps, total_steps, min_lr_ratio)
    return LambdaLR(optimizer, factor)


_LRScheduler = LRScheduler  # the older PyTorch name

__all__ = ["ChainedScheduler", "ConstantLR", "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "CyclicLR",
           "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR", "MultiStepLR", "MultiplicativeLR", "OneCycleLR",
           "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR", "linear_warmup_cosine",
           "warmup_cosine_factor"]
