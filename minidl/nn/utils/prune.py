"""Pruning: zeroing parameters by a mask, PyTorch's ``torch.nn.utils.prune``.

Pruning ``module.<name>`` reparametrizes it, as weight and spectral normalization do:

* the Parameter moves to ``<name>_orig`` (still trained, still in ``parameters()``);
* a 0/1 mask of the same shape and dtype is kept as the buffer ``<name>_mask``;
* ``<name>`` becomes a plain attribute, ``<name>_mask * <name>_orig``, recomputed by a forward
  pre-hook (the pruning method itself) before every call.

So the state_dict holds ``<name>_orig`` and ``<name>_mask``, and the gradient that reaches
``<name>_orig`` is the masked one, ``dL/d orig = mask * dL/d<name>``: pruned entries keep their
value in ``_orig`` but get no gradient. ``remove(module, name)`` makes the pruning permanent:
``<name>`` is a Parameter again holding ``mask * orig``, and ``_orig`` and ``_mask`` are gone.

A method computes a mask from importance scores (the parameter itself unless
``importance_scores`` is given) and the mask already in place (``default_mask``), and prunes
only among what that mask still keeps. Pruning the same parameter again gathers the methods
in a ``PruningContainer``, which hands the new method just the unpruned part: the entries still
at 1 for an unstructured method, the channels along ``dim`` with a nonzero entry for a
structured one, everything for a ``global`` one (``CustomFromMask``). A fractional ``amount``
is therefore a fraction of what is left, ``round(amount * n_left)`` entries or channels, as in
PyTorch.

Which entries go: ``L1Unstructured`` prunes the ``amount`` smallest ``|score|``,
``LnStructured`` the channels of smallest Ln norm along ``dim``, both chosen by ``topk``. With
distinct values the choice is PyTorch's exactly; among equal values minidl's ``topk`` takes the
lower flat index first (a stable sort) while PyTorch's order among ties is unspecified, so
masks may then differ in which of the tied entries were pruned (never in how many). The random
methods draw from minidl's global generator (``minidl.manual_seed``), so they reproduce within
minidl but not PyTorch's draws.
"""
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ..._namespace import norm as _norm
from ...tensor.factories import ones_like, rand, zeros_like
from .convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
           "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
           "l1_unstructured", "random_structured", "ln_structured", "global_unstructured", "custom_from_mask",
           "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """Base class of pruning methods: a subclass sets ``PRUNING_TYPE`` ("unstructured",
    "structured" with a ``dim`` attribute, or "global") and defines ``compute_mask``. An applied
    method is the module's forward pre-hook that recomputes ``module.<name>``."""

    _tensor_name = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for importance scores ``t``: ``default_mask`` (ones if nothing is
        pruned yet) with the entries this method prunes set to 0; same shape as ``t``."""

    def apply_mask(self, module):
        """``<name>_mask * <name>_orig``, differentiable in ``_orig``."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``: reparametrize it (see the
        module docstring) the first time, or add the method to the PruningContainer of the
        methods already applied to it; returns the hook (the method or the container)."""
        method = _composite_method(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        importance_scores = _importance_scores(importance_scores, orig, f"parameter {name} of {module}")
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:   # undo the reparametrization so the module is as it was
                module.__dict__.pop(name, None)
                orig = module._parameters.pop(name + "_orig")
                module.register_parameter(name, orig)
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times this method's mask, computed from ``importance_scores`` (``t`` when None)
        and ``default_mask`` (ones when None); the module is not touched."""
        importance_scores = _importance_scores(importance_scores, t, "tensor t")
        default_mask = default_mask if default_mask is not None else ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: ``<name>`` becomes the Parameter ``_orig`` now holding
        ``mask * orig`` (the same Parameter object, so optimizers that hold it keep it);
        ``_orig`` and ``_mask`` are removed. The pruned entries stay zero."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        weight = self.apply_mask(module)
        module.__dict__.pop(self._tensor_name, None)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _composite_method(cls, module, name, *args, **kwargs):
    """The new ``cls(*args, **kwargs)`` for ``name``, combined with the pruning hook already on
    ``name`` if any (that hook is unregistered; ``apply`` registers the result)."""
    old_method, keys = None, []
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            old_method = hook
            keys.append(k)
    if len(keys) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of module {module}. "
                             "Use a PruningContainer.")
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if old_method is not None:
        if not isinstance(old_method, PruningContainer):
            old_method = PruningContainer(old_method)
        old_method.add_pruning_method(method)
        method = old_method
    for k in keys:
        del module._forward_pre_hooks[k]
    return method


