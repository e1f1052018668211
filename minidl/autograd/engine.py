"""The backward pass: reverse-mode differentiation over the recorded graph.

The graph is made of Function nodes (see op_function.py); each non-leaf Tensor points at
the node that produced it, and each node keeps, per input, the edge ``(node, output
index)`` that input's gradient goes to. ``run(roots, grads)``:

1. walks the graph from the roots with an explicit stack (no recursion, so a chain of
   100,000 ops is fine) and lists the nodes in reverse topological order, so that a node
   runs only after every node that consumes its outputs has passed its gradient back;
2. runs each node's backward once, with the sum of the gradients of its outputs, after
   the tensor hooks registered on those outputs and the node's own pre-hooks (either may
   replace a gradient) and after checking that nothing it saved was modified in place since
   (versions.py); then the node's post hooks (node.py), which may replace what it returned;
3. adds the resulting gradients into leaf tensors' ``.grad`` (accumulating across calls),
   and frees each node's saved arrays unless ``retain_graph`` is set (node.release: the
   edges stay, so ``next_functions`` still describes the graph, as in PyTorch);
4. runs a leaf's post-accumulate-grad hooks as soon as its last gradient has arrived, and the
   callbacks queued during the pass once it is over (backward_callbacks.py).

A node without hooks pays one test of its ``__dict__`` for all of them. Each pass is also a
"graph task" of its thread (``current_graph_task_id``, ``will_execute``), which is what
``register_multi_grad_hook`` (graph.py) asks to know how many gradients it should wait for.

With ``targets`` (``autograd.grad``) it instead returns the gradients of those tensors,
runs only the nodes that lead to them and leaves every ``.grad`` alone.

With anomaly detection on (anomaly_mode.py), the gradients each backward returns are checked
for NaN, and an error met while running a node is reported with the forward call that built it.
"""
import itertools
import threading

import numpy as np

from . import anomaly_mode, backward_callbacks, op_function, grad_mode, node as node_api, versions, views
from ..backends import device_of, namespace_of
from .node import release

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
        for e in node.edges:
            if e is not None and e[0] is not None and id(e[0]) not in visited:
                stack.append((e[0], False))
    order.reverse()
    return order


def _output_metas(node):
    """(shape, NumPy dtype) of each output of a node with several (a pre-hook may fill in the
    gradient of one that none reached); None for a node with one output."""
    meta = node.__dict__.get("output_meta")
    return None if meta is None else [(tuple(shape), np.dtype(getattr(dt, "dtype", dt))) for shape, dt in meta]


class _Tasks(threading.local):
    def __init__(self):
        self.stack = []      # this thread's backward passes now running, innermost last


_tasks = _Tasks()
_task_ids = itertools.count()


# register_multi_grad_hook's "all" hooks alive: while there are any, each pass notes the leaves
# it reaches before running (nodes forget their non-leaf inputs as they are freed)
leaf_queries = [0]


class _GraphTask:
    """One backward pass, as register_multi_grad_hook asks about it."""

    def __init__(self, roots, order, capture, needed):
        self.id = next(_task_ids)
        self.order, self.capture, self.needed = order, capture, needed
        self._nodes = None
        self.leaves = None
        if leaf_queries[0]:
            self.leaves = {id(r) for r in roots if r._node is None}
            self.leaves.update(id(t) for n in order for t, e in zip(n.inputs, n.edges)
                               if e is not None and e[0] is None)

    def will_execute(self, node):
        """Will this pass run ``node`` (an op's node, or a leaf's AccumulateGrad)? A leaf's
        counts when its gradient is delivered: into ``.grad``, or as a target of autograd.grad."""
        capture = self.capture
        if isinstance(node, node_api.AccumulateGrad):
            key = id(node.variable)
            return self.leaves is not None and key in self.leaves and (capture is None or key in capture.leaves)
        if capture is not None:
            return id(node) in self.needed or id(node) in capture.nodes
        if self._nodes is None:
            self._nodes = {id(n) for n in self.order}
        return id(node) in self._nodes


def current_graph_task_id():
    """The id of the innermost backward pass running in this thread, -1 outside backward."""
    stack = _tasks.stack
    return stack[-1].id if stack else -1


def will_execute(node):
    """Will the innermost backward pass of this thread run ``node``? (False outside backward.)"""
    stack = _tasks.stack
    return bool(stack) and stack[-1].will_execute(node)


def _shape_error(node, tensor, grad):
    raise RuntimeError(f"{type(node).__name__}.backward returned a gradient of shape {grad.shape} "
                       f"for an input of shape {tensor.shape}")


