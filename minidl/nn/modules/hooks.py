"""Module hooks, as in PyTorch: forward pre-hooks, forward hooks and full backward
(pre-)hooks, per module or global (for every module, run before the module's own).

- ``hook(module, args)`` before forward; a non-None return replaces the positional
  arguments (a tuple, or a single value that becomes a one-tuple). Registered
  ``with_kwargs``: ``hook(module, args, kwargs)`` returning None or ``(args, kwargs)``.
- ``hook(module, args, output)`` after forward (``hook(module, args, kwargs, output)``
  with ``with_kwargs``); a non-None return replaces the output. With ``always_call`` it
  runs even when forward raises.
- ``hook(module, grad_output)`` (backward pre-hook) when the gradients with respect to
  the module's outputs are known; a non-None return replaces grad_output.
- ``hook(module, grad_input, grad_output)`` when the gradients with respect to the
  module's tensor inputs have been computed; a non-None return (a tuple of one entry per
  input) replaces grad_input.

- ``hook(module, grad_input, grad_output)`` registered with the deprecated
  ``register_backward_hook``: a hook on the autograd node that made the (first tensor of
  the) output, so grad_input holds the gradients of that node's inputs, whatever the
  module's inputs were (PyTorch's behaviour, with its FutureWarning when the two differ).

The full backward hook needs two points in the backward pass: the gradient of the outputs
(available first) and that of the inputs (available after the module's own backward).
Both are found by routing the inputs and the outputs through identity Functions:

    inputs -> _HookedInputs -> forward -> _HookedOutputs -> outputs

A pre-hook on the ``_HookedOutputs`` node receives grad_output (d loss / d outputs) before
the engine fills the gradient of an output that took no part in the loss with zeros, so
such an entry is None, as in PyTorch; the backward pre-hooks run there.
``_HookedInputs.backward`` receives grad_input (d loss / d inputs), calls the hooks, and
passes on what they return. The identities have the derivative 1, so the gradients
themselves are untouched. An input that does not require grad comes out of
``_HookedInputs`` still not requiring it, and its grad_input entry is zeros, as PyTorch's;
when no input requires grad the hooks run from ``_HookedOutputs`` with grad_input of Nones.
"""
import functools
import warnings
import weakref

from ...autograd import grad_mode
from ...autograd import hooks as _autograd_hooks
from ...autograd.op_function import Function
from ...tensor.tensor import Tensor

# The hooks registered for every module (torch.nn.modules.module.register_module_*_hook):
# they run before each module's own. The "with_kwargs" / "always_called" registries hold
# the ids of the hooks registered with that flag.
GLOBAL = {name: _autograd_hooks.HookDict() for name in (
    "forward_pre", "forward", "forward_with_kwargs", "forward_always_called", "backward_pre", "backward",
    "buffer_registration", "module_registration", "parameter_registration")}
# Whether the global backward hooks are full ones (True), deprecated ones (False) or not yet
# known (None): PyTorch refuses to mix the two kinds, as for one module.
_global_is_full = [None]
_MIXED = "Cannot use both regular backward hooks and full backward hooks{}. Please use only one of them."


def any_global_hooks():
    g = GLOBAL
    return bool(g["forward_pre"] or g["forward"] or g["backward_pre"] or g["backward"])


def set_full(holder, full, where=" on a single Module"):
    """Note that ``holder`` (a module's __dict__, or the global flag) now has backward hooks of
    the kind ``full``; RuntimeError if it has the other kind (the flag stays, as PyTorch's)."""
    key = "_is_full_backward_hook"
    current = holder.get(key) if isinstance(holder, dict) else holder[0]
    if current is (not full):
        raise RuntimeError(_MIXED.format(where))
    if isinstance(holder, dict):
        holder[key] = full
    else:
        holder[0] = full


def registered(kind, module, name, value):
    """``value`` after the global registration hooks of ``kind`` ("buffer", "module",
    "parameter"): each ``hook(module, name, value)`` may return a replacement."""
    for hook in GLOBAL[kind + "_registration"].values():
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value


