"""Activation checkpointing, as ``torch.utils.checkpoint``: trade compute for memory.

``y = checkpoint(f, x)`` returns what ``f(x)`` returns, but the graph node standing for ``f``
keeps only its inputs, not the activations inside ``f``. When the backward pass reaches the
node it runs ``f`` again on the saved inputs with grad enabled (after restoring the random
number generator, so a dropout inside draws the same mask, and the autocast state of the
forward), and backpropagates the incoming gradients through that recomputed graph:

    dL/dx_i = J_i(x)^T dL/dy,   dL/dw = J_w(x)^T dL/dy

for every input ``x_i`` and every tensor ``w`` that ``f`` reads without taking it as an
argument (a module's parameters, a closure's tensors).

How those ``w`` enter the graph. minidl's nodes send gradients only along the edges recorded
when they were built, so the checkpoint node must have an edge to every ``w``. The forward
therefore runs ``f`` once with grad enabled on detached copies of the inputs, walks the graph
it just built from the outputs, and collects the leaf tensors that require grad other than
those copies: they become extra inputs of the node. That graph is then dropped; its
activations live only while ``f`` runs, which is also the peak of the recomputation, so
checkpointing a segment still bounds memory by one segment's activations. The backward
computes the gradients of the inputs and of the ``w`` with ``autograd.grad`` over the
recomputed graph and returns them; the engine delivers them like any other node's, so
``autograd.grad``, tensor hooks and post-accumulate-grad hooks all see them, and a function
of parameters only (input data that does not require grad) still trains its parameters. As
in PyTorch's non-reentrant variant, ``torch.is_grad_enabled()`` is True inside ``f``.

A tensor that ``f`` reads from outside and that itself has a history (a non-leaf) is
reached through that history: the collected leaves are the ones upstream of it, and the
recomputed backward runs through that history with ``retain_graph`` so the rest of the
graph can still use it (the recomputed graph itself is dropped when the node's backward
returns, so retaining costs no memory beyond it).

``use_reentrant``: PyTorch has two implementations that differ in which corner cases they
support (keyword arguments, ``autograd.grad``, inputs that do not require grad). minidl has
one, the node above, which gives the same values for either setting; ``use_reentrant=True``
keeps PyTorch's refusal of keyword arguments so a script behaves the same on both.

As in PyTorch, ``f`` runs twice per step, so side effects (BatchNorm's running statistics)
happen twice.
"""
import contextlib
import warnings

from .. import random as _random
from ..autograd import engine, op_function as _op_function, grad_mode
from ..autograd.op_function import Function
from ..autograd.graph import leaves_reached

__all__ = ["checkpoint", "checkpoint_sequential"]


def _noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Run:
    """What the recomputation needs: the function, the layout of its arguments and outputs,
    and the state (RNG, autocast, context) under which the forward ran."""
    __slots__ = ("function", "args", "kwargs", "n_inputs", "rng_state", "autocast", "recompute_context",
                 "out_arrays", "out_meta", "determinism_check")


def _autocast_state():
    from ..autograd.autocast_state import state
    return {d: state.dtype[d] for d, on in state.enabled.items() if on}


def _autocast_contexts(saved):
    stack = contextlib.ExitStack()
    if saved:
        from ..amp.autocast_mode import autocast
        for device, dtype in saved.items():
            stack.enter_context(autocast(device, dtype=dtype))
    return stack


def _tensors_of(out):
    """The Tensors of a function's result: itself, or the Tensor elements of a tuple or list."""
    Tensor = _op_function.Tensor
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [o for o in out if isinstance(o, Tensor)]
    return []