class _Targets:
    """The tensors autograd.grad differentiates with respect to, and what reached them."""

    def __init__(self, tensors):
        for t in tensors:
            views.current(t)
        self.keys = [id(t) if t._node is None else (id(t._node), t._out_index) for t in tensors]
        self.grads = dict.fromkeys(self.keys)
        self.nodes = {id(t._node) for t in tensors if t._node is not None}
        self.leaves = {id(t): t for t in tensors if t._node is None}

    def leaf_hooks(self):
        """Run the tensor hooks of the target leaves on their summed gradients (PyTorch runs a
        captured tensor's hooks; its AccumulateGrad node does not run)."""
        for key, leaf in self.leaves.items():
            g = self.grads[key]
            if g is not None and leaf._hooks:
                self.grads[key] = _call_hooks(leaf._hooks, g)

    def add(self, key, g):
        old = self.grads[key]
        self.grads[key] = g if old is None else old + g

    def needed_nodes(self, order):
        """The nodes whose backward leads to a target (only those need to run)."""
        needed = set()
        for node in reversed(order):     # inputs before consumers
            for t, e in zip(node.inputs, node.edges):
                if e is None:
                    continue
                src = e[0]
                if (id(t) if src is None else (id(src), e[1])) in self.grads or id(src) in needed:
                    needed.add(id(node))
                    break
        return needed


def run(roots, grads, retain_graph=False, targets=None):
    """Backpropagate d(sum_i <grads[i], roots[i]>). Without ``targets``: accumulate into the
    ``.grad`` of every leaf that requires grad. With a list of ``targets``: return their
    gradients (arrays, None where no gradient reached one) and touch no ``.grad``."""
    pending = {}        # id(node) -> list of output gradients
    owned = set()       # ids of arrays a leaf may not keep without copying
    hooked = {}         # id(leaf) -> [leaf, summed gradient] for leaves whose hooks run first
    capture = None if targets is None else _Targets(targets)
    for r in roots:
        views.current(r)
    for r, g in zip(roots, grads):
        if not r.requires_grad:
            raise RuntimeError("element of the tensors given to backward() does not require grad "
                               "and has no grad_fn")
        owned.add(id(g))
        if r._node is None:     # a leaf as a root: with post-accumulate-grad hooks, held like the others
            held = {id(r)} if capture is None and backward_callbacks.hooks_of(r) is not None else None
            _to_leaf(r, g, owned, hooked, capture, held)
        else:
            _add_pending(pending, r._node, r._out_index, g)

    order = _topological_order(roots)
    needed = None if capture is None else capture.needed_nodes(order)
    # hooked leaves -> edges still to deliver; their gradients are summed in ``hooked`` until then
    remaining, feeding = backward_callbacks.leaf_edge_counts(order) if capture is None and \
        backward_callbacks.registry else (None, None)
    backward_callbacks.begin()
    finished = False
    writes = versions._writes
    state = grad_mode._state
    enabled = state.enabled
    state.enabled = False   # backward formulas run on arrays; nothing in them is recorded
    anomaly = anomaly_mode._enabled
    node = None
    tasks = _tasks.stack
    tasks.append(_GraphTask(roots, order, capture, needed))
    try:
        for node in order:
            gouts = pending.pop(id(node), None)
            if gouts is None:
                if remaining and id(node) in feeding:
                    _leaf_edges_done(node, remaining, hooked, owned)
                continue
            d = node.__dict__
            extra = "_output_hooks" in d or "_retained" in d or "_node_hooks" in d
            if capture is None:
                if extra:
                    _output_hooks(node, gouts, owned, retain=True)
            else:
                runs = id(node) in needed
                if extra and (runs or id(node) in capture.nodes):
                    _output_hooks(node, gouts, owned, retain=False)
                for i, g in enumerate(gouts):
                    key = (id(node), i)
                    if g is not None and key in capture.grads:
                        capture.add(key, g)
                if not runs:
                    continue
            saved_versions = node._saved_versions
            if saved_versions is not None and saved_versions[0] != writes[0]:
                versions.check(node)       # something was written in place since the forward
            if extra:
                node_hooks = d.get("_node_hooks")
                if node_hooks is not None:
                    gouts = hooked_gouts = node_api.run_prehooks(node_hooks, gouts, _output_metas(node))
            if extra and node_hooks is not None and all(g is None for g in gouts):
                gins = (None,) * len(node.inputs)     # pre-hooks dropped every gradient: none flows on
            else:
                if node.n_outputs > 1 and node.materialize_grads and any(g is None for g in gouts):
                    # an output that never reached the roots contributes a zero gradient (on the
                    # device of the gradients that did)
                    xp = namespace_of(next(g for g in gouts if g is not None))
                    gouts = [xp.zeros(shape, dtype) if g is None else g
                             for g, (shape, dtype) in zip(gouts, node.output_meta)]
                gins = type(node).backward(node, *gouts)
                if type(gins) is not tuple:
                    gins = (gins,)
            if anomaly:
                anomaly_mode.check_gradients(node, gins)
            inputs = node.inputs
            if len(gins) != len(inputs):
                gins = _gradient_count(node, gins, len(inputs))
            if extra and node_hooks is not None:
                gins = node_api.run_posthooks(node, node_hooks, gins, hooked_gouts)
            if len(gins) > 1:
                _mark_repeats(gins, owned)
            for t, e, g in zip(inputs, node.edges, gins):
                if g is None or e is None:
                    continue
                if type(g) is not np.ndarray and np.ndim(g) == 0 and device_of(g) == "cpu":
                    g = np.asarray(g)
                data = t._data
                if g.shape != data.shape:
                    _shape_error(node, t, g)
                if g.dtype != data.dtype:  # e.g. a float64 constant in a backward: keep float32 graphs float32
                    g = g.astype(data.dtype)
                if e[0] is None:
                    if capture is None and not t._hooks and not remaining:
                        _accumulate(t, g, owned)     # _to_leaf's common case, without the call
                    else:
                        _to_leaf(t, g, owned, hooked, capture, remaining)
                else:
                    _add_pending(pending, e[0], e[1], g)
            if remaining and id(node) in feeding:
                _leaf_edges_done(node, remaining, hooked, owned)
            if not retain_graph:
                release(node, extra)
        node = None
        for leaf, g in hooked.values():
            _deliver(leaf, g, owned, remaining is not None)
        if capture is not None and capture.leaves:
            capture.leaf_hooks()
        finished = True
    except Exception:
        if anomaly and node is not None:
            anomaly_mode.report(node)   # where the forward built the node that failed
        raise
    finally:
        try:
            backward_callbacks.finish(run=finished)
        finally:
            state.enabled = enabled
            tasks.pop()
    if capture is None:
        return None
    return [_fresh(capture.grads[k], owned) for k in capture.keys]


