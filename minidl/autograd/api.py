"""The public entry points of the backward pass: ``backward`` (what ``Tensor.backward``
calls) and ``grad``, with PyTorch's signatures. Both check the roots and their seed
gradients here and leave the graph walk to the engine.

``grad``'s inputs may also be GradientEdges (graph.get_gradient_edge): the gradient flowing
into that output of that node, as in PyTorch.

Seed gradients live on each root's own device: an implicit seed is ``ones`` from the
root's array namespace, and a given one (a Tensor, an array or a number) is moved there.

``create_graph=True`` runs the pass that records the graph of the gradients themselves
(higher_order.py), so that they can be differentiated again; ``retain_graph`` then defaults to
True, as in PyTorch, and a seed Tensor that requires grad is part of that graph.
"""
import warnings
from collections.abc import Mapping

import numpy as np

from .. import backends
from . import engine, op_function, higher_order


def _as_list(tensors, what, edges=False):
    """A list of Tensors (with ``edges``, GradientEdges stand for the tensors they belong to)."""
    Tensor = op_function.Tensor
    items = list(tensors) if isinstance(tensors, (list, tuple)) and not _is_edge(tensors) else [tensors]
    for i, t in enumerate(items):
        if edges and _is_edge(t):
            items[i] = _edge_target(t)
        elif not isinstance(t, Tensor):
            raise TypeError(f"{what}[{i}] must be a Tensor{' or a GradientEdge' if edges else ''}, "
                            f"got {type(t).__name__}")
    return items


def _is_edge(x):
    from .graph import GradientEdge
    return isinstance(x, GradientEdge)


def _edge_target(edge):
    """The tensor whose gradient a GradientEdge names: a leaf's own, or a stand-in carrying the
    edge's node and output (the graph is keyed by those; its values are never read)."""
    from .node import AccumulateGrad
    if isinstance(edge.node, AccumulateGrad):
        return edge.node.variable
    meta = edge.node.__dict__.get("output_meta")
    shape, dtype = meta[edge.output_nr] if meta else ((0,), np.dtype(np.float32))
    stand_in = op_function.Tensor._wrap(np.empty(shape, getattr(dtype, "dtype", dtype)), edge.node, edge.output_nr)
    stand_in._requires_grad = True
    return stand_in


def _seeds(roots, grad_tensors, what):
    """One seed array per root, of the root's shape, dtype and device."""
    Tensor = op_function.Tensor
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


def _seed_tensors(roots, grad_tensors, what):
    """The seeds of a create_graph pass, as Tensors: a given Tensor is kept (moved and cast
    differentiably where needed), so that the gradients are functions of it too."""
    Tensor = op_function.Tensor
    arrays = _seeds(roots, grad_tensors, what)
    given = grad_tensors if isinstance(grad_tensors, (list, tuple)) else [grad_tensors] * len(roots)
    out = []
    for t, g, a in zip(roots, given, arrays):
        if isinstance(g, Tensor):
            if g.device != t.device:
                g = g.to(t.device)
            out.append(g if g.dtype == t.dtype else g.to(t.dtype))
        else:      # a copy: the recorded graph keeps its seed, and the caller may reuse the array
            out.append(Tensor._wrap(a.copy() if a is g else a, None, 0))
    return out


def _inputs_tuple(inputs, what):
    """``inputs`` as a list (a dict's values, as PyTorch takes them); an empty one is an error."""
    if isinstance(inputs, Mapping):
        if type(inputs) is not dict:
            raise TypeError(f"`inputs` argument to `{what}()` must be a dict, not {type(inputs).__name__}. "
                            "Other Mapping types are not supported.")
        inputs = list(inputs.values())
    items = _as_list(inputs, "inputs", edges=what == "grad")
    if not items:
        raise RuntimeError(f"`inputs` argument to `{what}()` cannot be empty.")
    return items


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Accumulate the gradients of ``tensors`` (weighted by ``grad_tensors``, which may be
    omitted for one-element tensors) into the ``.grad`` of the leaves, or only of
    ``inputs`` when given (a Tensor, a sequence or a dict of them; each must require grad).
    With ``create_graph`` each ``.grad`` is a Tensor that carries the graph of its computation
    (see higher_order.py). ``grad_variables`` is PyTorch's deprecated name of ``grad_tensors``."""
    if grad_variables is not None:
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                               "`backward()`. Please only use `grad_tensors`.")
        grad_tensors = grad_variables
    roots = _as_list(tensors, "tensors")
    for i, t in enumerate(roots):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    if inputs is not None:
        inputs = _inputs_tuple(inputs, "backward")
        for i, t in enumerate(inputs):
            if not t.requires_grad:
                raise RuntimeError(f"backward(inputs=...): inputs[{i}] does not require grad, so no gradient "
                                   "can be accumulated into it")
    if create_graph:
        _backward_create_graph(roots, grad_tensors, create_graph if retain_graph is None else retain_graph, inputs)
        return
    seeds = _seeds(roots, grad_tensors, "backward")
    if inputs is None:
        engine.run(roots, seeds, bool(retain_graph))
        return
    grads = engine.run(roots, seeds, bool(retain_graph), targets=inputs)
    for t, g in zip(inputs, grads):
        if g is not None:
            engine._accumulate(t, g._data, set())