class _Checkpoint(Function):
    """The node for one checkpointed call: inputs (run, *tensor arguments, *tensors read from
    outside); outputs: the function's Tensor outputs that require grad."""

    @staticmethod
    def forward(ctx, run, *arrays):
        ctx.run = run
        ctx.save_for_backward(*arrays[:run.n_inputs])   # so an in-place write to an input is caught
        outs = run.out_arrays
        run.out_arrays = None
        return outs[0] if len(outs) == 1 else tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        run = ctx.run
        needs = ctx.needs_input_grad[1:]
        inputs = [t.detach().requires_grad_(n) for t, n in zip(ctx.inputs[1:1 + run.n_inputs], needs)]
        outside = list(ctx.inputs[1 + run.n_inputs:])
        args = list(run.args)
        it = iter(inputs)
        for i, a in enumerate(args):
            if isinstance(a, _op_function.Tensor):
                args[i] = next(it)
        with grad_mode.enable_grad(), _rng_forked(run.rng_state), _autocast_contexts(run.autocast), \
                run.recompute_context:
            out = run.function(*args, **run.kwargs)
        tensors = [t for t in _tensors_of(out) if t.requires_grad]
        _check_recomputed(run, tensors)
        pairs = [(t, g) for t, g in zip(tensors, grads) if g is not None]
        targets = [t for t, n in zip(inputs + outside, needs) if n]
        if not pairs or not targets:
            return (None,) * (1 + len(needs))
        got = engine.run([t for t, _ in pairs], [g for _, g in pairs], retain_graph=True,
                         targets=targets)
        got = iter(got)
        return (None,) + tuple(_data(next(got)) if n else None for n in needs)


def _data(g):
    return None if g is None else g._data


@contextlib.contextmanager
def _rng_forked(state):
    """Run with the global generator at ``state`` (when not None) and leave it as it was, so
    recomputing does not move the random stream of the rest of the program."""
    if state is None:
        yield
        return
    now = _random.get_rng_state()
    _random.set_rng_state(state)
    try:
        yield
    finally:
        _random.set_rng_state(now)


def _check_recomputed(run, tensors):
    if run.determinism_check == "none":
        return
    meta = [(tuple(t.shape), t.dtype) for t in tensors]
    if meta != run.out_meta:
        raise RuntimeError("torch.utils.checkpoint: recomputed outputs differ from the forward's: expected "
                           f"(shape, dtype) {run.out_meta}, got {meta}. The checkpointed function must compute "
                           "the same thing when run again on the same inputs (pass determinism_check='none' "
                           "to skip this check)")


def checkpoint(function, *args, use_reentrant=None, context_fn=_noop_context_fn, determinism_check="default",
               debug=False, **kwargs):
    """``function(*args, **kwargs)``, keeping only the inputs for backward and recomputing the
    rest then (see the module docstring). ``preserve_rng_state=True`` (a keyword, as in
    PyTorch) restores the random generator before recomputing; ``context_fn()`` returns two
    context managers, entered around the forward and around the recomputation."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly "
                      "(use_reentrant=False is recommended); in minidl both values give the same results",
                      stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check!r}")
    if not callable(function):
        raise TypeError(f"checkpoint: expected a callable function, got {type(function).__name__}")
    if not grad_mode.is_grad_enabled():
        return function(*args, **kwargs)      # nothing will be differentiated: nothing to save

    Tensor = _op_function.Tensor
    tensor_args = [a for a in args if isinstance(a, Tensor)]
    run = _Run()
    run.function, run.kwargs, run.n_inputs = function, kwargs, len(tensor_args)
    run.determinism_check = determinism_check
    run.rng_state = _random.get_rng_state() if preserve else None
    run.autocast = _autocast_state()
    forward_context, run.recompute_context = context_fn()
    detached = {id(a): a.detach().requires_grad_(a.requires_grad) for a in tensor_args}
    run.args = tuple(args)
    with forward_context:
        out = function(*[detached.get(id(a), a) if isinstance(a, Tensor) else a for a in args], **kwargs)
    graphed = [t for t in _tensors_of(out) if t.requires_grad]
    if not graphed:
        return out
    copies = {id(t) for t in detached.values()}
    outside = [t for t in leaves_reached(graphed) if id(t) not in copies]
    run.out_arrays = [t._data for t in graphed]
    run.out_meta = [(tuple(t.shape), t.dtype) for t in graphed]
    res = _Checkpoint.apply(run, *tensor_args, *outside)
    new = iter(res if isinstance(res, tuple) else (res,))
    if isinstance(out, Tensor):
        return next(new)
    items = [next(new) if isinstance(o, Tensor) and o.requires_grad else o for o in out]
    return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a list of callables or an ``nn.Sequential``) in order on ``input``,
    checkpointing ``segments - 1`` equal segments and running the last one normally (its
    activations are needed at once by the backward), as PyTorch's."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be "
                      "passed explicitly (use_reentrant=False is recommended); in minidl both values give "
                      "the same results", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn.modules.container import Sequential
    if isinstance(functions, Sequential):
        functions = list(functions.children())
    functions = list(functions)
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")

    def run_function(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run_function(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1)(input)
