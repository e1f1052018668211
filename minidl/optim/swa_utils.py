"""Weight averaging (``optim.swa_utils``), with PyTorch's names, signatures and formulas.

- AveragedModel: a copy of a model whose parameters (and, with ``use_buffers=True``, buffers)
  are a running average of the model's: by default the equal-weight SWA mean
  avg_{n+1} = avg_n + (p - avg_n) / (n + 1), or any ``avg_fn`` / ``multi_avg_fn``, such as the
  EMA avg = decay * avg + (1 - decay) * p.
- update_bn: recompute BatchNorm running statistics of a (usually averaged) model by one pass
  over data, as a cumulative average (the averaged weights never produced those activations).
- SWALR: anneal each group's lr from its current value to ``swa_lr`` over ``anneal_epochs``.
"""
import math
from copy import deepcopy

from ..autograd import grad_mode
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from ..tensor import dtype as dtypes
from ..tensor import factories
from . import state_checks
from .optimizer import Optimizer
from .scheduler_base import LRScheduler, format_param, warn_get_lr_outside_step

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if not state_checks.is_real(decay):
        raise TypeError(f"decay must be a number in [0,1], got {type(decay).__name__}")
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _blend_integral(averaged, current, weight):
    """An integer tensor (a BatchNorm's ``num_batches_tracked``) has no lerp: its average is
    computed in floating point and truncated back on the copy, as PyTorch does."""
    averaged.copy_(averaged * (1 - weight) + current * weight)


def get_ema_multi_avg_fn(decay=0.999):
    """In place on lists: avg = decay * avg + (1 - decay) * p, as PyTorch's lerp of avg toward p
    by 1 - decay (so the rounding matches)."""
    _check_decay(decay)

    @grad_mode.no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        for p_ema, p_model in zip(ema_param_list, current_param_list):
            if p_ema.is_floating_point():
                p_ema.lerp_(p_model, 1 - decay)
            else:
                _blend_integral(p_ema, p_model, 1 - decay)
    return ema_update


def get_swa_multi_avg_fn():
    """In place on lists: the equal-weight mean, avg lerped toward p by 1 / (n + 1)."""
    @grad_mode.no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        weight = 1.0 / (float(num_averaged) + 1)
        for p_avg, p_model in zip(averaged_param_list, current_param_list):
            if p_avg.is_floating_point():
                p_avg.lerp_(p_model, weight)
            else:
                _blend_integral(p_avg, p_model, weight)
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """Per tensor, returning the new average: decay * avg + (1 - decay) * p."""
    _check_decay(decay)

    @grad_mode.no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """Per tensor, returning the new average: avg + (p - avg) / (n + 1)."""
    @grad_mode.no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


def _check_module(where, model):
    if not isinstance(model, Module):
        raise TypeError(f"{where}: expected an nn.Module, got {type(model).__name__}")


