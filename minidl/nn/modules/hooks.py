"""Module hooks, as in PyTorch: forward pre-hooks, forward hooks and full backward hooks.

- ``hook(module, args)`` before forward; a non-None return replaces the positional
  arguments (a tuple, or a single value that becomes a one-tuple).
- ``hook(module, args, output)`` after forward; a non-None return replaces the output.
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
from ...autograd import grad_mode
from ...autograd.function import Function
from ...tensor.tensor import Tensor


def call(module, args, kwargs, pre, post, backward):
    """Run ``module.forward`` with its hooks (each a HookDict, possibly empty)."""
    for hook in list(pre.values()):
        out = hook(module, args)
        if out is not None:
            args = out if isinstance(out, tuple) else (out,)
    state = None
    if backward and grad_mode.is_grad_enabled():
        state = _BackwardState(module, backward)
        args = state.wrap_inputs(args)
    result = module.forward(*args, **kwargs)
    for hook in list(post.values()):
        out = hook(module, args, result)
        if out is not None:
            result = out
    if state is not None:
        result = state.wrap_outputs(result)
    return result


class _BackwardState:
    """What the two identity nodes of one call share: the hooks and grad_output."""

    def __init__(self, module, hooks):
        self.module, self.hooks = module, hooks
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

    def run_hooks(self, grad_input):
        """Call each hook with Tensors (None where no gradient); return the arrays to pass on."""
        wrap = [None if g is None else Tensor._wrap(g, None, 0) for g in grad_input]
        grad_output = tuple(None if g is None else Tensor._wrap(g, None, 0) for g in (self.grad_output or ()))
        current = tuple(wrap)
        for hook in list(self.hooks.values()):
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
