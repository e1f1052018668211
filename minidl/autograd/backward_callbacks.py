"""What runs at fixed points of a backward pass besides the gradient formulas.

- Post-accumulate-grad hooks (``Tensor.register_post_accumulate_grad_hook``, PyTorch's):
  ``hook(leaf)`` runs as soon as a leaf's ``.grad`` holds its gradient for this backward,
  while the backward goes on with the rest of the graph. The engine counts, per hooked leaf,
  the graph edges that lead to it and runs the hooks when the last one has delivered. This is
  what lets DistributedDataParallel start reducing a bucket of gradients while the backward
  of the layers below is still running.
- Final callbacks (``queue_callback``, PyTorch's ``Variable._execution_engine.queue_callback``):
  functions queued while a backward runs (from a hook), called once it has finished, in the
  order queued. Per thread: each thread's backward has its own queue.

The registry holds leaves weakly: a dropped tensor's hooks go with it.
"""
import threading
import weakref

from . import hooks

# id(leaf) -> (weak reference to the leaf, HookDict); the reference's callback drops the entry
registry = {}


def register_post_accumulate_grad_hook(tensor, hook):
    if not tensor.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if tensor._node is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    key = id(tensor)
    entry = registry.get(key)
    if entry is None or entry[0]() is not tensor:
        entry = registry[key] = (weakref.ref(tensor, _dropper(key)), hooks.HookDict())
    return hooks.add(entry[1], hook)


def _dropper(key):
    """The weak reference's callback: forget ``key``'s entry (the dict is bound here, so this
    also works while the interpreter shuts down and module globals are gone)."""
    reg = registry

    def drop(ref):
        entry = reg.get(key)
        if entry is not None and entry[0] is ref:
            del reg[key]
    return drop


def hooks_of(leaf):
    entry = registry.get(id(leaf))
    return entry[1] if entry is not None and entry[0]() is leaf and entry[1] else None


def leaf_edge_counts(order):
    """For the hooked leaves: id(leaf) -> how many edges of the nodes in ``order`` lead to it;
    and the ids of the nodes that have such an edge (the only ones the engine must look at)."""
    counts, feeding = {}, set()
    for node in order:
        for t, e in zip(node.inputs, node.edges):
            if e is not None and e[0] is None and id(t) in registry and hooks_of(t) is not None:
                counts[id(t)] = counts.get(id(t), 0) + 1
                feeding.add(id(node))
    return counts, feeding


def run_post_hooks(leaf):
    fns = hooks_of(leaf)
    for fn in list(fns.values()) if fns else ():
        if fn(leaf) is not None:     # the hook acts on leaf.grad itself; nothing it returns is used
            raise RuntimeError("Tensor post accumulate grad hooks should return None.")


class _Queues(threading.local):
    stack = None


_queues = _Queues()


def queue_callback(fn):
    """Call ``fn()`` when the backward pass now running in this thread has finished."""
    if not callable(fn):
        raise TypeError(f"queue_callback: expected a callable, got {type(fn).__name__}")
    stack = _queues.stack
    if not stack:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    stack[-1].append(fn)


def begin():
    if _queues.stack is None:
        _queues.stack = []
    _queues.stack.append([])


def finish(run):
    """Close this thread's innermost backward; with ``run``, call its queued callbacks (a
    callback may queue more)."""
    queue = _queues.stack[-1]
    try:
        i = 0
        while run and i < len(queue):
            queue[i]()
            i += 1
    finally:
        _queues.stack.pop()
