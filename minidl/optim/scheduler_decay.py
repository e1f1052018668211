"""Decaying learning-rate schedules, each in PyTorch's chainable form (get_lr: a factor on the
group's current lr) with its closed form of the epoch t (``_get_closed_form_lr``):

- ExponentialLR:  lr_t = base_lr * gamma^t
- MultiStepLR:    lr_t = base_lr * gamma^(number of milestones <= t)      (a milestone may repeat)
- ConstantLR:     lr_t = base_lr * factor for t < total_iters, base_lr afterwards
- LinearLR:       lr_t = base_lr * (start + (end - start) * min(t, total_iters) / total_iters)
- PolynomialLR:   lr_t = base_lr * (1 - min(t, total_iters) / total_iters)^power
"""
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping

from . import state_checks
from .scheduler_base import LRScheduler, check_count, warn_get_lr_outside_step


def _current(scheduler, factor=1.0):
    return [group["lr"] * factor for group in scheduler.optimizer.param_groups]


class ExponentialLR(LRScheduler):
    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        warn_get_lr_outside_step(self)
        return _current(self) if self._is_initial else _current(self, self.gamma)

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self._check_milestones(self.milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _check_milestones(milestones):
        if not isinstance(milestones, Mapping) or not all(
                state_checks.is_index(k) and state_checks.is_index(n) and n > 0 for k, n in milestones.items()):
            raise ValueError(f"milestones must be integers (epochs), got {milestones!r:.80}")

    def _check_state(self, state):
        super()._check_state(state)
        self._check_milestones(state["milestones"])

    def _apply_state(self, new):
        if "milestones" in new:
            new = {**new, "milestones": Counter(new["milestones"])}
        super()._apply_state(new)

    def get_lr(self):
        warn_get_lr_outside_step(self)
        if self.last_epoch not in self.milestones:
            return _current(self)
        return _current(self, self.gamma ** self.milestones[self.last_epoch])

    def _get_closed_form_lr(self):
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ConstantLR(LRScheduler):
    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError(f"Constant multiplicative factor expected to be between 0 and 1, got {factor}")
        check_count("total_iters", total_iters)
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        warn_get_lr_outside_step(self)
        if self.last_epoch == 0:
            return _current(self, self.factor)
        if self.last_epoch != self.total_iters:
            return _current(self)
        if self.factor == 0:   # the chain cannot undo a factor of 0
            return list(self.base_lrs)
        return _current(self, 1.0 / self.factor)

    def _get_closed_form_lr(self):
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and less or equal to 1, "
                             f"got {start_factor}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"Ending multiplicative factor expected to be between 0 and 1, got {end_factor}")
        check_count("total_iters", total_iters)
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        warn_get_lr_outside_step(self)
        if self.last_epoch == 0:
            return _current(self, self.start_factor)
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current(self)
        # the ratio of this epoch's factor to the last one's
        slope = self.end_factor - self.start_factor
        return _current(self, 1.0 + slope / (self.total_iters * self.start_factor + (self.last_epoch - 1) * slope))

    def _get_closed_form_lr(self):
        done = min(self.total_iters, self.last_epoch) / self.total_iters if self.total_iters else 1.0
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * done) for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        check_count("total_iters", total_iters)
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        warn_get_lr_outside_step(self)
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current(self)
        t, n = self.last_epoch, self.total_iters
        return _current(self, ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power)

    def _get_closed_form_lr(self):
        done = min(self.total_iters, self.last_epoch) / self.total_iters if self.total_iters else 1.0
        return [base * (1.0 - done) ** self.power for base in self.base_lrs]
