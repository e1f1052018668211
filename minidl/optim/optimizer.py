"""Optimizer: the base class of SGD, Adam and AdamW, with PyTorch's interface.

An optimizer holds ``param_groups``, a list of dicts each with a ``"params"`` list and its
hyper-parameters (``"lr"``, ``"momentum"``...; missing ones are filled from the
constructor's defaults), and ``state``, per-parameter buffers (momentum, Adam moments)
keyed by the parameter itself. ``step()`` updates the parameter arrays in place.

``state_dict()`` follows PyTorch: parameters are replaced by their position across all
groups (0, 1, 2, ... in group order), so the dict can be loaded into a fresh optimizer built
over a fresh model with the same layout:

    {"state": {0: {"step": tensor(3.), "exp_avg": tensor([...]), ...}, ...},
     "param_groups": [{"lr": 0.001, ..., "params": [0, 1, 2]}]}

The per-parameter state holds what PyTorch's does, of the same types: the buffers as Tensors
beside the parameter, and ``step`` (and the scalars some optimizers keep, such as NAdam's
``mu_product``) as 0-d float32 Tensors on the host, counted in place. The updates work on the
arrays inside them. Loading also takes minidl's older state dicts, whose counts are ints and
whose buffers are arrays.
"""
import copy
import functools
import threading
from collections.abc import Mapping

import numpy as np

from .. import backends
from ..autograd import grad_mode
from ..autograd import profiler as _profiler
from ..tensor import dtype as dtypes
from ..tensor.tensor import Tensor
from . import hyper, state_checks


class _ParamState(dict):
    """A parameter's state, keyed by the parameter's *identity* (Tensor.__eq__ is elementwise,
    so Tensors cannot be ordinary dict keys safely). As PyTorch's ``defaultdict(dict)``, a
    parameter without state reads as a new empty dict, and iterating gives the parameters
    (``for p, s in opt.state.items()``); the entries are stored under ``id(p)``, with the
    parameter kept beside them so that an id is never reused while it is a key."""

    def __init__(self):
        super().__init__()
        self._params = {}

    def __getitem__(self, p):
        try:
            return dict.__getitem__(self, id(p))
        except KeyError:
            return self.setdefault(p, {})

    def __setitem__(self, p, value):
        self._params[id(p)] = p
        dict.__setitem__(self, id(p), value)

    def __delitem__(self, p):
        dict.__delitem__(self, id(p))
        del self._params[id(p)]

    def __contains__(self, p):
        return dict.__contains__(self, id(p))

    def __iter__(self):
        return iter(self.keys())

    def keys(self):
        return [self._params[k] for k in dict.keys(self)]

    def items(self):
        return [(self._params[k], v) for k, v in dict.items(self)]

    def get(self, p, default=None):
        return dict.get(self, id(p), default)

    def setdefault(self, p, default=None):
        if id(p) not in self._params:
            self[p] = default
        return dict.__getitem__(self, id(p))

    def pop(self, p, *default):
        self._params.pop(id(p), None)
        return dict.pop(self, id(p), *default)

    def __repr__(self):
        return "{" + ", ".join(f"<parameter of shape {tuple(p.shape)}>: {v!r}" for p, v in self.items()) + "}"

    def __reduce__(self):
        """Pickled and deep-copied as its (parameter, state) pairs, keyed anew by the identity of
        the parameters they are rebuilt with (an id means nothing in another process or copy)."""
        return type(self), (), None, None, iter(self.items())


_in_region = threading.local()    # .open: (id(optimizer), "step" / "zero_grad") regions open on this thread


def _profiled(kind):
    """Decorates an optimizer's ``step`` or ``zero_grad`` (``kind``) to run inside the profiler
    region PyTorch gives it, ``Optimizer.step#SGD.step`` (named by the instance's class), so a
    profile's table shows the optimizer's share of a training step under the name a PyTorch
    reader looks for. A call from inside the same instance's region (a subclass's step calling
    ``super().step()``) opens no second one. Outside a recording profile it costs one test."""
    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            if not _profiler._recording:
                return method(self, *args, **kwargs)
            key = (id(self), kind)
            open_regions = _in_region.__dict__.setdefault("open", set())
            if key in open_regions:
                return method(self, *args, **kwargs)
            open_regions.add(key)
            try:
                with _profiler.record_function(f"Optimizer.{kind}#{type(self).__name__}.{kind}"):
                    return method(self, *args, **kwargs)
            finally:
                open_regions.discard(key)
        wrapper._profiled = True
        return wrapper
    return decorate


