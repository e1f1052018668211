"""Module: the base class of layers and models, with PyTorch's interface.

A Module keeps three ordered registries, filled by plain attribute assignment:
parameters (``Parameter``), buffers (tensors that are state but not learned, such as
BatchNorm's running mean, added with ``register_buffer``) and child modules. Everything
else (``parameters()``, ``state_dict()``, ``to()``, ``train()``) walks these.
"""
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

from ...tensor import dtype as dtypes
from ...autograd import hooks as _autograd_hooks
from ...tensor.tensor import Tensor
from ..parameter import Parameter
from . import hooks as _module_hooks


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns, as in PyTorch: the model's keys the dict lacked,
    and the dict's keys the model lacks."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _loadable(key, value, target):
    """(value as an array that can be copied into ``target``, None), or (None, what is wrong)."""
    received = type(value).__name__
    if isinstance(value, Tensor):
        value = value.numpy()
    try:
        src = np.asarray(value)
    except (TypeError, ValueError) as exc:     # e.g. a ragged list
        src, received = None, f"{received} ({exc})"
    if src is None or not dtypes.holds_numbers(src.dtype):
        return None, (f'While copying the parameter named "{key}", expected a Tensor or array of numbers from '
                      f"checkpoint but received {received if src is None else f'{received} of dtype {src.dtype}'}")
    shape = tuple(target.shape)
    if src.shape != shape:
        return None, (f"size mismatch for {key}: copying a param with shape {src.shape} from checkpoint, "
                      f"the shape in current model is {shape}.")
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


def _check_assignment(module, name, value):
    """PyTorch's rule for assigning over a registered name: a parameter takes only a Parameter
    (a plain tensor would silently leave parameters() and the state_dict), a child module
    only a Module, a buffer only a Tensor; None is always allowed. Another registry's kind
    replaces the name (a Parameter over a buffer, say)."""
    if isinstance(value, (Parameter, Module)):
        return
    if name in module._parameters:
        kind, expected = "parameter", "nn.Parameter or None"
    elif name in module._modules:
        kind, expected = "child module", "nn.Module or None"
    elif name in module._buffers and not isinstance(value, Tensor):
        kind, expected = "buffer", "Tensor or None"
    else:
        return
    what = value.type() if isinstance(value, Tensor) else type(value).__name__
    raise TypeError(f"cannot assign '{what}' as {kind} '{name}' ({expected} expected)")


