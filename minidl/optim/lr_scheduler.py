"""Learning-rate schedules, with PyTorch's semantics.

A scheduler wraps an optimizer and rewrites each group's ``"lr"``. It is built *after* the
optimizer (it records each group's ``"initial_lr"``, the base lr, and sets the lr for epoch
0 at once) and ``step()`` is called after ``optimizer.step()``; ``last_epoch`` counts the
``step()`` calls, and ``get_last_lr()`` gives the lrs it set last.

- LambdaLR:           lr_t = base_lr * lr_lambda(t)
- StepLR:             lr_t = base_lr * gamma ** (t // step_size)   (applied multiplicatively, as torch)
- CosineAnnealingLR:  lr_t = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2
- linear_warmup_cosine: a LambdaLR rising linearly over ``warmup_steps`` then following a
  half cosine down to ``min_lr_ratio * base_lr`` at ``total_steps``.
"""
import math
from collections.abc import Mapping

from . import state_checks
from .optimizer import Optimizer


class LRScheduler:
    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr = None
        self.step()  # sets the lr of epoch 0 (or of last_epoch + 1 when resuming)

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates (one per group) set by the last step()."""
        return list(self._last_lr)

    def step(self):
        self.last_epoch += 1
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer (and functions, which cannot be saved)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)
                and k != "lr_lambdas"}

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict()`` gave, as PyTorch. Checked first, so a dict that does not
        fit raises ValueError and changes nothing: each value must be of the kind this scheduler
        holds (``base_lrs`` one number per param group, ``last_epoch`` an int >= -1, ...), and a
        key that would replace the optimizer or a method is refused. Functions (``lr_lambdas``)
        are not in checkpoints: the scheduler keeps its own."""
        if not isinstance(state_dict, Mapping):
            raise ValueError(f"scheduler state_dict must be a dict, got {type(state_dict).__name__}")
        current, new = self.state_dict(), {}
        for k, v in state_dict.items():
            if not isinstance(k, str):
                raise ValueError(f"scheduler state_dict has a key {k!r} that is not a string")
            if k == "lr_lambdas":
                continue
            if k == "optimizer" or callable(getattr(type(self), k, None)):
                raise ValueError(f"scheduler state_dict key {k!r} would replace the scheduler's {k}; refused")
            value = state_checks.like(f"loaded scheduler state {k!r}", current.get(k), v)
            new[k] = list(value) if isinstance(value, tuple) else value
        self._check_state({**current, **new})
        self.__dict__.update(new)

    def _check_state(self, state):
        """Raise ValueError if ``state`` (a complete state dict) is out of range."""
        last_epoch = state["last_epoch"]
        if not state_checks.is_index(last_epoch) or last_epoch < -1:
            raise ValueError(f"loaded scheduler state 'last_epoch': expected an int >= -1, got {last_epoch!r}")


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); ``lr_lambda`` may be a list, one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]


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
        c = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]

    _get_closed_form_lr = get_lr


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

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "CosineAnnealingLR", "linear_warmup_cosine",
           "warmup_cosine_factor"]
