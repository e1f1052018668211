"""The public entry points of the backward pass: ``backward`` (what ``Tensor.backward``
calls) and ``grad``, with PyTorch's signatures. Both check the roots and their seed
gradients here and leave the graph walk to the engine.

Seed gradients live on each root's own device: an implicit seed is ``ones`` from the
root's array namespace, and a given one (a Tensor, an array or a number) is moved there.
"""
import numpy as np

from .. import backends
from . import engine, function

_NO_HIGHER_ORDER = ("create_graph=True (gradients of gradients) is not supported: backward formulas run on "
                    "arrays and record no graph")


def _as_list(tensors, what):
    Tensor = function.Tensor
    items = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}[{i}] must be a Tensor, got {type(t).__name__}")
    return items


def _seeds(roots, grad_tensors, what):
    """One seed array per root, of the root's shape, dtype and device."""
    Tensor = function.Tensor
    if grad_tensors is None:
        grad_tensors = [None] * len(roots)
    elif isinstance(grad_tensors, Tensor) or not isinstance(grad_tensors, (list, tuple)):
        grad_tensors = [grad_tensors]
    if len(grad_tensors) != len(roots):
        raise RuntimeError(f"{what}: got {len(grad_tensors)} gradients for {len(roots)} tensors")
    seeds = []
    for i, (t, g) in enumerate(zip(roots, grad_tensors)):
        data = t._data
        if g is None:
            if data.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs, but output {i} "
                                   f"has shape {tuple(t.shape)}; pass a gradient of that shape")
            xp = np if type(data) is np.ndarray else backends.get(t.device).xp
            seeds.append(xp.ones(data.shape, dtype=data.dtype))
            continue
        a = g._data if isinstance(g, Tensor) else g
        if not hasattr(a, "shape") or isinstance(a, np.generic):
            a = np.asarray(a, dtype=data.dtype)
        if tuple(a.shape) != tuple(data.shape):
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}]: the gradient has shape {tuple(a.shape)} but "
                               f"the tensor has shape {tuple(data.shape)}")
        if backends.device_of(a) != t.device:
            a = backends.get(t.device).from_host(backends.get(backends.device_of(a)).to_host(a))
        if a.dtype != data.dtype:
            a = a.astype(data.dtype)
        seeds.append(a)
    return seeds


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of ``tensors`` (weighted by ``grad_tensors``, which may be
    omitted for one-element tensors) into the ``.grad`` of the leaves, or only of
    ``inputs`` when given."""
    if create_graph:
        raise NotImplementedError(_NO_HIGHER_ORDER)
    roots = _as_list(tensors, "tensors")
    for i, t in enumerate(roots):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    seeds = _seeds(roots, grad_tensors, "backward")
    if inputs is None:
        engine.run(roots, seeds, bool(retain_graph))
        return
    inputs = _as_list(inputs, "inputs")
    grads = engine.run(roots, seeds, bool(retain_graph), targets=inputs)
    for t, g in zip(inputs, grads):
        if g is not None:
            engine._accumulate(t, g._data, set())


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to each of ``inputs``, as a tuple of
    Tensors; nothing is accumulated into any ``.grad``. An input that the outputs do not
    depend on is an error unless ``allow_unused`` (then its gradient is None, or zeros
    with ``materialize_grads``)."""
    if create_graph:
        raise NotImplementedError(_NO_HIGHER_ORDER)
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported")
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    roots = _as_list(outputs, "outputs")
    inputs_list = _as_list(inputs, "inputs")
    for i, t in enumerate(roots):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    for i, t in enumerate(inputs_list):
        if not t.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors does not require grad (inputs[{i}])")
    seeds = _seeds(roots, grad_outputs, "grad")
    grads = engine.run(roots, seeds, bool(retain_graph), targets=inputs_list)
    out = []
    for i, (t, g) in enumerate(zip(inputs_list, grads)):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   f"Set allow_unused=True if this is the desired behavior. (inputs[{i}])")
            if materialize_grads:
                g = function.Tensor._wrap(backends.namespace_of(t._data).zeros(t.shape, dtype=t.dtype), None, 0)
        out.append(g)
    return tuple(out)