class Module:
    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)

    # registration ----------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes in a Module subclass")
        registries = (self._parameters, self._buffers, self._modules)
        if value is not None:
            _check_assignment(self, name, value)
        if isinstance(value, Parameter):
            target = self._parameters
        elif isinstance(value, Module):
            target = self._modules
        elif name in self._buffers or (value is None and any(name in r for r in registries)):
            target = next((r for r in registries if name in r), self._buffers)
        else:
            target = None
        for r in registries:
            if r is not target:
                r.pop(name, None)
        if target is not None:
            target[name] = value
        object.__setattr__(self, name, value)

    def _check_name(self, name, kind, registry):
        """PyTorch's rules for a registered name: a non-empty str without ".", not already a
        plain attribute."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Register a Parameter, or None to declare an optional one (such as a disabled bias)."""
        self._check_name(name, "parameter", self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(Parameter or None required)")
        self._parameters[name] = param
        object.__setattr__(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """Register state that is saved in state_dict and moved by ``to`` but not trained."""
        self._check_name(name, "buffer", self._buffers)   # a "." would make state_dict's keys ambiguous
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: buffer {name!r} must be a Tensor or None, got {type(tensor).__name__}")
        if not persistent:
            self._non_persistent.add(name)
        self._buffers[name] = tensor
        object.__setattr__(self, name, tensor)

    def add_module(self, name, module):
        """Register a child module (or None, a declared but absent one) under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module", self._modules)
        for r in (self._parameters, self._buffers):
            r.pop(name, None)
        self._modules[name] = module
        object.__setattr__(self, name, module)

    register_module = add_module

    def __delattr__(self, name):
        for r in (self._parameters, self._buffers, self._modules):
            r.pop(name, None)
        self._non_persistent.discard(name)
        object.__delattr__(self, name)

    def get_submodule(self, target):
        """The module at dotted path ``target`` ("" is this module), as PyTorch's."""
        mod = self
        for item in target.split(".") if target else ():
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def _get_tensor(self, target, registry, kind):
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{type(mod).__name__} has no attribute `{name}`")
        if name not in getattr(mod, registry):
            raise AttributeError(f"`{name}` is not {kind}")
        return getattr(mod, name)

    def get_parameter(self, target):
        return self._get_tensor(target, "_parameters", "an nn.Parameter")

    def get_buffer(self, target):
        return self._get_tensor(target, "_buffers", "a buffer")

    # traversal -------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module and every descendant, depth first; a module
        reachable along two paths comes once unless ``remove_duplicate=False``."""
        seen = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if remove_duplicate:
                if m in seen if memo is not None else id(m) in seen:
                    continue
                seen.add(m if memo is not None else id(m))
            yield name, m
            children = [(f"{name}.{n}" if name else n, c) for n, c in m._modules.items() if c is not None]
            stack.extend(reversed(children))

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for n, m in self._modules.items():
            if m is not None:
                yield n, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mname, m in mods:
            for n, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mname}.{n}" if mname else n), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mname, m in mods:
            for n, b in m._buffers.items():
                if b is not None and not (remove_duplicate and id(b) in seen):
                    seen.add(id(b))
                    yield (f"{mname}.{n}" if mname else n), b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # modes -----------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, flag=True):
        for p in self.parameters():
            p.requires_grad_(flag)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad._data[...] = 0

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # state -------------------------------------------------------------------------
    def _named_state(self, prefix=""):
        """(name, tensor) of every parameter and persistent buffer, named as PyTorch names them:
        a shared (tied) module or tensor under every name it is reachable by, so a state_dict
        lists it once per path (as ``parameters()`` does not), and loading one needs every key."""
        for mname, m in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            pre = f"{mname}." if mname else ""
            for n, p in m._parameters.items():
                if p is not None:
                    yield pre + n, p
            for n, b in m._buffers.items():
                if b is not None and n not in m._non_persistent:
                    yield pre + n, b

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """An ordered dict name -> Tensor of every parameter and persistent buffer, named as
        PyTorch names them (``layer.0.weight``): detached tensors sharing their memory, or with
        ``keep_vars=True`` the Parameters and buffers themselves (requires_grad kept, as
        PyTorch). Entries are added to ``destination`` (and it is returned) when one is given."""
        out = OrderedDict() if destination is None else destination
        for name, t in self._named_state(prefix):
            out[name] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copy values into this module's parameters and buffers, as PyTorch: with ``strict``,
        missing or unexpected keys are an error; a value of another shape, or one that cannot
        take the entry's dtype without changing its values, always is. Every entry is checked
        before any is copied, so a failed load changes nothing; the RuntimeError lists every
        problem, naming each key. Returns ``(missing_keys, unexpected_keys)``."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        own = OrderedDict(self._named_state())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors, values = [], {}
        for key, target in own.items():
            if key in state_dict:
                value, problem = _loadable(key, state_dict[key], target)
                if problem is None:
                    values[key] = value
                else:
                    errors.append(problem)
        if strict:
            listed = [f"{what} key(s) in state_dict: " + ", ".join(f'"{k}"' for k in keys) + ". "
                      for what, keys in (("Missing", missing), ("Unexpected", unexpected)) if keys]
            errors = listed + errors
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        for key, value in values.items():
            own[key]._data[...] = value
        return _IncompatibleKeys(missing, unexpected)

    # dtype / device ----------------------------------------------------------------
    def _convert(self, fn):
        """Apply ``fn`` (Tensor -> Tensor) to every parameter, its gradient and every buffer,
        swapping in the result's storage: the objects themselves stay, so weights tied
        between modules stay tied (converted once) and an optimizer built before still
        holds the model's parameters."""
        seen = set()
        for m in self.modules():
            for t in list(m._parameters.values()) + list(m._buffers.values()):
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                t._data = fn(t.detach())._data
                if t._grad is not None:
                    t._grad._data = fn(t._grad.detach())._data
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(tensor)``, with PyTorch's
        ``non_blocking`` and ``memory_format`` (accepted; neither changes a value, see Tensor.to):
        floating parameters and buffers take the dtype; everything moves to the device."""
        from ...tensor.tensor import _parse_to_args
        device, dtype, copy, _ = _parse_to_args(args, kwargs)
        if copy:
            raise RuntimeError(".to() does not accept copy argument")
        if dtype is not None and not dtypes.is_floating(dtype):   # checked before anything is converted
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got desired "
                            f"dtype={dtypes.wrap(dtype)}")

        def move(t):
            if dtype is not None and t.dtype.kind == "f":
                t = t.to(dtype)
            if device is not None:
                t = t.to(device)
            return t
        return self._convert(move)

    def float(self):
        return self.to(dtypes.float32)

    def double(self):
        return self.to(dtypes.float64)

    def half(self):
        return self.to(dtypes.float16)

    def bfloat16(self):
        return self.to(dtypes.bfloat16)

    def cuda(self, device=None):
        from ...tensor.device import cuda_device
        return self.to(cuda_device(device))

    def cpu(self):
        return self.to("cpu")

    # calling -----------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        pre, post, back = d.get("_forward_pre_hooks"), d.get("_forward_hooks"), d.get("_backward_hooks")
        if not (pre or post or back):
            return self.forward(*args, **kwargs)
        return _module_hooks.call(self, args, kwargs, pre or {}, post or {}, back or {})

    # hooks (see hooks.py) ------------------------------------------------------------
    def _hook_dict(self, name):
        registry = self.__dict__.get(name)
        if registry is None:
            registry = _autograd_hooks.HookDict()
            object.__setattr__(self, name, registry)
        return registry

    def register_forward_pre_hook(self, hook):
        """``hook(module, args)`` runs before forward; a non-None return replaces args."""
        return _autograd_hooks.add(self._hook_dict("_forward_pre_hooks"), hook)

    def register_forward_hook(self, hook):
        """``hook(module, args, output)`` runs after forward; a non-None return replaces output."""
        return _autograd_hooks.add(self._hook_dict("_forward_hooks"), hook)

    def register_full_backward_hook(self, hook):
        """``hook(module, grad_input, grad_output)`` runs once the gradients with respect to
        the module's tensor inputs are known; a non-None return replaces grad_input."""
        return _autograd_hooks.add(self._hook_dict("_backward_hooks"), hook)

    # printing ----------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        """As PyTorch's: ``Name(extra)`` on one line, or the extra_repr lines then one
        ``(name): child`` line per child, indented."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        if len(extra_lines) == 1 and not child_lines:
            return f"{type(self).__name__}({extra_lines[0]})"
        lines = extra_lines + child_lines
        if not lines:
            return f"{type(self).__name__}()"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"