def backward(roots, grads, retain_graph=False):
    """Accumulate d(sum_i <grads[i], roots[i]>)/d(leaf) into every leaf that requires grad."""
    run(roots, grads, retain_graph)


def _to_leaf(leaf, g, owned, hooked, capture, remaining=None):
    if capture is not None:
        if id(leaf) in capture.grads:
            capture.add(id(leaf), g)
    elif leaf._hooks or (remaining and id(leaf) in remaining):
        slot = hooked.get(id(leaf))
        if slot is None:
            hooked[id(leaf)] = [leaf, g]
        else:
            slot[1] = slot[1] + g
    else:
        _accumulate(leaf, g, owned)


def _leaf_edges_done(node, remaining, hooked, owned):
    """``node`` has delivered its gradients: a hooked leaf that has now received all of its
    gets them (through its tensor hooks) into ``.grad``, then its post-accumulate-grad hooks run."""
    for t, e in zip(node.inputs, node.edges):
        if e is None or e[0] is not None:
            continue
        key = id(t)
        left = remaining.get(key)
        if left is None:
            continue
        if left > 1:
            remaining[key] = left - 1
            continue
        del remaining[key]
        slot = hooked.pop(key, None)
        if slot is not None:
            _deliver(t, slot[1], owned, True)


def _deliver(leaf, g, owned, post_accumulate):
    """A hooked leaf's gradient for this pass, into ``.grad``: through its tensor hooks, its
    AccumulateGrad node's pre-hooks, then the accumulation, its post-accumulate-grad hooks (with
    ``post_accumulate``) and the node's post hooks."""
    hooks = leaf._hooks
    node_hooks = None
    if hooks:
        g = _call_hooks(hooks, g)
        node_hooks = node_api.leaf_node_hooks(hooks)
        if node_hooks is not None:
            g = node_api.run_prehooks(node_hooks, [g])[0]
    if g is not None:
        _accumulate(leaf, g, owned)
    if post_accumulate:
        backward_callbacks.run_post_hooks(leaf)
    if node_hooks is not None:
        grad_outputs = node_api._wrap_all([g])
        for fn in list(node_hooks.post.values()):
            fn((), grad_outputs)