class AveragedModel(Module):
    """A deep copy of ``model`` (``self.module``, moved to ``device`` if given) whose weights
    ``update_parameters(model)`` averages: the first call copies the model's, each later one
    folds them in with ``avg_fn(avg, p, n_averaged)`` (returns the new value), or
    ``multi_avg_fn(avg_list, p_list, n_averaged)`` (in place, per dtype), or by default the
    equal-weight mean. Buffers are averaged with ``use_buffers=True``, else copied from the
    model. ``n_averaged`` (int64 buffer) counts the models averaged; the functions are not in
    ``state_dict()``, whose keys are ``n_averaged`` and ``module.<name>`` as PyTorch's."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        _check_module("AveragedModel", model)
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        for name, fn in (("avg_fn", avg_fn), ("multi_avg_fn", multi_avg_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"AveragedModel: {name} must be a function, got {type(fn).__name__}")
        # a copy, so the averaged weights share no memory (nor gradients) with the trained ones
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", factories.tensor(0, dtype=dtypes.int64,
                                                            device="cpu" if device is None else device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _pairs(self, model):
        """(averaged, model's) detached tensors to average, checked to correspond one to one."""
        if self.use_buffers:
            ours = [*self.module.parameters(), *self.module.buffers()]
            theirs = [*model.parameters(), *model.buffers()]
            what = "parameters and buffers"
        else:
            ours, theirs, what = list(self.parameters()), list(model.parameters()), "parameters"
        _check_same_shapes(what, ours, theirs)
        return [(a.detach(), p.detach().to(a.device)) for a, p in zip(ours, theirs)]

    def update_parameters(self, model):
        _check_module("AveragedModel.update_parameters", model)
        pairs = self._pairs(model)
        with grad_mode.no_grad():
            if int(self.n_averaged) == 0:
                for averaged, current in pairs:
                    averaged.copy_(current)
            elif self.multi_avg_fn is not None:
                groups = {}
                for averaged, current in pairs:   # PyTorch hands over one list per device and dtype
                    group = groups.setdefault((str(averaged.device), averaged.dtype), ([], []))
                    group[0].append(averaged)
                    group[1].append(current)
                for (device, _), (averaged, current) in groups.items():
                    self.multi_avg_fn(averaged, current, self.n_averaged.to(device))
            else:
                avg_fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
                for averaged, current in pairs:
                    averaged.copy_(avg_fn(averaged, current, self.n_averaged.to(averaged.device)))
            if not self.use_buffers:
                # the averaged weights run with the model's statistics until update_bn recomputes them
                ours, theirs = list(self.module.buffers()), list(model.buffers())
                _check_same_shapes("buffers", ours, theirs)
                for b_avg, b_model in zip(ours, theirs):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged.add_(1)


def _check_same_shapes(what, ours, theirs):
    if len(ours) != len(theirs):
        raise ValueError(f"AveragedModel.update_parameters: the averaged model has {len(ours)} {what}, "
                         f"the model given has {len(theirs)}; expected the same architecture")
    for i, (a, p) in enumerate(zip(ours, theirs)):
        if tuple(a.shape) != tuple(p.shape):
            raise ValueError(f"AveragedModel.update_parameters: {what} #{i} has shape {tuple(a.shape)} in the "
                             f"averaged model, {tuple(p.shape)} in the model given")


@grad_mode.no_grad()
def update_bn(loader, model, device=None):
    """Recompute the running mean and variance of every BatchNorm in ``model`` by one pass over
    ``loader`` (items: a tensor, or a list or tuple whose first element is the input), as a
    cumulative average (momentum None) in train mode; momenta and the training flag are put back."""
    _check_module("update_bn", model)
    if not hasattr(loader, "__iter__"):
        raise TypeError(f"update_bn: expected an iterable loader of batches, got {type(loader).__name__}")
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    try:
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to its ``swa_lr`` (one value, or one per group, kept in the group)
    over ``anneal_epochs`` steps, then hold it. In PyTorch's chainable form: at step s, with
    t = clamp(s / anneal_epochs, 0, 1) and alpha = f(t) (f(t) = t for "linear",
    (1 - cos(pi t)) / 2 for "cos"), the lr the anneal started from is recovered from the
    group's current lr and the previous alpha, and the new lr is swa_lr * alpha + start * (1 - alpha)."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        swa_lrs = format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        _check_strategy(anneal_strategy)
        self._set_anneal_func(anneal_strategy)
        _check_anneal_epochs(anneal_epochs)
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)   # counts step() calls in _step_count, the constructor's included

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def get_lr(self):
        warn_get_lr_outside_step(self)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        groups = self.optimizer.param_groups
        starts = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha) for group in groups]
        alpha = self.anneal_func(max(0, min(1, step / span)))
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(groups, starts)]

    def _check_state(self, state):
        super()._check_state(state)
        _check_strategy(state["_anneal_strategy"])
        _check_anneal_epochs(state["anneal_epochs"])
        state_checks.count("loaded scheduler state '_step_count'", state["_step_count"])

    def _apply_state(self, new):
        super()._apply_state(new)
        self._set_anneal_func(self._anneal_strategy)   # the function is not saved, its name is


def _check_strategy(anneal_strategy):
    if anneal_strategy not in ("cos", "linear"):
        raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")


def _check_anneal_epochs(anneal_epochs):
    if not state_checks.is_index(anneal_epochs) or anneal_epochs < 0:
        raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
