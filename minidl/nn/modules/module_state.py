"""How a Module saves and loads its state, as PyTorch's does: ``state_dict`` (each module's own
entries through ``_save_to_state_dict``, then its children's, around the state-dict hooks),
``load_state_dict`` (each module's own entries through ``_load_from_state_dict``, around the load
hooks), the extra state of subclasses, and the load-time checks.

Every entry is checked before any is written, so a load that fails changes nothing (unless a
post-hook, which runs after the writes as in PyTorch, is registered). A write counts as an
in-place write: a backward that saved the old values fails instead of using the new ones.
"""
import functools
import itertools
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

from ...autograd import hooks as _autograd_hooks
from ...autograd import versions as _versions
from ...tensor import dtype as dtypes
from ...tensor.tensor import Tensor
from ..parameter import Parameter


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns, as in PyTorch: the model's keys the dict lacked,
    and the dict's keys the model lacks."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _loadable(key, value, target, assign=False):
    """(what to load into ``target`` from checkpoint entry ``value``, None), or (None, what is
    wrong). What to load is an array of target's dtype, or with ``assign`` the checkpoint's
    Tensor itself (an array is made one; its dtype is kept). As in PyTorch, a one-element
    1-d value loads into a 0-d target."""
    received = type(value).__name__
    original = value
    if isinstance(value, Tensor):
        value = value.numpy(force=True)
    try:
        src = np.asarray(value)
    except (TypeError, ValueError) as exc:     # e.g. a ragged list
        src, received = None, f"{received} ({exc})"
    if src is None or not dtypes.holds_numbers(src.dtype):
        return None, (f'While copying the parameter named "{key}", expected a Tensor or array of numbers from '
                      f"checkpoint but received {received if src is None else f'{received} of dtype {src.dtype}'}")
    shape = tuple(target.shape)
    squeeze = shape == () and src.shape == (1,)
    if squeeze:
        src = src.reshape(())
    if src.shape != shape:
        return None, (f"size mismatch for {key}: copying a param with shape {src.shape} from checkpoint, "
                      f"the shape in current model is {shape}.")
    if assign:
        if isinstance(original, Tensor):
            return (original.reshape(()) if squeeze else original), None
        return Tensor._wrap(dtypes.native(np.array(src)), None, 0), None
    why = _cast_problem(src, np.dtype(target.dtype))
    if why is not None:
        return None, (f"dtype mismatch for {key}: cannot copy a param of dtype {src.dtype} from checkpoint "
                      f"into the dtype {target.dtype} in current model: {why}.")
    return src.astype(target.dtype, copy=False), None


def _cast_problem(src, dtype):
    """Why ``src``'s values would change on becoming ``dtype`` beyond float rounding, or None.
    (PyTorch's copy_ would silently drop imaginary parts and truncate to integers.)"""
    kind, to = src.dtype.kind, dtype.kind
    if kind == "c" and to != "c":
        return "its values are complex"
    if to in "fcV" or kind == "b" or (kind in "iu" and to in "iu" and np.can_cast(src.dtype, dtype)) or not src.size:
        return None
    if kind == "f" and not np.all(np.isfinite(src)):
        return "it holds inf or nan"
    if kind == "f" and not np.array_equal(src, np.trunc(src)):
        return "it holds values that are not whole numbers"
    low, high = (0, 1) if to == "b" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    if src.min() < low or src.max() > high:
        return f"it holds values outside [{low}, {high}]"
    return None


_EXTRA_STATE_KEY_SUFFIX = "_extra_state"
# Key of ``local_metadata`` under which load_state_dict collects the writes it defers until
# every entry has been checked (see load_state_dict).
_PENDING = "_minidl_pending_writes"


class _WrappedLoadHook:
    """A load_state_dict pre-hook, called with the module first when registered by the public API."""

    def __init__(self, hook, module=None):
        self.hook, self.module = hook, module

    def __call__(self, *args, **kwargs):
        if self.module is not None:
            return self.hook(self.module, *args, **kwargs)
        return self.hook(*args, **kwargs)


def _write(target, value):
    """Copy ``value`` (an array) into the tensor ``target`` in place, as ``copy_`` under
    no_grad: a backward that saved the old values then fails instead of using the new ones."""
    target._data[...] = value
    _versions.bump(target._version_counter)


