"""Module: the base class of layers and models, with PyTorch's interface.

A Module keeps three ordered registries, filled by plain attribute assignment:
parameters (``Parameter``), buffers (tensors that are state but not learned, such as
BatchNorm's running mean, added with ``register_buffer`` or by assigning an ``nn.Buffer``)
and child modules. Everything else (``parameters()``, ``state_dict()``, ``to()``,
``train()``) walks these. Registered names are read through ``__getattr__`` from the
registries, which are the only place they are kept, as in PyTorch. Saving and loading state
(state_dict, load_state_dict and their hooks) is in module_state.py.
"""
from collections import OrderedDict

from ...autograd import hooks as _autograd_hooks
from ...tensor import dtype as dtypes
from ...tensor.tensor import Tensor
from ..parameter import Buffer, Parameter
from . import hooks as _module_hooks
from .hooks import (register_module_backward_hook, register_module_buffer_registration_hook,  # noqa: F401
                    register_module_forward_hook, register_module_forward_pre_hook,
                    register_module_full_backward_hook, register_module_full_backward_pre_hook,
                    register_module_module_registration_hook, register_module_parameter_registration_hook)
from .module_state import StateDictMethods, _write


def _check_assignment(module, name, value):
    """PyTorch's rule for assigning over a registered name: a parameter takes only a Parameter
    (a plain tensor or a module would silently leave parameters() and the state_dict), a
    child module only a Module, a buffer only a Tensor; None is always allowed. A Parameter
    replaces any registered name, a Module any name but a parameter's."""
    if value is None or isinstance(value, Parameter):
        return
    if name in module._parameters:
        kind, expected = "parameter", "nn.Parameter or None"
    elif isinstance(value, Module):
        return
    elif name in module._modules:
        kind, expected = "child module", "nn.Module or None"
    elif name in module._buffers and not isinstance(value, Tensor):
        kind, expected = "buffer", "Tensor or None"
    else:
        return
    if isinstance(value, Tensor):
        what = value.type()
    elif isinstance(value, Module):
        what = f"{type(value).__module__}.{type(value).__name__}"
    else:
        what = type(value).__name__
    raise TypeError(f"cannot assign '{what}' as {kind} '{name}' ({expected} expected)")


# Every hook registry a Module keeps (an ordered dict hook id -> hook, or -> True for the
# flag registries), as PyTorch names them; created by __init__ (and by __setstate__ for a
# module pickled without them).
_HOOK_REGISTRIES = (
    "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks", "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called", "_backward_hooks", "_backward_pre_hooks", "_state_dict_hooks",
    "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
)