class PruningContainer(BasePruningMethod):
    """The sequence of methods applied to one parameter, for iterative pruning. Its mask is
    the previous mask with the latest method's mask written over the part that is still
    unpruned (see the module docstring)."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if args:
            self._tensor_name = args[0]._tensor_name if isinstance(args[0], BasePruningMethod) else None
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append ``method`` (it must prune the same parameter)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named '{self._tensor_name}' "
                             f"to PruningContainer {self}. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """``default_mask`` with the latest method's mask, computed from the still-unpruned
        slice of ``t`` (entries at 1, or channels along ``dim`` with a nonzero entry, or all of
        it for a global method), written into that slice."""
        method = self._pruning_methods[-1]
        mask = default_mask
        new_mask = mask.to(dtype=t.dtype).clone()
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            slc = mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                                     "`dim` defined.")
            n_dims = t.dim()
            dim = method.dim + n_dims if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {n_dims}")
            others = [d for d in range(n_dims) if d != dim]
            keep_channel = (mask.sum(dim=others) if others else mask) != 0
            slc = [slice(None)] * n_dims
            slc[dim] = keep_channel
            slc = tuple(slc)
        elif kind == "global":
            slc = tuple([slice(None)] * t.dim())
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial_mask = method.compute_mask(t[slc], default_mask=mask[slc])
        new_mask[slc] = partial_mask.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing: the reparametrization with a mask of ones."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class _AmountPruningMethod(BasePruningMethod):
    """A method that prunes ``amount`` entries or channels: an int count, or a float fraction in
    [0, 1] of those left (checked here, and against the tensor in ``_nparams_toprune``)."""

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def _nparams_toprune(self, tensor_size):
        nparams_toprune = _compute_nparams_toprune(self.amount, tensor_size)
        _validate_pruning_amount(nparams_toprune, tensor_size)
        return nparams_toprune


class _UnstructuredPruningMethod(_AmountPruningMethod):
    """Zeroes the ``amount`` entries at the flat indices ``_pruned_entries(t, nparams_toprune)``."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        nparams_toprune = self._nparams_toprune(t.numel())
        if nparams_toprune == 0:
            return default_mask.clone()
        return _zero_flat(default_mask, self._pruned_entries(t, nparams_toprune))


