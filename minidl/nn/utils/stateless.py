"""Calling a module with other parameters and buffers, as ``torch.nn.utils.stateless`` (and
``torch.func.functional_call``, which minidl.func re-exports).

``functional_call(module, {"layer.weight": w, ...}, args)`` puts the given tensors in the
module's registries under those (state_dict-style) names, calls the module, and puts the
originals back, also when the call raises. The given tensors are used as they are (not copied),
so gradients flow to them. A name that is not registered is set as a plain attribute (a
parametrized name thus goes through its property's setter, i.e. ``right_inverse``, as in
PyTorch); one the module does not have at all is added for the call and removed after.
"""
import contextlib
import warnings

from ...tensor.tensor import Tensor
from ..modules.module import Module

__all__ = ["functional_call"]

_MISSING = object()   # what a name held before the call when the module had no such attribute


def _swap_tensor(module, name, tensor):
    """Put ``tensor`` at ``module.<name>`` (``_MISSING``: remove the name); return what was there."""
    if tensor is not _MISSING and tensor is not None and not isinstance(tensor, Tensor):
        raise TypeError(f"{tensor} is not an instance of Tensor")
    if "." in name:
        raise KeyError('tensor name can\'t contain "."')
    if name == "":
        raise KeyError('tensor name can\'t be empty string ""')
    for registry in (module._parameters, module._buffers):
        if name in registry:
            orig = registry[name]
            if tensor is not _MISSING:
                registry[name] = tensor
            else:
                del registry[name]
            return orig
    orig = getattr(module, name) if hasattr(module, name) else _MISSING
    if orig is not _MISSING and orig is not None and not isinstance(orig, Tensor):
        raise TypeError(f"attribute `{name}`: {orig} is not an instance of Tensor")
    if tensor is not _MISSING:
        setattr(module, name, tensor)
    elif hasattr(module, name):
        delattr(module, name)
    return orig


class _Accessor:
    """Dotted names ("layer1.conv.weight") resolved to (submodule, attribute), submodules cached."""

    def __init__(self, module):
        self.module = module
        self.memo = {}

    def get_submodule(self, name):
        if not name:
            return self.module
        if name not in self.memo:
            prefix, _, attr = name.rpartition(".")
            parent = self.get_submodule(prefix)
            try:
                sub = getattr(parent, attr)
            except AttributeError as ex:
                raise AttributeError(f"{parent._get_name()} has no attribute `{attr}`") from ex
            if not isinstance(sub, Module):
                raise TypeError(f"submodule `{name}`: {sub} is not an instance of Module")
            self.memo[name] = sub
        return self.memo[name]

    def swap_tensor(self, name, value):
        prefix, _, attr = name.rpartition(".")
        return _swap_tensor(self.get_submodule(prefix), attr, value)

    def swap_tensors_dict(self, named_tensors):
        """Swap every entry in; on an error, swap back what was swapped and re-raise. Returns the
        previous values by name."""
        orig = {}
        try:
            for name, tensor in named_tensors.items():
                orig[name] = self.swap_tensor(name, tensor)
        except Exception:
            for name, tensor in orig.items():
                self.swap_tensor(name, tensor)
            raise
        return orig

    def check_keys(self, keys):
        """(missing, unexpected): the module's tensor names not in ``keys``, and the reverse, sorted."""
        keys = set(keys)
        valid = {n for n, _ in self.module.named_parameters(remove_duplicate=False)}
        valid |= {n for n, _ in self.module.named_buffers(remove_duplicate=False)}
        return sorted(valid - keys), sorted(keys - valid)


def _untie_named_tensors_map(module, parameters_and_buffers):
    """``parameters_and_buffers`` with, for each given name of a tensor the module holds under
    several names (tied weights), the same value under all of them; ValueError when different
    values are given for names of one tied tensor."""
    all_named = dict(module.named_parameters(remove_duplicate=False))
    all_named.update(module.named_buffers(remove_duplicate=False))
    names_of = {}
    for name, tensor in all_named.items():
        names_of.setdefault(id(tensor), set()).add(name)
    tied = {name: names for names in names_of.values() if len(names) > 1 for name in names}
    given_tied = {name for name in parameters_and_buffers if name in tied}
    for given in given_tied:
        names = tied[given]
        if (len(names & given_tied) > 1
                and len({id(parameters_and_buffers[n]) for n in names if n in parameters_and_buffers}) != 1):
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                             "Consider using tie_weights=False")
    untied = dict(parameters_and_buffers)
    for given in given_tied:
        for name in tied[given]:
            untied[name] = parameters_and_buffers[given]
    return untied


@contextlib.contextmanager
def _reparametrize_module(module, parameters_and_buffers, tie_weights=False, strict=False):
    untied = _untie_named_tensors_map(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    accessor = _Accessor(module)
    if strict:
        missing, unexpected = accessor.check_keys(untied)
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError(f"Error(s) in reparametrizing for {module._get_name()}:\n\t" + "\n\t".join(msgs))
    orig = {}
    try:
        orig = accessor.swap_tensors_dict(untied)
        yield
    finally:
        new = accessor.swap_tensors_dict(orig)
        # a module that replaced a tensor in its registries during the call: the caller's dict
        # gets the replacement
        parameters_and_buffers.update({k: new[k] for k in parameters_and_buffers if k in new})


def _functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    kwargs = {} if kwargs is None else kwargs
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with the tensors of ``parameters_and_buffers`` (names as in
    state_dict) in place of the module's own, which are restored afterwards (see the module
    docstring). ``args`` that is not a tuple is the single positional argument.
    ``tie_weights``: a value given for one name of a tied tensor is used for all its names
    (different values for them are a ValueError). ``strict``: every parameter and buffer must
    be given, and nothing else (RuntimeError otherwise).

    Deprecated as in PyTorch (a FutureWarning): ``minidl.func.functional_call`` is the same
    call."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed "
                  "in a future version of PyTorch. Please use `torch.func.functional_call` instead which is a "
                  "drop-in replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)
