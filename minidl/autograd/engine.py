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
from ..backends import device_of, namespace_of

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


def _shape_error(node, tensor, grad):
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
            _add_pending(pending, r, g)

    order = _topological_order(roots)
    enabled = grad_mode._enabled
    grad_mode._enabled = False   # backward formulas run on arrays; nothing in them is recorded
    try:
        for node in order:
            gouts = pending.pop(id(node), None)
            if gouts is None:
                continue
            if node.n_outputs > 1 and any(g is None for g in gouts):
                # an output that never reached the roots contributes a zero gradient (on the
                # device of the gradients that did)
                xp = namespace_of(next(g for g in gouts if g is not None))
                gouts = [xp.zeros(shape, dtype) if g is None else g
                         for g, (shape, dtype) in zip(gouts, node.output_meta)]
            gins = type(node).backward(node, *gouts)
            if type(gins) is not tuple:
                gins = (gins,)
            inputs = node.inputs
            if len(gins) != len(inputs):
                raise RuntimeError(f"{type(node).__name__}.backward returned {len(gins)} gradients, "
                                   f"expected {len(inputs)} (one per forward argument)")
            for t, g in zip(inputs, gins):
                if g is None or t is None or not t._requires_grad:
                    continue
                if type(g) is not np.ndarray and np.ndim(g) == 0 and device_of(g) == "cpu":
                    g = np.asarray(g)
                data = t._data
                if g.shape != data.shape:
                    _shape_error(node, t, g)
                if g.dtype != data.dtype:  # e.g. a float64 constant in a backward: keep float32 graphs float32
                    g = g.astype(data.dtype)
                if t._node is None:
                    _accumulate(t, g, owned)
                else:
                    _add_pending(pending, t, g)
            if not retain_graph:
                node.__dict__.clear()
                node.freed = True
    finally:
        grad_mode._enabled = enabled


def _add_pending(pending, t, g):
    """Add g to the gradient waiting for output ``t`` of its node."""
    node = t._node
    slot = pending.get(id(node))
    if slot is None:
        if node.n_outputs == 1:
            pending[id(node)] = [g]
            return
        slot = pending[id(node)] = [None] * node.n_outputs
    i = t._out_index
    slot[i] = g if slot[i] is None else slot[i] + g


def _accumulate(leaf, g, owned):
    """Add g into leaf.grad. A fresh array that no one else holds is kept as it is; any
    other (a view, the caller's gradient, one already given to another leaf) is copied,
    so that no two .grad arrays ever share memory."""
    grad = leaf.grad
    if g.dtype != leaf._data.dtype:
        g = g.astype(leaf._data.dtype)
    elif grad is None and (g.base is not None or id(g) in owned or not g.flags.writeable):
        g = g.copy()
    owned.add(id(g))
    if grad is None:
        leaf.grad = _tensor_class()._wrap(g, None, 0)
    else:
        acc = grad._data
        acc += g


_Tensor = None


def _tensor_class():
    # looked up on first use: the tensor module imports the autograd package
    global _Tensor
    if _Tensor is None:
        from ..tensor.tensor import Tensor
        _Tensor = Tensor
    return _Tensor