def _backward_create_graph(roots, grad_tensors, retain_graph, inputs):
    seeds = _seed_tensors(roots, grad_tensors, "backward")
    if inputs is None:
        higher_order.run(roots, seeds, bool(retain_graph))
        return
    for t, g in zip(inputs, higher_order.run(roots, seeds, bool(retain_graph), targets=inputs)):
        if g is not None:
            higher_order._accumulate(t, g)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to each of ``inputs``, as a tuple of
    Tensors (a dict with the same keys when ``inputs`` is a dict); nothing is accumulated into
    any ``.grad``. An input that the outputs do not depend on is an error unless ``allow_unused``
    (then its gradient is None, or zeros with ``materialize_grads``). With ``create_graph`` the
    gradients carry the graph of their computation and can be differentiated again (see
    higher_order.py). With ``is_grads_batched`` the first dimension of each grad_output is a
    batch: the result stacks, along a new first dimension, one vector-Jacobian product per batch
    element (PyTorch vmaps the pass; here it runs once per element over the retained graph).
    ``only_inputs`` is PyTorch's deprecated flag, ignored."""
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use torch.autograd.backward.",
                      FutureWarning, stacklevel=2)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    roots = _as_list(outputs, "outputs")
    inputs_list = _inputs_tuple(inputs, "grad")
    for i, t in enumerate(roots):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    for i, t in enumerate(inputs_list):
        if not t.requires_grad:
            raise RuntimeError(f"One of the differentiated Tensors does not require grad (inputs[{i}])")
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        grads = _batched(roots, inputs_list, grad_outputs, bool(retain_graph), create_graph)
    else:
        grads = _run(roots, inputs_list, grad_outputs, bool(retain_graph), create_graph)
    out = []
    for i, (t, g) in enumerate(zip(inputs_list, grads)):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   f"Set allow_unused=True if this is the desired behavior. (inputs[{i}])")
            if materialize_grads:
                g = op_function.Tensor._wrap(backends.namespace_of(t._data).zeros(t.shape, dtype=t.dtype), None, 0)
        out.append(g)
    if type(inputs) is dict:
        return dict(zip(inputs.keys(), out))
    return tuple(out)


def _run(roots, inputs, grad_outputs, retain_graph, create_graph):
    """One pass: the gradient of each of ``inputs`` (a Tensor, or None where none arrived)."""
    if create_graph:
        return higher_order.run(roots, _seed_tensors(roots, grad_outputs, "grad"), retain_graph, targets=inputs)
    return engine.run(roots, _seeds(roots, grad_outputs, "grad"), retain_graph, targets=inputs)


def _batched(roots, inputs, grad_outputs, retain_graph, create_graph):
    """``grad(..., is_grads_batched=True)``: one pass per batch element of the grad_outputs, the
    graph kept for all but the last; each input's gradients stacked (None where none arrived)."""
    Tensor = op_function.Tensor
    given = [grad_outputs] if isinstance(grad_outputs, Tensor) or grad_outputs is None else list(grad_outputs)
    if len(given) != len(roots):
        raise RuntimeError(f"grad: got {len(given)} gradients for {len(roots)} tensors")
    batch = None
    for i, (t, g) in enumerate(zip(roots, given)):
        if not isinstance(g, Tensor):
            raise RuntimeError(f"If `is_grads_batched=True`, each grad_output must be a Tensor whose first dimension "
                               f"is the batch dimension; grad_output[{i}] is {type(g).__name__}")
        if g.ndim == 0 or tuple(g.shape[1:]) != tuple(t.shape):
            raise RuntimeError("If `is_grads_batched=True`, we interpret the first dimension of each grad_output as "
                               "the batch dimension. The sizes of the remaining dimensions are expected to match the "
                               f"shape of corresponding output, but a mismatch was detected: grad_output[{i}] has a "
                               f"shape of {list(g.shape[1:])} and output[{i}] has a shape of {list(t.shape)}.")
        if batch is not None and g.shape[0] != batch:
            raise ValueError(f"is_grads_batched=True: expected all grad_outputs to have the same batch size, "
                             f"got sizes {[int(x.shape[0]) for x in given]}")
        batch = g.shape[0]
    if batch == 0:
        raise RuntimeError("is_grads_batched=True: the grad_outputs have an empty batch dimension")
    per_input = [[] for _ in inputs]
    for b in range(batch):
        keep = retain_graph or b < batch - 1
        for slot, g in zip(per_input, _run(roots, inputs, [g[b] for g in given], keep, create_graph)):
            slot.append(g)
    from .. import ops
    out = []
    for t, gs in zip(inputs, per_input):
        if all(g is None for g in gs):
            out.append(None)
            continue
        zeros = backends.namespace_of(t._data).zeros
        gs = [op_function.Tensor._wrap(zeros(t.shape, dtype=t.dtype), None, 0) if g is None else g for g in gs]
        out.append(ops.stack(gs, 0))
    return out
