"""Weight normalization (Salimans & Kingma, 2016), PyTorch's classic hook-based API.

``weight_norm(module, name, dim)`` splits the parameter ``w`` into a direction ``v`` and a
magnitude ``g`` and trains those instead:

    w = g * v / ||v||

with the norm over every dimension except ``dim`` (one magnitude per slice along ``dim``:
per output unit for dim=0), or over the whole tensor when ``dim`` is None. ``g`` keeps
``w``'s shape along ``dim`` and size 1 elsewhere (a 0-dim scalar for the whole-tensor norm),
and starts at ``||w||`` so the module computes the same function as before.

The parameters become ``<name>_g`` and ``<name>_v`` (state_dict keys too, as in PyTorch);
``<name>`` turns into a plain attribute recomputed by a forward pre-hook before every call,
from ordinary differentiable ops, so the gradients flow to ``g`` and ``v``:

    dL/dg = <dL/dw, v> / ||v||            (summed within each slice)
    dL/dv = (g / ||v||) (dL/dw - (<dL/dw, v> / ||v||^2) v)

``remove_weight_norm`` folds ``w`` back into one Parameter. PyTorch deprecates this API in favour
of ``nn.utils.parametrizations.weight_norm`` and says so with a FutureWarning; so does this one.

As in PyTorch, dim=-1 also means the whole tensor (the legacy convention of this API); other
negative dims count from the end.
"""
import warnings

from ... import linalg
from ..parameter import Parameter

__all__ = ["weight_norm", "remove_weight_norm"]


def _norm_except_dim(v, dim):
    if dim is None:
        return linalg.vector_norm(v)
    others = tuple(d for d in range(v.ndim) if d != dim)
    return linalg.vector_norm(v, dim=others, keepdim=True)


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and ``<name>_v``.
    ``dim`` is None for the whole-tensor norm, else a non-negative dimension."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    @staticmethod
    def apply(module, name, dim):
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=3)
        for hook in getattr(module, "_forward_pre_hooks", {}).values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        weight = module._parameters.get(name) if hasattr(module, "_parameters") else None
        if weight is None:
            raise ValueError(f"weight_norm: expected {type(module).__name__} to have a parameter named "
                             f"{name!r}, but its parameters are {list(getattr(module, '_parameters', {}))}")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
            raise TypeError(f"weight_norm: dim must be an int or None, got {type(dim).__name__}")
        if dim == -1:
            dim = None
        elif dim is not None:
            if not -weight.ndim <= dim < weight.ndim:
                raise IndexError(f"weight_norm: dim {dim} is out of range for parameter {name!r} of "
                                 f"shape {tuple(weight.shape)} (expected one of [{-weight.ndim}, "
                                 f"{weight.ndim - 1}], or None)")
            dim %= weight.ndim
        fn = WeightNorm(name, dim)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        fn.handle = module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module).detach()
        delattr(module, self.name)
        delattr(module, self.name + "_g")
        delattr(module, self.name + "_v")
        setattr(module, self.name, Parameter(weight))
        self.handle.remove()

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (see the module docstring);
    returns the module."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo ``weight_norm``: ``module.<name>`` becomes a Parameter again, holding the current
    ``g * v / ||v||``; returns the module."""
    for hook in getattr(module, "_forward_pre_hooks", {}).values():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
