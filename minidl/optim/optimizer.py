"""Optimizer: the base class of SGD, Adam and AdamW, with PyTorch's interface.

An optimizer holds ``param_groups``, a list of dicts each with a ``"params"`` list and its
hyper-parameters (``"lr"``, ``"momentum"``...; missing ones are filled from the
constructor's defaults), and ``state``, per-parameter buffers (momentum, Adam moments)
keyed by the parameter itself. ``step()`` updates the parameter arrays in place.

``state_dict()`` follows PyTorch: parameters are replaced by their position across all
groups (0, 1, 2, ... in group order), so the dict can be loaded into a fresh optimizer built
over a fresh model with the same layout:

    {"state": {0: {"step": 3, "exp_avg": array, ...}, ...},
     "param_groups": [{"lr": 0.001, ..., "params": [0, 1, 2]}]}
"""
import copy

import numpy as np

from ..autograd import grad_mode
from ..tensor.tensor import Tensor


class _ParamState(dict):
    """A dict keyed by parameter *identity*: Tensor.__eq__ is elementwise, so Tensors
    cannot be ordinary dict keys safely."""

    def __getitem__(self, p):
        return dict.__getitem__(self, id(p))

    def __setitem__(self, p, value):
        dict.__setitem__(self, id(p), value)

    def __contains__(self, p):
        return dict.__contains__(self, id(p))

    def get(self, p, default=None):
        return dict.get(self, id(p), default)

    def setdefault(self, p, default=None):
        return dict.setdefault(self, id(p), default)

    def pop(self, p, *default):
        return dict.pop(self, id(p), *default)


class Optimizer:
    def __init__(self, params, defaults):
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
        params = [params] if isinstance(params, Tensor) else list(params)
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
    def zero_grad(self, set_to_none=True):
        """Forget the gradients: drop them (default, as PyTorch) or fill them with zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad._data[...] = 0

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns closure() if one is given."""
        loss = None
        if closure is not None:
            with grad_mode.enable_grad():
                loss = closure()
        with grad_mode.no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group):
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
        """Load a dict made by ``state_dict()`` (or ``md.load`` of one): the groups must have
        the same sizes; state arrays are copied and cast to each parameter's dtype."""
        try:
            saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
        except (KeyError, TypeError):
            raise ValueError("optimizer state_dict must be a dict with 'state' and 'param_groups' keys") from None
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, "
                             f"the optimizer has {len(self.param_groups)}")
        own_sizes = [len(g["params"]) for g in self.param_groups]
        saved_sizes = [len(g["params"]) for g in saved_groups]
        if own_sizes != saved_sizes:
            raise ValueError(f"loaded state dict contains parameter groups of sizes {saved_sizes}, "
                             f"which doesn't match the optimizer's group sizes {own_sizes}")
        id_to_param = {}
        for saved, own in zip(saved_groups, self.param_groups):
            for i, p in zip(saved["params"], own["params"]):
                id_to_param[int(i)] = p
        new_state = _ParamState()
        for key, s in saved_state.items():
            p = id_to_param.get(int(key))
            if p is None:
                raise ValueError(f"loaded optimizer state refers to parameter index {key}, "
                                 f"but the optimizer has only {len(id_to_param)} parameters")
            new_state[p] = {name: _state_value_for(p, name, v) for name, v in s.items()}
        for saved, own in zip(saved_groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    own[k] = tuple(v) if isinstance(v, list) and isinstance(own.get(k), tuple) else copy.deepcopy(v)
        self.state = new_state

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines) + "\n)"


def _state_value_for(p, name, value):
    """A private copy of one loaded state entry, on the parameter's dtype (step stays an int)."""
    if isinstance(value, Tensor):
        value = value.numpy()
    if isinstance(value, np.ndarray):
        if value.ndim == 0 and name == "step":
            return int(value)
        host = np.array(value, dtype=p.dtype if value.dtype.kind == "f" else value.dtype, copy=True)
        if p.device != "cpu":   # beside the parameter, so the update never mixes devices
            from .. import backends
            return backends.get(p.device).from_host(host)
        return host
    return copy.deepcopy(value)


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


_required = _RequiredParameter()