class Optimizer:
    def __init_subclass__(cls, **kwargs):
        """A subclass's own ``step`` and ``zero_grad`` are profiled as the base class's are."""
        super().__init_subclass__(**kwargs)
        for kind in ("step", "zero_grad"):
            method = vars(cls).get(kind)
            if callable(method) and not getattr(method, "_profiled", False):
                setattr(cls, kind, _profiled(kind)(method))

    def __init__(self, params, defaults):
        self._check_group(defaults)
        self.defaults = dict(defaults)
        self.state = _ParamState()
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got a single Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        """Add a group (a dict with "params" and optional per-group hyper-parameters)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"a param group must be a dict, got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        params = [params] if isinstance(params, Tensor) else list(params)
        # as PyTorch, parameters may come named, as (name, tensor) pairs (``model.named_parameters()``):
        # the names are kept in the group's "param_names", and so in state_dict()
        names = [p[0] for p in params if isinstance(p, tuple)]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            params = [p[1] for p in params]
            group["param_names"] = names
        for g in self.param_groups:
            if ("param_names" in g) != ("param_names" in group):
                raise ValueError("all optimizer param groups should be with/without names. cannot add param group "
                                 f"{'with' if 'param_names' in group else 'without'} names to the optimizer")
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor (it has a grad_fn); pass parameters or "
                                 "leaf tensors created with requires_grad=True")
        if len({id(p) for p in params}) != len(params):
            raise ValueError("a param group contains the same parameter more than once")
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = params
        for name, default in self.defaults.items():
            if name not in group:
                if default is _required:
                    raise ValueError(f"parameter group didn't specify a value of required optimization "
                                     f"parameter {name!r}")
                group[name] = default
        self.param_groups.append(group)

    # gradients ---------------------------------------------------------------------
    @_profiled("zero_grad")
    def zero_grad(self, set_to_none=True):
        """Forget the gradients: drop them (default, as PyTorch) or fill them with zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad._data[...] = 0

    @_profiled("step")
    def step(self, closure=None):
        """Update every parameter that has a gradient; returns closure() if one is given."""
        loss = None
        if closure is not None:
            with grad_mode.enable_grad():
                loss = closure()
        with grad_mode.no_grad():
            for group in self.param_groups:
                self._update_group(hyper.with_scalar_lr(group))
        return loss

    def _update_group(self, group):
        """The loop of the element-wise optimizers: for each parameter with a gradient, the
        decoupled weight decay ``p <- p * (1 - lr * weight_decay)`` where the group asks for it,
        the gradient from ``hyper.prepared_grad`` (negated with ``maximize``, L2 penalty added
        otherwise), the state started with ``step`` = 0 and ``_initial_state`` when empty, the
        step counted, then ``_update_param``. Optimizers with another loop override this."""
        wd = group.get("weight_decay", 0)
        decoupled = group.get("decoupled_weight_decay", False)
        for p in group["params"]:
            if p.grad is None:
                continue
            w = p._data
            xp = backends.namespace_of(w)
            g = hyper.prepared_grad(w, p.grad._data, group["maximize"], 0 if decoupled else wd)
            if decoupled and wd != 0:
                w *= 1 - group["lr"] * wd
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = new_step()
                state.update((k, held(v)) for k, v in self._initial_state(group, w, xp).items())
            self._update_param(group, w, g, state, xp, advance(state["step"]))

    def _initial_state(self, group, w, xp):
        """A parameter's state besides ``step``, before its first update: arrays (kept as
        Tensors over them) or 0-d float32 Tensors (``new_scalar``)."""
        raise NotImplementedError

    def _update_param(self, group, w, g, state, xp, t):
        """Update the parameter array ``w`` in place from its prepared gradient ``g`` and its
        ``state`` (Tensors; the update writes into their arrays); ``t`` is this update's step
        number (1, 2, ...), already counted in ``state["step"]``; ``xp`` is w's array namespace."""
        raise NotImplementedError

    # state -------------------------------------------------------------------------
    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}. As in
        PyTorch the state arrays are shared, not copied (``md.save`` copies them to disk)."""
        index, groups, i = {}, [], 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = list(range(i, i + len(g["params"])))
            for p in g["params"]:
                index[id(p)] = i
                i += 1
            groups.append(packed)
        state = {index[pid]: s for pid, s in dict.items(self.state) if pid in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a dict made by ``state_dict()`` (or ``md.load`` of one), as PyTorch: the groups
        must have the same sizes; hyper-parameters are taken from it, and state arrays are
        copied, cast to each parameter's dtype and put beside it. Everything is checked first:
        the layout, each hyper-parameter's type (and range, as the constructor checks it), and
        each parameter's state (``_state_spec``: entries present, of the parameter's shape).
        A dict that does not fit raises ValueError naming what, and changes nothing."""
        if not isinstance(state_dict, Mapping) or "param_groups" not in state_dict or "state" not in state_dict:
            raise ValueError("optimizer state_dict must be a dict with 'state' and 'param_groups' keys")
        index_to_param, groups = self._checked_groups(state_dict["param_groups"])
        saved_state = state_dict["state"]
        if not isinstance(saved_state, Mapping):
            raise ValueError(f"loaded state dict's 'state' must be a dict, got {type(saved_state).__name__}")
        new_state = _ParamState()
        for key, entries in saved_state.items():
            if not state_checks.is_index(key) or int(key) not in index_to_param:
                known = f"indices {min(index_to_param)}..{max(index_to_param)}" if index_to_param else "none"
                raise ValueError(f"loaded optimizer state refers to parameter index {key!r}, but the loaded "
                                 f"param_groups hold only {len(index_to_param)} parameters ({known})")
            p, g = index_to_param[int(key)]
            if not isinstance(entries, Mapping):
                raise ValueError(f"loaded optimizer state for parameter {key} must be a dict, "
                                 f"got {type(entries).__name__}")
            new_state[p] = self._checked_param_state(int(key), p, {**self.param_groups[g], **groups[g]}, entries)
        for own, new in zip(self.param_groups, groups):   # nothing below can fail
            own.update(new)
        self.state = new_state

    def _checked_groups(self, saved_groups):
        """({saved index: (parameter, group number)}, the groups' new hyper-parameters)."""
        if not isinstance(saved_groups, (list, tuple)) or not all(isinstance(g, Mapping) for g in saved_groups):
            raise ValueError("loaded state dict's 'param_groups' must be a list of dicts")
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups: {len(saved_groups)} "
                             f"parameter groups in the state dict, {len(self.param_groups)} in the optimizer")
        for i, g in enumerate(saved_groups):
            indices = g.get("params")
            if not isinstance(indices, (list, tuple)) or not all(state_checks.is_index(j) for j in indices):
                raise ValueError(f"loaded param_groups[{i}]['params'] must be a list of parameter indices, "
                                 f"got {indices!r:.80}")
        own_sizes = [len(g["params"]) for g in self.param_groups]
        saved_sizes = [len(g["params"]) for g in saved_groups]
        if own_sizes != saved_sizes:
            raise ValueError(f"loaded state dict contains a parameter group that doesn't match the size of "
                             f"optimizer's group: group sizes {saved_sizes} in the state dict, {own_sizes} in the "
                             "optimizer")
        index_to_param, groups = {}, []
        for i, (saved, own) in enumerate(zip(saved_groups, self.param_groups)):
            for j, p in zip(saved["params"], own["params"]):
                if int(j) in index_to_param:
                    raise ValueError(f"loaded param_groups name parameter index {j} more than once")
                index_to_param[int(j)] = (p, i)
            new = {}
            for k, v in saved.items():
                if k == "params":
                    continue
                if not isinstance(k, str):
                    raise ValueError(f"loaded param_groups[{i}] has a key {k!r} that is not a string")
                new[k] = state_checks.like(f"loaded param_groups[{i}][{k!r}]", own.get(k, _GROUP_KEYS.get(k)), v)
            try:
                self._check_group({**own, **new})
            except ValueError as exc:
                raise ValueError(f"loaded param_groups[{i}]: {exc}") from None
            groups.append(new)
        return index_to_param, groups

    def _checked_param_state(self, index, p, group, entries):
        """The state to keep for parameter number ``index`` from its loaded ``entries``."""
        spec = self._state_spec(group)
        absent = [name for name, (_, required) in spec.items() if required and name not in entries]
        if entries and absent:
            raise ValueError(f"loaded optimizer state for parameter {index} lacks {', '.join(map(repr, absent))} "
                             f"(it has {', '.join(map(repr, entries))})")
        state = {}
        for name, value in entries.items():
            where = f"loaded optimizer state for parameter {index}, {name!r}"
            kind, required = spec.get(name, (None, False))
            if kind == "step":
                state[name] = new_step(state_checks.count(where, value))
            elif kind == "scalar":
                state[name] = new_scalar(state_checks.real(where, value), p)
            elif kind == "count":
                state[name] = state_checks.count(where, value)
            elif kind == "real":
                state[name] = state_checks.real(where, value)
            elif kind == "param":
                state[name] = None if value is None and not required else \
                    held(_beside(p, state_checks.param_shaped(where, value, p)))
            else:
                state[name] = _state_value_for(p, name, value)
        return state

    def _state_spec(self, group):
        """What a loaded per-parameter state of a parameter in ``group`` must look like:
        {name: (kind, required)}, kind "param" (a Tensor of the parameter's shape; None allowed
        when not required), "step" (PyTorch's step count, kept as a 0-d float32 Tensor), "scalar"
        (a finite number kept as a 0-d float32 Tensor, such as NAdam's running product of momenta
        or ASGD's step size), "count" (an int >= 0) or "real" (a finite float). Each is taken as
        an int, a float, a 0-d array or a 0-d Tensor alike. An empty state is always fine
        (the parameter starts afresh); entries not named are copied unchecked."""
        return {}

    @staticmethod
    def _check_group(group):
        """Raise ValueError if the group's hyper-parameters are out of range (as the constructor
        checks its arguments)."""

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines += [""] * (i > 0) + [f"Parameter Group {i}"]   # a blank line between groups, as PyTorch
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines) + "\n)"


