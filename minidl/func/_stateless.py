"""Modules as functions of their tensors: ``functional_call`` (a module called with other
parameters and buffers) and ``stack_module_state`` (the tensors of several modules of one kind
stacked, to vmap over them as an ensemble), as ``torch.func``."""
from collections.abc import Sequence

__all__ = ["functional_call", "stack_module_state"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with the given tensors in place of its parameters and buffers
    (see minidl.nn.utils.stateless). ``parameter_and_buffer_dicts`` is a dict name -> tensor, or
    a list/tuple of such dicts with distinct keys (ValueError for a key in two of them)."""
    from ..nn.utils.stateless import _functional_call   # minidl.nn loads on first use, not on import
    if isinstance(parameter_and_buffer_dicts, dict):
        parameters_and_buffers = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
        parameters_and_buffers = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    return _functional_call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict)


def stack_module_state(models):
    """``(params, buffers)``: two dicts, state-dict name -> the tensors of that name in every
    model of ``models`` stacked along a new leading dimension, ready for
    ``vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)), in_dims=(0, 0, None))``.

    A stacked parameter is a new leaf (it shares no graph with the models' parameters) that
    requires grad when the originals do, so an optimizer can train the stack directly. The
    models must be of one class and all in training or all in eval mode (RuntimeError)."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    first_type = type(models[0])
    if not all(type(m) is first_type for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    params = {k: _stacked_leaf(tuple(p[k] for p in all_params), k) for k in all_params[0]}
    all_buffers = [dict(m.named_buffers()) for m in models]
    buffers = {k: _stacked_leaf(tuple(b[k] for b in all_buffers), k) for k in all_buffers[0]}
    return params, buffers


def _stacked_leaf(tensors, name):
    from ..ops import stack
    needs = [t.requires_grad for t in tensors]
    if any(needs) and not all(needs):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack(tensors)
    if all(needs):
        result = result.detach().requires_grad_()
    return result
