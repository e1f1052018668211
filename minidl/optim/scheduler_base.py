"""LRScheduler: the base of the learning-rate schedules (``optim.lr_scheduler``), with
PyTorch's protocol.

A scheduler wraps an optimizer and rewrites each group's ``"lr"``. It is built *after* the
optimizer (it records each group's ``"initial_lr"``, the base lr, and sets the lr for epoch
0 at once) and ``step()`` is called after ``optimizer.step()``; ``last_epoch`` counts the
``step()`` calls, and ``get_last_lr()`` gives the lrs it set last.

``get_lr()`` gives the lrs of epoch ``last_epoch``. Most schedules write it in PyTorch's
chainable form: a factor applied to the group's current lr, so that schedules stacked on one
optimizer (``ChainedScheduler``) or manual lr changes compose; ``_is_initial`` is true during
the step the constructor makes. As PyTorch's, the state (``state_dict()``: the instance's
attributes) also holds ``_step_count``, the calls of ``step()`` the constructor's included, and
the flags ``_is_initial`` and ``_get_lr_called_within_step`` (false between steps), so that
state dicts have PyTorch's keys. ``_get_closed_form_lr()`` is the same schedule as a function
of the epoch alone, used by ``step(epoch)`` (deprecated in PyTorch) and ``SequentialLR``.

As PyTorch, the first ``step()`` after the constructor's warns when the optimizer has not
stepped since the scheduler was built (the schedule would skip its first lr): the scheduler
replaces the optimizer's ``step`` with a ``_CountedStep`` that counts the calls.
"""
import types
import warnings
from collections.abc import Mapping

from ..tensor.tensor import Tensor
from . import state_checks
from .optimizer import Optimizer


class _CountedStep:
    """``optimizer.step``, counting its calls in ``optimizer._step_calls``. An object, not a
    closure, so that a deep copy of the optimizer counts (and steps) the copy."""
    _wrapped_by_lr_sched = True   # PyTorch's marker of a tracked step

    def __init__(self, optimizer, step):
        self.optimizer, self.step = optimizer, step

    def __call__(self, *args, **kwargs):
        note_step(self.optimizer)
        step = self.step
        if getattr(step, "__self__", None) is not None and getattr(step, "__func__", None) is not None:
            return step.__func__(self.optimizer, *args, **kwargs)   # the method, of this (maybe copied) optimizer
        return step(*args, **kwargs)


def note_step(optimizer):
    """Count an optimizer step (or one a GradScaler skipped: the order of the calls was right)."""
    optimizer._step_calls = getattr(optimizer, "_step_calls", 0) + 1


def _track_steps(optimizer):
    if not isinstance(getattr(optimizer, "step", None), _CountedStep):
        optimizer.step = _CountedStep(optimizer, optimizer.step)
    return getattr(optimizer, "_step_calls", 0)