_GROUP_KEYS = {"initial_lr": 0.0}   # added by schedulers: checked even where the optimizer has none yet


def _state_value_for(p, name, value):
    """A private copy of one loaded state entry: an array or Tensor as a Tensor beside the
    parameter, on its dtype when floating (a 0-d ``step`` stays PyTorch's float32 count)."""
    value = state_checks.host(value)
    if isinstance(value, np.ndarray):
        if value.ndim == 0 and name == "step":
            return held(np.array(value, dtype=scalar_dtype()))
        return held(_beside(p, np.array(value, dtype=p.dtype if value.dtype.kind == "f" else value.dtype,
                                        copy=True)))
    return copy.deepcopy(value)


def held(array):
    """A state array as the Tensor PyTorch's state holds (over the same memory, outside autograd)."""
    return array if isinstance(array, Tensor) else Tensor._wrap(array, None, 0)


def scalar_dtype():
    """PyTorch's dtype of the optimizers' scalar state: float64 while that is the default dtype,
    float32 otherwise (``torch.optim.optimizer._get_scalar_dtype``)."""
    return np.float64 if dtypes.DEFAULT_FLOAT == np.float64 else np.float32


def new_step(count=0):
    """PyTorch's per-parameter step count: a 0-d Tensor of ``scalar_dtype()`` on the host (float32
    counts every step exactly up to 2**24, as PyTorch's does)."""
    return Tensor._wrap(np.array(count, dtype=scalar_dtype()), None, 0)


def new_scalar(value, w):
    """A per-parameter scalar of the state (NAdam's ``mu_product``, ASGD's ``eta``) of the parameter
    array ``w``: a 0-d Tensor of ``scalar_dtype()`` on the host, as PyTorch keeps it, so that it is
    rounded as PyTorch's is; but float64 for a float64 parameter whatever the default dtype (where
    PyTorch would round it to float32), so that a float64 run keeps float64 precision throughout."""
    dtype = np.float64 if np.dtype(w.dtype) == np.float64 else scalar_dtype()
    return Tensor._wrap(np.array(value, dtype=dtype), None, 0)


def advance(step):
    """Count one more update in the 0-d ``step`` Tensor, in place (whoever holds it sees the count,
    as in PyTorch); returns the new count as an int, for the update's arithmetic."""
    array = step._data
    t = int(array) + 1
    array[()] = t
    return t


def _beside(p, host):
    """``host`` on ``p``'s device, so the update never mixes devices."""
    return host if p.device == "cpu" else backends.get(p.device).from_host(host)


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


_required = _RequiredParameter()