def register_module_forward_pre_hook(hook):
    """A forward pre-hook (see Module.register_forward_pre_hook) for every module; it runs
    before each module's own."""
    return register(GLOBAL["forward_pre"], hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """A forward hook (see Module.register_forward_hook) for every module; it runs before
    each module's own."""
    g = GLOBAL
    return register(g["forward"], hook, False, with_kwargs and g["forward_with_kwargs"],
                    always_call and g["forward_always_called"])


def register_module_full_backward_pre_hook(hook):
    """A full backward pre-hook (see Module.register_full_backward_pre_hook) for every module."""
    return register(GLOBAL["backward_pre"], hook)


def register_module_full_backward_hook(hook):
    """A full backward hook (see Module.register_full_backward_hook) for every module."""
    set_full(_global_is_full, True, " as a global Module hook")
    return register(GLOBAL["backward"], hook)


def register_module_backward_hook(hook):
    """A deprecated (non-full) backward hook (see Module.register_backward_hook) for every module."""
    set_full(_global_is_full, False, " as a global Module hook")
    return register(GLOBAL["backward"], hook)


def register_module_buffer_registration_hook(hook):
    """``hook(module, name, buffer)`` whenever a module registers a buffer; a non-None return
    is registered instead."""
    return register(GLOBAL["buffer_registration"], hook)


def register_module_module_registration_hook(hook):
    """``hook(module, name, submodule)`` whenever a module registers a child; a non-None return
    is registered instead."""
    return register(GLOBAL["module_registration"], hook)


def register_module_parameter_registration_hook(hook):
    """``hook(module, name, param)`` whenever a module registers a parameter; a non-None return
    is registered instead."""
    return register(GLOBAL["parameter_registration"], hook)


class _Handle(_autograd_hooks.RemovableHandle):
    """A module hook's handle: ``remove()`` also drops the hook's id from the flag registries
    (with_kwargs, always_call) it was entered in."""
    __slots__ = ("_extras",)

    def __init__(self, registry, extras):
        super().__init__(registry)
        self._extras = extras

    def remove(self):
        super().remove()
        for ref in self._extras:
            extra = ref()
            if extra is not None:
                extra.pop(self.id, None)


def register(registry, hook, prepend=False, *flags):
    """Register ``hook`` in ``registry`` (first with ``prepend``), entering its id in each
    flag registry given (falsy ones are skipped); return its handle."""
    if not callable(hook):
        raise TypeError(f"a hook must be callable, got {type(hook).__name__}")
    flags = [f for f in flags if f is not False and f is not None]
    handle = _Handle(registry, [weakref.ref(f) for f in flags])
    registry[handle.id] = hook
    for f in flags:
        f[handle.id] = True
    if prepend:
        registry.move_to_end(handle.id, last=False)
    return handle


def _registry(module, name):
    return module.__dict__.get(name) or {}


def call(module, args, kwargs):
    """Run ``module.forward`` with the global hooks and its own, as PyTorch's Module.__call__:
    forward pre-hooks, the backward hooks' wrapping of inputs, forward, forward hooks, the
    wrapping of outputs. When forward (or a hook) raises, the ``always_call`` forward hooks
    not yet run are run (their own errors only warned about) before the error goes on."""
    g = GLOBAL
    pre_kw = _registry(module, "_forward_pre_hooks_with_kwargs")
    for hook_id, hook in [*g["forward_pre"].items(), *_registry(module, "_forward_pre_hooks").items()]:
        if hook_id in pre_kw:
            out = hook(module, args, kwargs)
            if out is not None:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise RuntimeError(f"forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {out}.")
                args, kwargs = out
        else:
            out = hook(module, args)
            if out is not None:
                args = out if isinstance(out, tuple) else (out,)
    backward, non_full = [], []
    (backward if _global_is_full[0] else non_full).extend(g["backward"].values())
    own_full = module.__dict__.get("_is_full_backward_hook") is not False
    (backward if own_full else non_full).extend(_registry(module, "_backward_hooks").values())
    backward_pre = [*g["backward_pre"].values(), *_registry(module, "_backward_pre_hooks").values()]
    forward_hooks = [*g["forward"].items(), *_registry(module, "_forward_hooks").items()]
    with_kwargs = {**g["forward_with_kwargs"], **_registry(module, "_forward_hooks_with_kwargs")}
    always = {**g["forward_always_called"], **_registry(module, "_forward_hooks_always_called")}
    called, result = set(), None
    try:
        state = None
        if (backward or backward_pre) and grad_mode.is_grad_enabled():
            state = _BackwardState(module, backward, backward_pre)
            args = state.wrap_inputs(args)
        result = module.forward(*args, **kwargs)
        for hook_id, hook in forward_hooks:
            if hook_id in always:
                called.add(hook_id)
            out = hook(module, args, kwargs, result) if hook_id in with_kwargs else hook(module, args, result)
            if out is not None:
                result = out
        if state is not None:
            result = state.wrap_outputs(result)
        if non_full and grad_mode.is_grad_enabled():
            _hook_output_node(module, non_full, args, result)
        return result
    except Exception:
        for hook_id, hook in forward_hooks:
            if hook_id not in always or hook_id in called:
                continue
            try:
                out = hook(module, args, kwargs, result) if hook_id in with_kwargs else hook(module, args, result)
                if out is not None:
                    result = out
            except Exception as exc:
                warnings.warn("module forward hook with ``always_call=True`` raised an exception that was silenced "
                              f"as another error was raised in forward: {exc}", stacklevel=2)
        raise


def _hook_output_node(module, hooks, args, result):
    """The deprecated backward hooks: on the node that made the output's first tensor (the
    first value of a dict), as PyTorch's, with its FutureWarnings where that node's inputs are
    not the module's."""
    var = result
    while not isinstance(var, Tensor):
        var = next(v for v in var.values() if isinstance(v, Tensor)) if isinstance(var, dict) else var[0]
    grad_fn = var.grad_fn
    if grad_fn is None:
        return
    for hook in hooks:
        grad_fn.register_hook(functools.partial(hook, module))
    message = None
    outputs = (result,) if isinstance(result, Tensor) else result
    if not (isinstance(outputs, tuple) and all(isinstance(r, Tensor) for r in outputs)):
        message = "that does not return a single Tensor or a tuple of Tensors"
    elif not all(isinstance(a, Tensor) for a in args):
        message = "that does not take as input a single Tensor or a tuple of Tensors"
    else:
        out_nodes = {r.grad_fn for r in outputs if r.grad_fn is not None}
        if len(out_nodes) > 1:
            message = "when outputs are generated by different autograd Nodes"
        elif grad_fn not in out_nodes:
            message = "when outputs are nested in python data structure"
        elif {a.grad_fn for a in args if a.grad_fn is not None} != {n for n, _ in grad_fn.next_functions}:
            message = ("when the forward contains multiple autograd Nodes. This hook will be missing some "
                       "grad_input")
    if message is not None:
        warnings.warn(f"Using a non-full backward hook {message} is deprecated and will be removed in future "
                      "versions. Please use register_full_backward_hook to get the documented behavior.",
                      FutureWarning, stacklevel=4)


class _BackwardState:
    """What the two identity nodes of one call share: the hooks and grad_output."""

    def __init__(self, module, hooks, pre_hooks=()):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_output = None
        self.n_inputs = 0
        self.inputs_hooked = False

    def wrap_inputs(self, args):
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_inputs = len(positions)
        if not any(args[i].requires_grad for i in positions):
            return args
        self.inputs_hooked = True
        outs = _HookedInputs.apply(self, *[args[i] for i in positions])
        outs = outs if isinstance(outs, tuple) else (outs,)
        args = list(args)
        for i, t in zip(positions, outs):
            args[i] = t
        return tuple(args)

    def wrap_outputs(self, result):
        if isinstance(result, Tensor):
            if not result.requires_grad:
                return result
            out = _HookedOutputs.apply(self, result)
            out._node.register_prehook(self.on_grad_output)
            return out
        if isinstance(result, tuple) and any(isinstance(r, Tensor) and r.requires_grad for r in result):
            positions = [i for i, r in enumerate(result) if isinstance(r, Tensor)]
            outs = _HookedOutputs.apply(self, *[result[i] for i in positions])
            outs = outs if isinstance(outs, tuple) else (outs,)
            next(t for t in outs if t._node is not None)._node.register_prehook(self.on_grad_output)
            result = list(result)
            for i, t in zip(positions, outs):
                result[i] = t
            return tuple(result)
        return result

    def on_grad_output(self, grad_output):
        """The ``_HookedOutputs`` node's pre-hook: grad_output (None for an output that took no
        part), through the backward pre-hooks; returns their replacement, if any."""
        current = tuple(grad_output)
        changed = False
        for hook in self.pre_hooks:
            out = hook(self.module, current)
            if out is None:
                continue
            changed = True
            out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out) != len(current):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got {len(out)}, "
                                   f"but expected {len(current)}")
            current = out
        self.grad_output = current
        return current if changed else None

    def run_hooks(self, grad_input):
        """Call each hook with Tensors (None where no gradient); return the arrays to pass on.
        The hooks see copies: the engine may later accumulate into the arrays it is given (a
        leaf's .grad), which must not change what a hook kept. No hook runs when no gradient
        came through the outputs (they were not tensors), as in PyTorch."""
        if not self.hooks or self.grad_output is None:
            return grad_input
        given = tuple(None if g is None else Tensor._wrap(g.copy(), None, 0) for g in grad_input)
        current = given
        grad_output = self.grad_output
        for hook in self.hooks:
            out = hook(self.module, current, grad_output)
            if out is None:
                continue
            out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out) != len(current):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(out)}, but "
                                   f"expected {len(current)}")
            for g, new in zip(current, out):
                if new is not None and g is not None and tuple(new.shape) != tuple(g.shape):
                    raise RuntimeError(f"backward hook {getattr(hook, '__name__', hook)!r} returned a gradient of "
                                       f"shape {list(new.shape)} for an input gradient of shape {list(g.shape)}")
            current = out
        return tuple(array if g is copy else None if g is None else g._data
                     for array, copy, g in zip(grad_input, given, current))