class _StructuredPruningMethod(_AmountPruningMethod):
    """Keeps the channels along ``dim`` that ``_kept_channels(t, nparams_toprune)`` selects, zeroing the
    ``amount`` others; needs a tensor of two or more dims."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        super().__init__(amount)
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        nparams_toprune = self._nparams_toprune(t.shape[self.dim])
        if nparams_toprune == 0:
            return default_mask
        mask = _channel_mask(t, self.dim, self._kept_channels(t, nparams_toprune))
        return mask * default_mask.to(dtype=mask.dtype)


class RandomUnstructured(_UnstructuredPruningMethod):
    """Prunes ``amount`` entries (an int count, or a float fraction in [0, 1]) chosen uniformly
    at random among those not yet pruned."""

    def _pruned_entries(self, t, nparams_toprune):
        return rand(*t.shape, device=t.device).reshape(-1).topk(nparams_toprune).indices

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_UnstructuredPruningMethod):
    """Prunes the ``amount`` entries (an int count, or a float fraction in [0, 1]) of smallest
    absolute importance score among those not yet pruned."""

    def _pruned_entries(self, t, nparams_toprune):
        return t.detach().abs().reshape(-1).topk(nparams_toprune, largest=False).indices

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(_StructuredPruningMethod):
    """Prunes ``amount`` whole channels along ``dim`` (slices ``t[..., i, ...]``), chosen
    uniformly at random; needs a tensor of two or more dims."""

    def _kept_channels(self, t, nparams_toprune):
        prob = rand(t.shape[self.dim], device=t.device)
        return prob > prob.kthvalue(nparams_toprune).values

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_StructuredPruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of smallest Ln norm (``n`` as ``p`` of
    ``minidl.norm``: a number, ``inf``, ``-inf`` or ``"fro"``) of the importance scores, the
    norm taken over every other dim; needs a tensor of two or more dims."""

    def __init__(self, amount, n, dim=-1):
        super().__init__(amount, dim)
        self.n = n

    def _kept_channels(self, t, nparams_toprune):
        norm = _compute_norm(t.detach(), self.n, self.dim)
        return norm.topk(t.shape[self.dim] - nparams_toprune, largest=True).indices

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given ``mask`` is 0 (a "global" method: it sees the whole tensor)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError(f"default_mask shape {tuple(default_mask.shape)} must match self.mask shape "
                                 f"{tuple(self.mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Reparametrize ``module.<name>`` with a mask of ones (prune nothing); returns the module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune ``amount`` random entries of ``module.<name>``; returns the module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` of smallest ``|importance_scores|``
    (the parameter's own values by default); returns the module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``; returns the module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the ``amount`` channels along ``dim`` of smallest Ln norm; returns the module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) pairs of ``parameters`` together: ``pruning_method(**kwargs)``
    (an unstructured method class) picks entries across all of them, seen as one flat vector
    of importance scores (``importance_scores[(module, name)]``, else the current, already
    masked ``module.<name>``), so a fraction ``amount`` is of all still-unpruned entries and
    layers lose different shares. Each parameter then gets its slice as a ``CustomFromMask``."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([importance_scores.get((module, name), getattr(module, name)).detach()
                                   for module, name in parameters])
    default_mask = parameters_to_vector([getattr(module, name + "_mask", ones_like(getattr(module, name)))
                                         for module, name in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
                        f"{pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    pointer = 0
    for module, name in parameters:
        param = getattr(module, name)
        num_param = param.numel()
        custom_from_mask(module, name, mask=final_mask[pointer:pointer + num_param].reshape(param.shape))
        pointer += num_param


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` where ``mask`` is 0; returns the module."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent (see ``BasePruningMethod.remove``) and
    drop its hook; returns the module."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed")


def is_pruned(module):
    """Whether ``module`` or any of its submodules carries a pruning hook."""
    for _, submodule in module.named_modules():
        for hook in submodule._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False


# helpers -------------------------------------------------------------------------------
def _importance_scores(importance_scores, t, what):
    """``importance_scores``, checked to have ``t``'s shape (``what`` names t), or ``t`` when None."""
    if importance_scores is None:
        return t
    if tuple(importance_scores.shape) != tuple(t.shape):
        raise AssertionError(f"importance_scores should have the same shape as {what}, got "
                             f"{tuple(importance_scores.shape)} vs {tuple(t.shape)}")
    return importance_scores


def _zero_flat(mask, indices):
    """``mask`` with the entries at flat ``indices`` set to 0."""
    flat = mask.reshape(-1).clone()
    flat[indices] = 0
    return flat.reshape(mask.shape)


def _channel_mask(t, dim, channels):
    """Zeros like ``t`` with ones in the channels along ``dim`` that ``channels`` (a bool mask
    or indices) selects."""
    mask = zeros_like(t.detach())
    slc = [slice(None)] * t.dim()
    slc[dim] = channels
    mask[tuple(slc)] = 1
    return mask


def _validate_pruning_amount_init(amount):
    """An int amount must be >= 0, a float one in [0, 1] (bools count as ints, as in PyTorch)."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a non-negative integer")


def _validate_pruning_amount(amount, tensor_size):
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to prune={tensor_size}")


def _validate_structured_pruning(t):
    shape = tuple(t.shape)
    if len(shape) <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. Found tensor of shape "
                         f"{shape} with {len(shape)} dims")


def _compute_nparams_toprune(amount, tensor_size):
    """An int amount as given, a fraction rounded (half to even) to a count."""
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _validate_pruning_dim(t, dim):
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")


def _compute_norm(t, n, dim):
    """The Ln norm of each channel of ``t`` along ``dim`` (over all other dims)."""
    dims = list(range(t.dim()))
    if dim < 0:
        dim = dims[dim]
    dims.remove(dim)
    return _norm(t, p=n, dim=dims)