class Module(StateDictMethods):
    """Base class of all layers and models, as ``torch.nn.Module``.

    Registered parameters, buffers and children live only in ``_parameters``, ``_buffers``
    and ``_modules`` (not in ``__dict__``) and are found by ``__getattr__``, as in PyTorch,
    so code that edits a registry directly (``m._parameters["weight"] = p``, as
    reparametrizations and pruning do) is seen by ``m.weight``."""

    training: bool
    _version = 1
    call_super_init = False
    dump_patches = False

    def __init__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")
        if args:
            raise TypeError(f"{type(self).__name__}.__init__() takes 1 positional argument but {len(args) + 1} were "
                            "given")
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", OrderedDict())
        setattr_(self, "_buffers", OrderedDict())
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", OrderedDict())
        setattr_(self, "_is_full_backward_hook", None)
        for name in _HOOK_REGISTRIES:
            setattr_(self, name, _autograd_hooks.HookDict())

    def __getstate__(self):
        """What pickle and deepcopy keep: the attributes, less the hook registries that are
        empty (``__setstate__`` makes them anew), so that a pickled model names only its own
        classes (what ``md.load(..., weights_only=True)`` must be allowed)."""
        state = dict(self.__dict__)
        for name in _HOOK_REGISTRIES:
            if name in state and not state[name]:
                del state[name]
        return state

    def __setstate__(self, state):
        """Restore a pickled module; one pickled when registered names were also kept as plain
        attributes loses those copies, which would hide later changes to the registries."""
        registered = set()
        for registry in ("_parameters", "_buffers", "_modules"):
            registered.update(state.get(registry, ()))
        self.__dict__.update((k, v) for k, v in state.items() if k not in registered)
        for name in _HOOK_REGISTRIES:
            if name not in self.__dict__:
                object.__setattr__(self, name, _autograd_hooks.HookDict())
        if "_non_persistent_buffers_set" not in self.__dict__:
            object.__setattr__(self, "_non_persistent_buffers_set", set())

    # registration ----------------------------------------------------------------
    def __getattr__(self, name):
        """Registered parameters, buffers and children (called only when normal lookup fails)."""
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        """PyTorch's rules: a Parameter registers as a parameter, a Module as a child, a Buffer
        (or a Tensor assigned over a buffer) as a buffer keeping its persistence; a value over
        a registered name must be of its kind (see _check_assignment); anything else is a plain
        attribute. Plain attributes may be set before ``Module.__init__``; registered ones not."""
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, (Parameter, Module)) and params is None:
            kind = "parameters" if isinstance(value, Parameter) else "module"
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if params is None:
            object.__setattr__(self, name, value)
            return
        _check_assignment(self, name, value)
        if isinstance(value, Parameter):
            self._remove_name(name, keep=self._parameters)
            self.register_parameter(name, value)
        elif name in params:
            params[name] = None
        elif isinstance(value, Module):
            self._remove_name(name, keep=self._modules)
            self._modules[name] = value
        elif name in self._modules:
            self._modules[name] = None
        elif isinstance(value, Buffer) or name in self._buffers:
            persistent = value.persistent if isinstance(value, Buffer) else name not in self._non_persistent_buffers_set
            if isinstance(value, Buffer):
                self._remove_name(name, keep=self._buffers)
            self.register_buffer(name, value, persistent)
        else:
            object.__setattr__(self, name, value)

    def _remove_name(self, name, keep):
        """Forget ``name`` as a plain attribute and in every registry but ``keep``."""
        self.__dict__.pop(name, None)
        for registry in (self._parameters, self._buffers, self._modules):
            if registry is not keep:
                registry.pop(name, None)
        if keep is not self._buffers:
            self._non_persistent_buffers_set.discard(name)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def _check_name(self, name, kind, registry):
        """PyTorch's rules for a registered name: after Module.__init__, a non-empty str without
        ".", not already a plain attribute or another registry's name."""
        if registry not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in self.__dict__[registry]:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Register a Parameter, or None to declare an optional one (such as a disabled bias)."""
        self._check_name(name, "parameter", "_parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(nn.Parameter or None required)")
        self._parameters[name] = _module_hooks.registered("parameter", self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        """Register state that is moved by ``to`` but not trained; it is saved in state_dict
        unless ``persistent=False`` (registering the name again sets its persistence anew)."""
        self._check_name(name, "buffer", "_buffers")   # a "." would make state_dict's keys ambiguous
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(Tensor or None required)")
        if isinstance(tensor, Buffer):   # the marker class only says "register me"; keep a plain Tensor
            tensor = tensor._as_tensor()
        self._buffers[name] = _module_hooks.registered("buffer", self, name, tensor)
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Register a child module (or None, a declared but absent one) under ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module", "_modules")
        self._modules[name] = _module_hooks.registered("module", self, name, module)

    def register_module(self, name, module):
        """Alias for add_module."""
        self.add_module(name, module)

    def get_submodule(self, target):
        """The module at dotted path ``target`` ("" is this module), as PyTorch's."""
        mod = self
        for item in target.split(".") if target else ():
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def set_submodule(self, target, module, strict=False):
        """Put ``module`` at dotted path ``target``: its parent must exist; the last name may be
        new (unless ``strict``), or an existing attribute that is a Module."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

    def get_parameter(self, target):
        """The Parameter at dotted path ``target`` (AttributeError if it is not one)."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at dotted path ``target`` (AttributeError if it is not one)."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return getattr(mod, name)

    # traversal -------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module and every descendant, depth first; a module
        reachable along two paths comes once unless ``remove_duplicate=False``. ``memo`` (a
        set of modules to skip) collects the modules yielded. (Walked with a stack, not by
        recursion, so any depth of nesting works; the order is PyTorch's.)"""
        if memo is None:
            memo = set()
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            if m in memo:
                continue
            if remove_duplicate:
                memo.add(m)
            yield name, m
            children = [(name + ("." if name else "") + n, c) for n, c in m._modules.items() if c is not None]
            stack.extend(reversed(children))

    def modules(self, remove_duplicate=True):
        for _, m in self.named_modules(remove_duplicate=remove_duplicate):
            yield m

    def named_children(self):
        """(name, child) of the direct children; a child registered under two names comes once."""
        memo = set()
        for n, m in self._modules.items():
            if m is not None and m not in memo:
                memo.add(m)
                yield n, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, tensor) for ``get_members(module)`` of this module (and descendants);
        a tensor shared between names or modules comes once unless ``remove_duplicate=False``."""
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mname, m in mods:
            for n, v in get_members(m):
                if v is None or id(v) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield (f"{mname}.{n}" if mname else n), v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # modes -----------------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode here and (through each child's own ``train``, so an override in a
        child is honoured) in every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                _write(p.grad, 0)

    def share_memory(self):
        """A no-op returning self: NumPy arrays need no moving to shared memory for threads."""
        return self

    def apply(self, fn):
        """``fn(module)`` for every descendant (children first), then this module; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

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

    def _apply(self, fn, recurse=True):
        """PyTorch's internal hook for ``to``-like conversions: ``fn`` on every parameter and
        buffer (see _convert); only this module's own with ``recurse=False``."""
        if recurse:
            return self._convert(fn)
        for t in list(self._parameters.values()) + list(self._buffers.values()):
            if t is not None:
                t._data = fn(t.detach())._data
        return self

    def to_empty(self, *, device, recurse=True):
        """Parameters and buffers moved to ``device`` without their values (PyTorch leaves the
        new storage uninitialised, for a module built on the meta device; here it is zeros), for
        an initialisation or a state-dict load to fill."""
        from ...tensor.factories import zeros_like
        return self._apply(lambda t: zeros_like(t).to(device), recurse=recurse)

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(tensor)``, with PyTorch's
        ``non_blocking`` and ``memory_format`` (accepted; neither changes a value, see Tensor.to):
        floating parameters and buffers take the dtype; everything moves to the device."""
        from ...tensor.to_arguments import parse_to_args
        device, dtype, copy, _ = parse_to_args(args, kwargs)
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

    def type(self, dst_type):
        """Cast every parameter and buffer (floating or not, unlike ``to``) to ``dst_type``."""
        return self._convert(lambda t: t.to(dst_type))

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
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if not (d.get("_forward_pre_hooks") or d.get("_forward_hooks") or d.get("_backward_hooks")
                or d.get("_backward_pre_hooks") or _module_hooks.any_global_hooks()):
            return self.forward(*args, **kwargs)
        return _module_hooks.call(self, args, kwargs)

    # hooks (see hooks.py) ------------------------------------------------------------
    def _hooks(self, name):
        """The hook registry ``name`` (made here for a module built without Module.__init__)."""
        registry = self.__dict__.get(name)
        if registry is None:
            registry = _autograd_hooks.HookDict()
            object.__setattr__(self, name, registry)
        return registry

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` runs before forward; a non-None return replaces args (a
        non-tuple becomes a one-tuple). With ``with_kwargs``: ``hook(module, args, kwargs)``,
        returning None or ``(args, kwargs)``. ``prepend`` runs it before those registered."""
        return _module_hooks.register(self._hooks("_forward_pre_hooks"), hook, prepend,
                                      with_kwargs and self._hooks("_forward_pre_hooks_with_kwargs"))

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` runs after forward; a non-None return replaces output.
        With ``with_kwargs``: ``hook(module, args, kwargs, output)``. With ``always_call`` it
        also runs (output None) when forward raises. ``prepend`` runs it first."""
        return _module_hooks.register(self._hooks("_forward_hooks"), hook, prepend,
                                      with_kwargs and self._hooks("_forward_hooks_with_kwargs"),
                                      always_call and self._hooks("_forward_hooks_always_called"))

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` runs when the gradients with respect to the module's
        outputs are known, before those of its inputs; a non-None return replaces grad_output."""
        return _module_hooks.register(self._hooks("_backward_pre_hooks"), hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` runs once the gradients with respect to
        the module's tensor inputs are known; a non-None return replaces grad_input."""
        _module_hooks.set_full(self.__dict__, True)
        return _module_hooks.register(self._hooks("_backward_hooks"), hook, prepend)

    def register_backward_hook(self, hook):
        """Deprecated: ``hook(module, grad_input, grad_output)`` on the autograd node that made
        the output, so grad_input is that node's (see hooks.py); a module takes hooks of this
        kind or full ones, not both."""
        _module_hooks.set_full(self.__dict__, False)
        return _module_hooks.register(self._hooks("_backward_hooks"), hook)

    def compile(self, *args, **kwargs):
        """As PyTorch's (which compiles this module's calls in place): minidl has no graph
        compiler, so there is nothing to do."""

    # printing ----------------------------------------------------------------------
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        """As PyTorch's: ``Name(extra)`` on one line, or the extra_repr lines then one
        ``(name): child`` line per child, indented."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        if len(extra_lines) == 1 and not child_lines:
            return f"{self._get_name()}({extra_lines[0]})"
        lines = extra_lines + child_lines
        if not lines:
            return f"{self._get_name()}()"
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        """As PyTorch's: the class's and instance's attributes and every registered name,
        sorted, without names starting with a digit (a container's indices)."""
        keys = (dir(type(self)) + list(self.__dict__) + list(self._parameters) + list(self._modules)
                + list(self._buffers))
        return sorted(k for k in set(keys) if not k[:1].isdigit())