class StateDictMethods:
    """The state-dict half of Module (module.py): Module inherits these methods."""

    def get_extra_state(self):
        """Override (with set_extra_state) to save a picklable object under ``<prefix>_extra_state``."""
        raise RuntimeError("Module.get_extra_state() is only called when a subclass overrides it")

    def set_extra_state(self, state):
        """Override (with get_extra_state) to restore what get_extra_state returned."""
        raise RuntimeError("Module.set_extra_state() is only called when a subclass overrides it")

    def _register_state_dict_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` after state_dict; a non-None
        return replaces the state_dict."""
        if getattr(hook, "_from_public_api", False):
            raise RuntimeError("Cannot register the same function as the state dict post hook that was "
                               "previously registered via register_state_dict_post_hook")
        return _autograd_hooks.add(self._state_dict_hooks, hook)

    def register_state_dict_post_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` after state_dict, which may edit
        the state_dict in place; it must return None."""
        hook._from_public_api = True
        return _autograd_hooks.add(self._state_dict_hooks, hook)

    def register_state_dict_pre_hook(self, hook):
        """``hook(module, prefix, keep_vars)`` before state_dict saves this module."""
        return _autograd_hooks.add(self._state_dict_pre_hooks, hook)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """This module's own entries (not its children's): parameters, persistent buffers and
        the extra state of a subclass that defines get_extra_state."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if type(self).get_extra_state is not StateDictMethods.get_extra_state:
            destination[prefix + _EXTRA_STATE_KEY_SUFFIX] = self.get_extra_state()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict name -> Tensor of every parameter and persistent buffer, named as
        PyTorch names them (``prefix`` + ``layer.0.weight``, the prefix added as it is): a
        module or tensor shared between paths under every path; detached tensors sharing
        their memory, or with ``keep_vars=True`` the Parameters and buffers themselves.
        Entries are added to ``destination`` (and it is returned) when one is given. Each
        module saves its own entries with ``_save_to_state_dict`` and then its children's by
        their own ``state_dict``, around the state_dict hooks."""
        if args:
            warnings.warn("Positional args are being deprecated, use kwargs instead.", FutureWarning, stacklevel=2)
            if destination is None:
                destination = args[0]
            if len(args) > 1 and prefix == "":
                prefix = args[1]
            if len(args) > 2 and keep_vars is False:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):   # each module's version, by its prefix (read back by loading)
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in list(self._state_dict_pre_hooks.values()):
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook in list(self._state_dict_hooks.values()):
            result = hook(self, destination, prefix, local_metadata)
            if not getattr(hook, "_from_public_api", False):
                if result is not None:
                    destination = result
            elif result is not None:
                raise RuntimeError("state_dict post-hook must return None")
        return destination

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """``hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
        error_msgs)`` (the module first with ``with_module``) before this module loads."""
        wrapped = _WrappedLoadHook(hook, self if with_module else None)
        return _autograd_hooks.add(self._load_state_dict_pre_hooks, wrapped)

    def register_load_state_dict_pre_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before this module loads; it may edit state_dict."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` after loading; it may edit the key lists in place
        (which decides whether a strict load fails) and must return None."""
        return _autograd_hooks.add(self._load_state_dict_post_hooks, hook)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """Load this module's own entries (keys ``prefix`` + name) as PyTorch's does, noting
        missing and unexpected keys and problems. Within load_state_dict the writes are only
        collected (under ``local_metadata[_PENDING]``) and made once every module has been
        checked; called on its own it writes at once."""
        for hook in list(self._load_state_dict_pre_hooks.values()):
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        persistent = ((k, v) for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set)
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent) if v is not None}
        assign = local_metadata.get("assign_to_params_buffers", False)
        pending = local_metadata.get(_PENDING)
        writes = []
        for name, target in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value, problem = _loadable(key, state_dict[key], target, assign)
            if problem is not None:
                error_msgs.append(problem)
            elif assign:
                writes.append(functools.partial(self._assign_loaded, name, target, value))
            else:
                writes.append(functools.partial(_write, target, value))
        extra_key = prefix + _EXTRA_STATE_KEY_SUFFIX
        if type(self).set_extra_state is not StateDictMethods.set_extra_state:
            if extra_key in state_dict:
                writes.append(functools.partial(self.set_extra_state, state_dict[extra_key]))
            elif strict:
                missing_keys.append(extra_key)
        elif strict and extra_key in state_dict:
            unexpected_keys.append(extra_key)
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key != extra_key:
                    first, dot, _ = key[len(prefix):].partition(".")
                    if (first not in self._modules) if dot else (first not in local_state):
                        unexpected_keys.append(key)
        if pending is None:
            for write in writes:
                write()
        else:
            pending.extend(writes)

    def _assign_loaded(self, name, old, value):
        """``load_state_dict(assign=True)``: the checkpoint's tensor itself takes the name; a
        parameter stays a Parameter with the old one's requires_grad."""
        if isinstance(old, Parameter):
            if isinstance(value, Parameter):
                value.requires_grad_(old.requires_grad)
            else:
                value = Parameter(value, requires_grad=old.requires_grad)
        setattr(self, name, value)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values into this module's parameters and buffers, as PyTorch: with ``strict``,
        missing or unexpected keys are an error; a value of another shape, or one that cannot
        take the entry's dtype without changing its values, always is. With ``assign=True``
        the checkpoint's tensors (their dtype kept) replace the parameters and buffers
        instead of being copied into them. Returns ``(missing_keys, unexpected_keys)``.

        Each module loads its own entries with ``_load_from_state_dict`` (around the load
        hooks), as in PyTorch, but every entry is checked before any is written, so a load
        that fails on a bad entry changes nothing; so does one failing on strict keys,
        unless a post-hook (which runs after the writes, as in PyTorch) is registered."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors, pending, post_hooks = [], [], [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        incompatible = _IncompatibleKeys(missing, unexpected)

        def load(module, local_state_dict, prefix=""):
            local_metadata = dict({} if metadata is None else metadata.get(prefix[:-1], {}))
            local_metadata[_PENDING] = pending
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)},
                         child_prefix)
            post_hooks.extend((module, hook) for hook in module._load_state_dict_post_hooks.values())

        load(self, state_dict)
        if errors or not post_hooks:
            self._raise_load_errors(errors, missing, unexpected, strict)
        for write in pending:
            write()
        for module, hook in post_hooks:
            if hook(module, incompatible) is not None:
                raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not expected "
                                     "to return new values, if incompatible_keys need to be modified, it should be "
                                     "done inplace.")
        self._raise_load_errors([], missing, unexpected, strict)
        return incompatible

    def _raise_load_errors(self, errors, missing, unexpected, strict):
        """PyTorch's RuntimeError listing missing and unexpected keys (with ``strict``) and
        every other problem, naming each key; nothing when there is nothing to list."""
        if strict:
            listed = [f"{what} key(s) in state_dict: " + ", ".join(f'"{k}"' for k in keys) + ". "
                      for what, keys in (("Missing", missing), ("Unexpected", unexpected)) if keys]
            errors = listed + errors
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