def _gradient_count(node, gins, n, method="backward"):
    """The gradients of a backward that did not return one per forward argument: as PyTorch,
    extra trailing Nones are dropped; anything else is an error."""
    if len(gins) > n and all(g is None for g in gins[n:]):
        return gins[:n]
    raise RuntimeError(f"{type(node).__name__}.{method} returned {len(gins)} gradients, "
                       f"expected {n} (one per forward argument)")


def _mark_repeats(gins, owned):
    """An array a backward returns for two inputs (Add's g, for a and for b) may be kept by no
    leaf: the leaf's later accumulations (``+=``) would change the gradient the other input
    still carries, and one that reaches the same leaf twice would be added to itself."""
    seen = set()
    for g in gins:
        if g is not None:
            if id(g) in seen:
                owned.add(id(g))
            seen.add(id(g))


def _add_pending(pending, node, i, g):
    """Add g to the gradient waiting for output ``i`` of ``node``."""
    slot = pending.get(id(node))
    if slot is None:
        if node.n_outputs == 1:
            pending[id(node)] = [g]
            return
        slot = pending[id(node)] = [None] * node.n_outputs
    slot[i] = g if slot[i] is None else _sum(slot[i], g)


def _sum(a, b):
    """a + b of two gradients; two large float CPU arrays of one shape in one parallel Numba pass
    (NumPy's adds run on one thread, and its 2-byte arithmetic is slow; a residual network sums a
    gradient per skip connection)."""
    if type(a) is np.ndarray and type(b) is np.ndarray:
        from ..kernels.cpu.half_cast import add
        return add(a, b)
    return a + b


def _copy(g):
    """A copy of gradient g; a large float CPU array in one parallel Numba pass (NumPy's copy runs
    on one thread)."""
    if type(g) is np.ndarray:
        from ..kernels.cpu.half_cast import copy
        return copy(g)
    return g.copy()


def _output_hooks(node, gouts, owned, retain):
    """Run the hooks registered on the node's output tensors, then (with ``retain``) fill
    the ``.grad`` of those that called retain_grad()."""
    hooks = node.__dict__.get("_output_hooks", {})
    for i, fns in hooks.items():
        if gouts[i] is not None and fns:
            gouts[i] = _call_hooks(fns, gouts[i])
    for i, ref in (node.__dict__.get("_retained", {}) if retain else {}).items():
        t = ref()
        if t is not None and gouts[i] is not None and t._node is node:
            _accumulate(t, gouts[i], owned)


def _call_hooks(hooks, g):
    """Pass g through each hook in turn; a hook returning a Tensor replaces it."""
    Tensor = op_function.Tensor
    for fn in list(hooks.values()):
        if type(fn) is node_api._AccumulateGradMarker:
            continue       # the leaf's AccumulateGrad hooks: run by _deliver after all tensor hooks
        out = fn(Tensor._wrap(g, None, 0))
        if out is None:
            continue
        name = getattr(fn, "__name__", type(fn).__name__)
        if not isinstance(out, Tensor):
            raise TypeError(f"hook {name!r} returned a {type(out).__name__}; expected a Tensor or None")
        if out.shape != g.shape:
            raise RuntimeError(f"hook {name!r} has changed the size of value: it returned a gradient of shape "
                               f"{list(out.shape)} for a tensor of shape {list(g.shape)}")
        if out.dtype != g.dtype:
            raise RuntimeError(f"hook {name!r} has changed the type of value (was {g.dtype} got "
                               f"{out._data.dtype}): it must return a gradient of the tensor's dtype")
        g = out._data
    return g


def _fresh(g, owned):
    """g as an array no one else holds (copied if it may be shared), wrapped in a Tensor."""
    if g is None:
        return None
    if id(g) in owned or getattr(g, "base", None) is not None or not g.flags.writeable:
        g = _copy(g)
    owned.add(id(g))
    return op_function.Tensor._wrap(g, None, 0)


def _accumulate(leaf, g, owned):
    """Add g into leaf.grad. A fresh array that no one else holds is kept as it is; any
    other (a view, the caller's gradient, one already given to another leaf) is copied,
    so that no two .grad arrays ever share memory."""
    grad = leaf._grad
    if g.dtype != leaf._data.dtype:
        g = g.astype(leaf._data.dtype)
    elif grad is None and (g.base is not None or id(g) in owned or not g.flags.writeable):
        g = _copy(g)
    owned.add(id(g))
    if grad is None:
        leaf._grad = op_function.Tensor._wrap(g, None, 0)
    else:
        acc = grad._data
        acc += g