class LRScheduler:
    _is_initial = False
    _get_lr_called_within_step = False   # PyTorch's flag, true while step() computes the lrs
    _step_count = 0
    _steps_at_init = None   # the optimizer's step count when built; None once checked or loaded
    _UNSAVED = ("optimizer", "_steps_at_init")

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]   # a Tensor lr is copied: the schedule fills the group's tensor in place
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                                   "scheduler with last_epoch >= 0.")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr = None
        self._get_lr_called_within_step = False
        steps = _track_steps(optimizer)
        self._initial_step()
        self._steps_at_init = steps

    def _initial_step(self):
        """The constructor's step: sets the lr of epoch 0 (or of last_epoch + 1 when resuming)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates (one per group) set by the last step()."""
        return list(self._last_lr)

    def step(self, epoch=None):
        self._check_order()
        self._step_count += 1
        self._update_lr(epoch)

    def _check_order(self):
        """PyTorch's warning, once: the first step() came before any optimizer.step()."""
        if self._steps_at_init is None or self._is_initial:
            return
        if getattr(self.optimizer, "_step_calls", 0) == self._steps_at_init:
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
                          "later, you should call them in the opposite order: `optimizer.step()` before "
                          "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
                          "value of the learning rate schedule.", UserWarning, stacklevel=3)
        self._steps_at_init = None

    def _update_lr(self, epoch=None):
        """Move to the next epoch, or to ``epoch`` (by the closed form where there is one), and
        set the groups' lrs."""
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                lrs = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                lrs = closed_form() if closed_form is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, lrs):
            set_group_value(group, "lr", lr)
        self._last_lr = group_values(self.optimizer, "lr")

    def state_dict(self):
        """Everything but the optimizer (and functions, which cannot be saved). As PyTorch, a
        scheduler with ``lr_lambdas`` saves one entry per function: None for a plain function
        or lambda, the attributes (``__dict__``) of a callable object, which loading restores."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._UNSAVED and not callable(v)
                 and k != "lr_lambdas"}
        if "lr_lambdas" in self.__dict__:
            state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(vars(fn))
                                   for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict()`` gave, as PyTorch. Checked first, so a dict that does not
        fit raises ValueError and changes nothing: each value must be of the kind this scheduler
        holds (``base_lrs`` one number per param group, ``last_epoch`` an int >= -1, ...), and a
        key that would replace the optimizer or a method is refused. Functions (``lr_lambdas``, a
        custom ``scale_fn``) are not in checkpoints: the scheduler keeps its own."""
        self._apply_state(self._checked_state(state_dict))

    def _checked_state(self, state_dict):
        """The attributes ``load_state_dict(state_dict)`` would set, all checked."""
        if not isinstance(state_dict, Mapping):
            raise ValueError(f"scheduler state_dict must be a dict, got {type(state_dict).__name__}")
        current, new = self.state_dict(), {}
        for k, v in state_dict.items():
            if not isinstance(k, str):
                raise ValueError(f"scheduler state_dict has a key {k!r} that is not a string")
            if k == "lr_lambdas":
                new[k] = self._checked_lambda_states(v)
                continue
            if callable(self.__dict__.get(k)):
                continue
            if k == "optimizer" or callable(getattr(type(self), k, None)):
                raise ValueError(f"scheduler state_dict key {k!r} would replace the scheduler's {k}; refused")
            value = state_checks.like(f"loaded scheduler state {k!r}", current.get(k), v)
            new[k] = list(value) if isinstance(value, tuple) else value
        self._check_state({**current, **new})
        return new

    def _checked_lambda_states(self, saved):
        """The saved attributes of each of ``lr_lambdas`` (None: nothing to restore)."""
        own = self.__dict__.get("lr_lambdas")
        if own is None:
            return None
        if not isinstance(saved, (list, tuple)) or len(saved) != len(own) or \
                not all(s is None or isinstance(s, Mapping) for s in saved):
            raise ValueError(f"loaded scheduler state 'lr_lambdas': expected a list of {len(own)} entries, each "
                             f"None or a dict of attributes, got {saved!r:.80}")
        return [None if s is None else dict(s) for s in saved]

    def _apply_state(self, new):
        new = dict(new)
        lambda_states = new.pop("lr_lambdas", None)
        self.__dict__.update(new)
        for fn, attributes in zip(self.__dict__.get("lr_lambdas", ()), lambda_states or ()):
            if attributes is not None and not isinstance(fn, types.FunctionType):
                fn.__dict__.update(attributes)
        self._steps_at_init = None   # a resumed schedule has stepped before (PyTorch loads its _step_count)

    def _check_state(self, state):
        """Raise ValueError if ``state`` (a complete state dict) is out of range."""
        last_epoch = state["last_epoch"]
        if not state_checks.is_index(last_epoch) or last_epoch < -1:
            raise ValueError(f"loaded scheduler state 'last_epoch': expected an int >= -1, got {last_epoch!r}")
        if "_step_count" in state:
            state_checks.count("loaded scheduler state '_step_count'", state["_step_count"])


def warn_get_lr_outside_step(scheduler):
    """PyTorch's warning when a built-in schedule's ``get_lr()`` is called by hand: outside
    ``step()`` it computes the next epoch's (chainable) lrs from the current ones, which is not
    the lr in use; ``get_last_lr()`` is."""
    if not scheduler._get_lr_called_within_step:
        warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                      UserWarning, stacklevel=3)


def set_group_value(group, key, value):
    """``group[key] = value``, but a Tensor there (a Tensor lr) is filled in place, as PyTorch does,
    so that whoever holds it sees the schedule."""
    current = group[key]
    if isinstance(current, Tensor):
        current.fill_(float(value.item() if isinstance(value, Tensor) else value))
    else:
        group[key] = value


def group_values(optimizer, key):
    """Each group's ``key``; Tensors copied (get_last_lr must not change with the next step)."""
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key] for g in optimizer.param_groups]


def format_param(name, optimizer, value):
    """One value per param group: ``value`` repeated, or a list or tuple of as many."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} has "
                             f"{len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


def check_count(name, value, minimum=0):
    """An int >= ``minimum`` (numbers of epochs or steps)."""
    if not state_checks.is_index(value) or value < minimum:
        raise ValueError(f"Expected an integer {name} >= {minimum}, but got {value!r}")
