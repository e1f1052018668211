"""The backward pass: reverse-mode differentiation over the recorded graph.

The graph is made of Function nodes (see function.py); each non-leaf Tensor points at
the node that produced it. ``backward(roots, grads)``:

1. walks the graph from the roots with an explicit stack (no recursion, so a chain of
   100,000 ops is fine) and lists the nodes in reverse topological order, so that a node
   runs only after every node that consumes its outputs has passed its gradient back;
2. runs each node's backward once, with the sum of the gradients of its outputs;
3. adds the resulting gradients into leaf tensors' ``.grad`` (accumulating across calls),
   and frees each node's saved arrays unless ``retain_graph`` is set.
"""
import numpy as np

from . import grad_mode

_FREED = ("Trying to backward through the graph a second time (or to use values it saved after "
          "they were freed). Pass retain_graph=True to the first backward() if you need to.")


def _topological_order(roots):
    order, visited = [], set()
    stack = [(r._node, False) for r in roots if r._node is not None]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        if node.freed:
            raise RuntimeError(_FREED)
        visited.add(id(node))
        stack.append((node, True))
        for t in node.inputs:
            if t is not None and t._node is not None and id(t._node) not in visited:
                stack.append((t._node, False))
    order.reverse()
    return order


def _check_shape(node, tensor, grad):
    if grad.shape != tensor.shape:
        raise RuntimeError(f"{type(node).__name__}.backward returned a gradient of shape {grad.shape} "
                           f"for an input of shape {tensor.shape}")


def backward(roots, grads, retain_graph=False):
    """Accumulate d(sum_i <grads[i], roots[i]>)/d(leaf) into every leaf that requires grad."""
    pending = {}        # id(node) -> list of output gradients
    owned = set()       # ids of arrays a leaf may not keep without copying
    for r, g in zip(roots, grads):
        if not r.requires_grad:
            raise RuntimeError("element of the tensors given to backward() does not require grad "
                               "and has no grad_fn")
        owned.add(id(g))
        if r._node is None:
            _accumulate(r, g, owned)
        else:
            slot = pending.setdefault(id(r._node), [None] * r._node.n_outputs)
            i = r._out_index
            slot[i] = g if slot[i] is None else slot[i] + g

    with grad_mode.no_grad():
        for node in _topological_order(roots):
            gouts = pending.pop(id(node), None)
            if gouts is None:
                continue
            if any(g is None for g in gouts):
                gouts = [np.zeros(shape, dtype) if g is None else g
                         for g, (shape, dtype) in zip(gouts, node.output_meta)]
            gins = type(node).backward(node, *gouts)
            if not isinstance(gins, tuple):
                gins = (gins,)
            inputs = node.inputs
            if len(gins) != len(inputs):
                raise RuntimeError(f"{type(node).__name__}.backward returned {len(gins)} gradients, "
                                   f"expected {len(inputs)} (one per forward argument)")
            for t, g in zip(inputs, gins):
                if t is None or g is None or not t.requires_grad:
                    continue
                if not isinstance(g, np.ndarray) and np.ndim(g) == 0:
                    g = np.asarray(g)
                _check_shape(node, t, g)
                if t._node is None:
                    _accumulate(t, g, owned)
                else:
                    key = id(t._node)
                    slot = pending.get(key)
                    if slot is None:
                        slot = pending[key] = [None] * t._node.n_outputs
                    i = t._out_index
                    slot[i] = g if slot[i] is None else slot[i] + g
            if not retain_graph:
                node.__dict__.clear()
                node.freed = True


def _accumulate(leaf, g, owned):
    """Add g into leaf.grad. A fresh array that no one else holds is kept as it is; any
    other (a view, the caller's gradient, one already given to another leaf) is copied,
    so that no two .grad arrays ever share memory."""
    from ..tensor.tensor import Tensor

    if g.dtype != leaf.dtype:
        g = g.astype(leaf.dtype)
    elif leaf.grad is None and (g.base is not None or id(g) in owned or not g.flags.writeable):
        g = g.copy()
    owned.add(id(g))
    if leaf.grad is None:
        leaf.grad = Tensor._wrap(g, None, 0)
    else:
        acc = leaf.grad._data
        acc += g
