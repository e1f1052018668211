"""ReduceLROnPlateau: multiply the lr by ``factor`` once a metric has stopped improving for
more than ``patience`` epochs (PyTorch's).

``step(metric)`` after each evaluation. "Improving" means below best * (1 - threshold)
("min", "rel"), below best - threshold ("min", "abs"), or above best * (1 + threshold) /
best + threshold in "max" mode. After a reduction, ``cooldown`` epochs pass before bad epochs
count again; no lr goes below its ``min_lr``, and changes smaller than ``eps`` are skipped.
"""
import math

from . import state_checks
from .optimizer import Optimizer
from .scheduler_base import LRScheduler, check_count, format_param, group_values, set_group_value


class ReduceLROnPlateau(LRScheduler):
    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4, threshold_mode="rel",
                 cooldown=0, min_lr=0, eps=1e-8):
        if not state_checks.is_real(factor) or factor >= 1.0:
            raise ValueError(f"Factor should be < 1.0, got {factor}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        check_count("patience", patience)
        check_count("cooldown", cooldown)
        self.factor = factor
        self.optimizer = optimizer
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        self.min_lrs = format_param("min_lr", optimizer, min_lr)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = group_values(optimizer, "lr")
        self._init_is_better(mode, threshold, threshold_mode)
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown! expected 'min' or 'max'")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown! expected 'rel' or 'abs'")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def _is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def step(self, metrics, epoch=None):
        current = _metric_value(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = group_values(self.optimizer, "lr")

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"The number of param groups in the `optimizer` ({len(groups)}) differs from when "
                                   f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}); set `min_lrs` to one "
                                   "value per param group")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, min_lr)
            if old - new > self.eps:
                set_group_value(group, "lr", new)

    def _check_state(self, state):
        super()._check_state(state)
        if state["mode"] not in ("min", "max") or state["threshold_mode"] not in ("rel", "abs"):
            raise ValueError(f"loaded ReduceLROnPlateau state has mode {state['mode']!r} and threshold_mode "
                             f"{state['threshold_mode']!r}; expected 'min'/'max' and 'rel'/'abs'")

    def _apply_state(self, new):
        super()._apply_state(new)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


def _metric_value(metrics):
    try:
        return float(metrics.item() if hasattr(metrics, "item") else metrics)
    except (TypeError, ValueError):
        raise TypeError(f"ReduceLROnPlateau.step expects a number (the metric), got {metrics!r:.60}") from None