def _pass_through(ctx, arrays, needs):
    """The identity's outputs: those whose tensor needs no gradient as views marked
    non-differentiable (views, so that marking one cannot touch another over the same array;
    made by a same-shape reshape, which NumPy and the device arrays both answer with a view)."""
    outs = tuple(x if n else x.reshape(x.shape) for x, n in zip(arrays, needs))
    ctx.mark_non_differentiable(*[o for o, n in zip(outs, needs) if not n])
    return outs if len(outs) > 1 else outs[0]


class _HookedOutputs(Function):
    """Identity on the module's outputs; the pre-hook on its node sees grad_output first. Its
    outputs are its inputs' memory: an in-place write into one would bypass the hooks, so it is
    refused (tensor/inplace.py reads ``returns_input_view``)."""

    returns_input_view = "BackwardHookFunction"

    @staticmethod
    def forward(ctx, state, *outputs):
        ctx.state = state
        return _pass_through(ctx, outputs, ctx.needs_input_grad[1:])

    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        if not state.inputs_hooked:
            state.run_hooks((None,) * state.n_inputs)
        return (None, *grads)


class _HookedInputs(Function):
    """Identity on the module's tensor inputs; its backward holds grad_input and runs the hooks.
    An input that needs no gradient still needs none after it; its gradient arrives as zeros.
    Like ``_HookedOutputs``, its outputs may not be written in place."""

    returns_input_view = "BackwardHookFunction"

    @staticmethod
    def forward(ctx, state, *inputs):
        ctx.state = state
        return _pass_through(ctx, inputs, ctx.needs_input_grad[1:])

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.state.run_hooks(grads))
