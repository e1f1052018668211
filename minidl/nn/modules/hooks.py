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

The backward hook needs two points in the backward pass: the gradient of the outputs
(available first) and that of the inputs (available after the module's own backward).
Both are found by routing the inputs and the outputs through identity Functions:

    inputs -> _HookedInputs -> forward -> _HookedOutputs -> outputs

``_HookedOutputs.backward`` receives grad_output (d loss / d outputs) and passes it on
unchanged; ``_HookedInputs.backward`` receives grad_input (d loss / d inputs), calls the
hooks, and passes on what they return. The identities have the derivative 1, so the
gradients themselves are untouched. When no input requires grad the hooks run from
``_HookedOutputs`` with grad_input of Nones, as PyTorch does.
"""
import warnings
import weakref

from ...autograd import grad_mode
from ...autograd import hooks as _autograd_hooks
from ...autograd.function import Function
from ...tensor.tensor import Tensor

# The hooks registered for every module (torch.nn.modules.module.register_module_*_hook):
# they run before each module's own. The "with_kwargs" / "always_called" registries hold
# the ids of the hooks registered with that flag.
GLOBAL = {name: _autograd_hooks.HookDict() for name in (
    "forward_pre", "forward", "forward_with_kwargs", "forward_always_called", "backward_pre", "backward")}


def any_global_hooks():
    g = GLOBAL
    return bool(g["forward_pre"] or g["forward"] or g["backward_pre"] or g["backward"])


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
    backward = [*g["backward"].values(), *_registry(module, "_backward_hooks").values()]
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
            return _HookedOutputs.apply(self, result) if result.requires_grad else result
        if isinstance(result, tuple) and any(isinstance(r, Tensor) and r.requires_grad for r in result):
            positions = [i for i, r in enumerate(result) if isinstance(r, Tensor)]
            outs = _HookedOutputs.apply(self, *[result[i] for i in positions])
            outs = outs if isinstance(outs, tuple) else (outs,)
            result = list(result)
            for i, t in zip(positions, outs):
                result[i] = t
            return tuple(result)
        return result

    def run_pre_hooks(self, grad_output):
        """Call each backward pre-hook with grad_output as Tensors; return the arrays to pass on."""
        current = tuple(None if g is None else Tensor._wrap(g, None, 0) for g in grad_output)
        for hook in self.pre_hooks:
            out = hook(self.module, current)
            if out is None:
                continue
            out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out) != len(current):
                raise RuntimeError(f"backward pre hook {getattr(hook, '__name__', hook)!r} returned {len(out)} "
                                   f"gradients, expected {len(current)} (one per tensor output of the module)")
            current = out
        return tuple(None if g is None else g._data for g in current)

    def run_hooks(self, grad_input):
        """Call each hook with Tensors (None where no gradient); return the arrays to pass on."""
        wrap = [None if g is None else Tensor._wrap(g, None, 0) for g in grad_input]
        grad_output = tuple(None if g is None else Tensor._wrap(g, None, 0) for g in (self.grad_output or ()))
        current = tuple(wrap)
        for hook in self.hooks:
            out = hook(self.module, current, grad_output)
            if out is None:
                continue
            out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            if len(out) != len(current):
                raise RuntimeError(f"backward hook {getattr(hook, '__name__', hook)!r} returned {len(out)} "
                                   f"gradients, expected {len(current)} (one per tensor input of the module)")
            for g, new in zip(current, out):
                if new is not None and g is not None and tuple(new.shape) != tuple(g.shape):
                    raise RuntimeError(f"backward hook {getattr(hook, '__name__', hook)!r} returned a gradient of "
                                       f"shape {list(new.shape)} for an input gradient of shape {list(g.shape)}")
            current = out
        return tuple(None if g is None else g._data for g in current)


class _HookedOutputs(Function):
    """Identity on the module's outputs; its backward sees grad_output first."""

    @staticmethod
    def forward(ctx, state, *outputs):
        ctx.state = state
        return outputs if len(outputs) > 1 else outputs[0]

    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        if state.pre_hooks:
            grads = state.run_pre_hooks(grads)
        state.grad_output = grads
        if not state.inputs_hooked:
            state.run_hooks((None,) * state.n_inputs)
        return (None, *grads)


class _HookedInputs(Function):
    """Identity on the module's tensor inputs; its backward holds grad_input and runs the hooks."""

    @staticmethod
    def forward(ctx, state, *inputs):
        ctx.state = state
        return inputs if len(inputs) > 1 else inputs[0]

    @staticmethod
    def backward(ctx, *grads):
        needs = ctx.needs_input_grad[1:]
        grads = tuple(g if n else None for g, n in zip(grads, needs))
        return (None, *ctx.state.run_hooks(grads))
