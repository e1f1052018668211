"""The recorded graph as PyTorch's ``torch.autograd.graph`` presents it, and walks over it.

A node's ``edges`` pair each input with the node that produced it: ``None`` for an input that
does not require grad, ``(None, ...)`` for a leaf that does (the end of a path), and
``(node, index)`` otherwise. Data-parallel training asks which parameters a forward used
(``leaves_reached``); activation checkpointing asks which tensors a function read without
taking them as arguments.

The public surface, with PyTorch's names and behaviour:

- ``Node`` (node.py): what ``t.grad_fn`` is an instance of, with ``name()``,
  ``next_functions``, ``metadata``, ``register_hook`` and ``register_prehook``;
- ``GradientEdge(node, output_nr)`` and ``get_gradient_edge(t)``: where ``t``'s gradient is
  computed (its leaf's AccumulateGrad node, or the node and output that produced it);
- ``increment_version(t)``: count an in-place write autograd could not see (versions.py);
- ``register_multi_grad_hook(tensors, fn, mode=...)``: one hook for a group of tensors;
- ``saved_tensors_hooks``, ``save_on_cpu``, ``disable_saved_tensors_hooks`` (saved_hooks.py).
"""
import threading
from collections import defaultdict
from typing import NamedTuple, Optional

from . import engine, op_function, hooks, versions, views
from .node import AccumulateGrad, Node, accumulate_grad
from .saved_hooks import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks

__all__ = ["AccumulateGrad", "GradientEdge", "Node", "disable_saved_tensors_hooks", "get_gradient_edge",
           "increment_version", "register_multi_grad_hook", "save_on_cpu", "saved_tensors_hooks"]


def leaves_reached(outputs):
    """The leaf tensors requiring grad that the graphs of ``outputs`` lead to, in first-seen
    order, each once (outputs without a node contribute nothing)."""
    leaves, seen_leaf, seen_node = [], set(), set()
    stack = [t._node for t in outputs if t._node is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen_node:
            continue
        seen_node.add(id(node))
        for t, e in zip(node.inputs, node.edges):
            if e is None:
                continue
            if e[0] is None:
                if id(t) not in seen_leaf:
                    seen_leaf.add(id(t))
                    leaves.append(t)
            elif id(e[0]) not in seen_node:
                stack.append(e[0])
    return leaves


class GradientEdge(NamedTuple):
    """Where a gradient is computed: output ``output_nr`` of ``node``."""
    node: Node
    output_nr: int
    ownership_token: Optional[Node] = None


def _node_of(t):
    """The node that receives ``t``'s gradient: its grad_fn, or its leaf's AccumulateGrad."""
    if isinstance(t, GradientEdge):
        return t.node
    t = views.current(t)
    if t._node is not None:
        return t._node
    if t._requires_grad:
        return accumulate_grad(t)
    raise AssertionError("Expected gradient function to be set")


def get_gradient_edge(tensor):
    """The GradientEdge of ``tensor``'s gradient: ``autograd.grad(loss, get_gradient_edge(x))``
    is ``autograd.grad(loss, x)``."""
    if not isinstance(tensor, op_function.Tensor):
        raise TypeError(f"get_gradient_edge(): expected a Tensor, got {type(tensor).__name__}")
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require gradients")
    node = _node_of(tensor)
    return GradientEdge(node, 0 if isinstance(node, AccumulateGrad) else tensor._out_index)


def increment_version(tensor):
    """Count an in-place write into ``tensor`` (or into each of an iterable of tensors) that
    autograd did not see, e.g. one made by a kernel through the raw memory: nodes that saved it
    then raise in backward, as for any in-place write."""
    Tensor = op_function.Tensor
    if isinstance(tensor, Tensor):
        tensor = (tensor,)
    try:
        items = list(tensor)
    except TypeError:
        raise RuntimeError(f"increment_version expect a Iterable[Tensor] as input, got "
                           f"{type(tensor).__name__}") from None
    for t in items:
        if not isinstance(t, Tensor):
            raise RuntimeError(f"increment_version expect a Iterable[Tensor] as input, got an item of type "
                               f"{type(t).__name__}")
    for t in items:
        versions.bump(t._version_counter)


class _MultiHandle(hooks.RemovableHandle):
    """Removes every per-tensor hook of a register_multi_grad_hook."""
    __slots__ = ("handles", "_counted")

    def __init__(self, handles, counted=False):
        self.handles, self._counted = handles, counted
        if counted:
            engine.leaf_queries[0] += 1

    def remove(self):
        for h in self.handles:
            h.remove()
        if self._counted:
            self._counted = False
            engine.leaf_queries[0] -= 1


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """One hook for a group of tensors.

    ``mode="all"``: ``fn(grads)`` once the gradient of every tensor of the group that this
    backward computes has been computed, with None for those it does not compute (a tensor not
    in the graph, or not needed for the ``inputs`` of this backward or autograd.grad).
    ``mode="any"``: ``fn(grad)`` with the first gradient of the group computed in each backward.
    fn should not modify its arguments. Returns a handle whose ``remove()`` removes the hook.
    """
    modes = ("all", "any")
    if mode not in modes:
        raise ValueError(f"Expects mode to be one of {modes} but got {mode}")
    tensors = list(tensors)
    lock = threading.Lock()
    if mode == "any":
        ran = defaultdict(bool)

        def first(grad):
            task = _task_id()
            with lock:
                done, ran[task] = ran[task], True
            if not done:
                fn(grad)
        return _MultiHandle(tuple(t.register_hook(first) for t in tensors if t.requires_grad))

    nodes = [_node_of(t) for t in tensors]
    counts, expected, buffers = {}, {}, {}

    def hook_for(idx):
        def inner(grad):
            task = _task_id()
            with lock:
                seen = counts.get(task, 0)
                counts[task] = seen + 1
                if seen == 0:    # first of the group in this pass: how many will come
                    expected[task] = sum(engine.will_execute(n) for n in nodes)
                    buffers[task] = [None] * len(nodes)
                buffers[task][idx] = grad
                last = seen == expected[task] - 1
                if last:
                    grads = buffers.pop(task)
                    del counts[task], expected[task]
            if last:
                fn(grads)
        return inner

    return _MultiHandle(tuple(t.register_hook(hook_for(i)) for i, t in enumerate(tensors)), counted=True)


def _task_id():
    task = engine.current_graph_task_id()
    if task == -1:
        raise AssertionError("expected this hook to be called inside a backward call")
    return task
