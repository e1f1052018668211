"""Schedules made of schedules (PyTorch's):

- SequentialLR: ``schedulers[i]`` drives the lr from ``milestones[i - 1]`` on; at each
  milestone the next one starts from its epoch 0 (its closed form), from the base lrs.
- ChainedScheduler: every scheduler steps each time, so their chainable factors multiply.

state_dict holds the inner schedulers' state dicts under ``"_schedulers"``; load_state_dict
checks all of them before changing any.
"""
from bisect import bisect_right

from .plateau import ReduceLROnPlateau
from .scheduler_base import LRScheduler, group_values, set_group_value


def _check_schedulers(owner, optimizer, schedulers):
    if not isinstance(schedulers, (list, tuple)) or len(schedulers) < 1:
        raise ValueError(f"{owner} expects at least one scheduler, but got {schedulers!r:.60}")
    for i, scheduler in enumerate(schedulers):
        if not isinstance(scheduler, LRScheduler):
            raise TypeError(f"{owner} at index {i} should be an LRScheduler, got {type(scheduler).__name__}")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(f"{owner} does not support `ReduceLROnPlateau` scheduler as it requires additional "
                             f"kwargs to be specified when calling `step`, but got one at index {i} in the given "
                             "schedulers sequence.")
        if scheduler.optimizer is not optimizer:
            raise ValueError(f"{owner} expects all schedulers to belong to the same optimizer, but got scheduler "
                             f"{type(scheduler).__name__} at index {i} with a different optimizer")


class _Composite(LRScheduler):
    """The state handling of schedulers that hold ``_schedulers``."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def _checked_state(self, state_dict):
        if not isinstance(state_dict, dict) or not isinstance(state_dict.get("_schedulers"), (list, tuple)):
            raise ValueError(f"{type(self).__name__} state_dict must be a dict with a '_schedulers' list")
        inner = state_dict["_schedulers"]
        if len(inner) != len(self._schedulers):
            raise ValueError(f"loaded {type(self).__name__} state holds {len(inner)} schedulers, this one has "
                             f"{len(self._schedulers)}")
        own = super()._checked_state({k: v for k, v in state_dict.items() if k != "_schedulers"})
        return own, [s._checked_state(d) for s, d in zip(self._schedulers, inner)]

    def _apply_state(self, new):
        own, inner = new
        super()._apply_state(own)
        for scheduler, state in zip(self._schedulers, inner):
            scheduler._apply_state(state)


class SequentialLR(_Composite):
    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_schedulers(type(self).__name__, optimizer, schedulers)
        if not isinstance(milestones, (list, tuple)) or len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be one more than the "
                             f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                             f"number of milestones to be equal to {len(milestones)}")
        if list(milestones) != sorted(milestones):
            raise ValueError(f"SequentialLR milestones must be increasing, got {list(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # the inner schedulers each made their initial step on construction: undo them, and
        # start the first one afresh from the base lrs
        for group in optimizer.param_groups:
            set_group_value(group, "lr", group["initial_lr"])
        for scheduler in self._schedulers:
            _undo_step(scheduler)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self):
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


def _undo_step(scheduler):
    if isinstance(scheduler, _Composite):
        for inner in scheduler._schedulers:
            _undo_step(inner)
    else:
        scheduler.last_epoch -= 1


class ChainedScheduler(_Composite):
    def __init__(self, schedulers, optimizer=None):
        if isinstance(schedulers, (list, tuple)) and schedulers and optimizer is None:
            optimizer = getattr(schedulers[0], "optimizer", None)
        _check_schedulers(type(self).__name__, optimizer, schedulers)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = group_values(optimizer, "lr")

    def step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = group_values(self.optimizer, "lr")

    def _check_state(self, state):
        """Nothing of its own to range-check (it counts no epochs): its schedulers check theirs."""
