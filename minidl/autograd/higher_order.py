"""The backward pass that records a graph: ``backward(create_graph=True)`` and
``autograd.grad(..., create_graph=True)``, which gradients of gradients are made of.

engine.run computes each node's backward on arrays with grad mode off: fast, and nothing it does
is recorded, so its gradients are constants. Differentiating a gradient (a Hessian-vector
product, a gradient penalty, a MAML inner step) needs the gradient as a function of the inputs.
This pass visits the same nodes in the same order as engine.run (its topological order), but
for each node calls the Tensor-level twin of its backward,

    differentiable_backward(ctx, inputs, *grad_outputs)  ->  one Tensor (or None) per input,

a static method of the op's Function class written next to its ``backward`` with the same math,
in minidl's differentiable ops (so it records a graph), reading the node's input Tensors
(``ctx.inputs``, None for arguments that are not Tensors) instead of the arrays the forward saved.
Grad mode is on while it runs, and gradients are summed out of place, as Tensors. A leaf's
``.grad`` becomes a Tensor that carries the graph (a clone of the gradient, or the old ``.grad``
plus it), as PyTorch's; ``autograd.grad`` returns the summed gradients themselves.

A node whose class does not define ``differentiable_backward`` itself (a subclass may change its
forward, so the method is not inherited) raises NotImplementedError naming the op: a gradient
that silently missed the path through it would be wrong. Tensor hooks, ``retain_grad``, node pre-
and post-hooks, post-accumulate-grad hooks and queued callbacks run as in engine.run, on Tensors.
"""
import numpy as np

from . import anomaly_mode, backward_callbacks, engine, op_function, grad_mode, node as node_api, versions, views
from ..backends import namespace_of

_METHOD = "differentiable_backward"


def supported_ops():
    """The names of the Function classes that define a differentiable backward, sorted (with the
    layers' ops loaded: minidl imports some of them only with minidl.nn)."""
    import importlib
    importlib.import_module("minidl.nn.functional")
    seen, names, stack = set(), set(), [op_function.Function]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                if _METHOD in vars(sub) and "_forward_cls" not in vars(sub):    # not a user's Function
                    names.add(sub.__name__)
    return sorted(names)


def _unsupported(node):
    return NotImplementedError(
        f"create_graph=True: {node.name()} has no differentiable backward in minidl; ops that have one: "
        f"{', '.join(supported_ops())}")


def _wrap(array):
    return op_function.Tensor._wrap(array, None, 0)


def run(roots, seeds, retain_graph=False, targets=None):
    """Backpropagate d(sum_i <seeds[i], roots[i]>) recording the graph of every gradient.
    ``seeds`` are Tensors (they may require grad themselves). Without ``targets``: set or add into
    the ``.grad`` of every leaf reached. With ``targets``: return their gradients (Tensors, None
    where none arrived) and touch no ``.grad``."""
    pending = {}
    leaves = {}         # id(leaf) -> [leaf, summed gradient], delivered into .grad at the end
    capture = None if targets is None else engine._Targets(targets)
    for r in roots:
        views.current(r)
    for r, g in zip(roots, seeds):
        if not r.requires_grad:
            raise RuntimeError("element of the tensors given to backward() does not require grad "
                               "and has no grad_fn")
        if r._node is None:
            _to_leaf(r, g, leaves, capture)
        else:
            _add_pending(pending, r._node, r._out_index, g)
    order = engine._topological_order(roots)
    needed = None if capture is None else capture.needed_nodes(order)
    backward_callbacks.begin()
    finished = False
    state = grad_mode._state
    enabled = state.enabled
    state.enabled = True        # the backward formulas are recorded
    node = None
    tasks = engine._tasks.stack
    tasks.append(engine._GraphTask(roots, order, capture, needed))
    try:
        for node in order:
            gouts = pending.pop(id(node), None)
            if gouts is None:
                continue
            d = node.__dict__
            if capture is None:
                _output_hooks(node, gouts, retain=True)
            else:
                runs = id(node) in needed
                if runs or id(node) in capture.nodes:
                    _output_hooks(node, gouts, retain=False)
                for i, g in enumerate(gouts):
                    key = (id(node), i)
                    if g is not None and key in capture.grads:
                        capture.add(key, g)
                if not runs:
                    continue
            _check_versions(node)
            node_hooks = d.get("_node_hooks")
            hooked_gouts = gouts
            if node_hooks is not None:
                gouts = hooked_gouts = _run_prehooks(node_hooks.pre, gouts, _metas(node))
            if all(g is None for g in gouts):
                gins = (None,) * len(node.inputs)
            else:
                gins = _backward(node, gouts)
            if anomaly_mode._enabled:
                anomaly_mode.check_gradients(node, [None if g is None else g._data for g in gins])
            if node_hooks is not None and node_hooks.post:
                gins = _run_posthooks(node, node_hooks.post, gins, hooked_gouts)
            for t, e, g in zip(node.inputs, node.edges, gins):
                if g is None or e is None:
                    continue
                g = _conform(node, t, g)
                if e[0] is None:
                    _to_leaf(t, g, leaves, capture)
                else:
                    _add_pending(pending, e[0], e[1], g)
            if not retain_graph:
                node_api.release(node)
        node = None
        for leaf, g in leaves.values():
            _deliver(leaf, g)
        if capture is not None:
            for key, leaf in capture.leaves.items():
                g = capture.grads[key]
                if g is not None and leaf._hooks:
                    capture.grads[key] = _call_hooks(leaf._hooks, g)
        finished = True
    except Exception:
        if anomaly_mode._enabled and node is not None:
            anomaly_mode.report(node)
        raise
    finally:
        try:
            backward_callbacks.finish(run=finished)
        finally:
            state.enabled = enabled
            tasks.pop()
    if capture is None:
        return None
    return [capture.grads[k] for k in capture.keys]


def _backward(node, gouts):
    """The node's differentiable backward on its output gradients (zeros for an output of a
    multi-output node that no gradient reached)."""
    cls = type(node)
    if _METHOD not in vars(cls):
        raise _unsupported(node)
    if node.n_outputs > 1 and node.materialize_grads and any(g is None for g in gouts):
        like = next(g for g in gouts if g is not None)._data
        xp = namespace_of(like)
        gouts = [_wrap(xp.zeros(shape, np.dtype(getattr(dtype, "dtype", dtype)))) if g is None else g
                 for g, (shape, dtype) in zip(gouts, node.output_meta)]
    gins = getattr(cls, _METHOD)(node, node.inputs, *gouts)
    if type(gins) is not tuple:
        gins = (gins,)
    if len(gins) != len(node.inputs):
        gins = engine._gradient_count(node, gins, len(node.inputs), _METHOD)
    return gins


def _conform(node, t, g):
    """g checked against its input's shape and cast (differentiably) to its dtype."""
    Tensor = op_function.Tensor
    if not isinstance(g, Tensor):
        raise TypeError(f"{type(node).__name__}.differentiable_backward returned a {type(g).__name__}; "
                        "expected a Tensor or None")
    if tuple(g.shape) != tuple(t.shape):
        engine._shape_error(node, t, g)
    if g.dtype != t.dtype:
        g = g.to(t.dtype)
    return g


def _check_versions(node):
    """As engine.run's check, and stricter: the differentiable backward reads the node's input
    Tensors as they are now, so any input written in place since the forward is an error."""
    saved = node._saved_versions
    if saved is None or saved[0] == versions._writes[0]:
        return
    versions.check(node)
    for t, v in zip(node.inputs, saved[1]):
        if t is not None and t._version_counter.value != v:
            raise versions.modified_error(
                f"an input of {type(node).__name__}", t._version_counter.value, v,
                " (create_graph=True differentiates the backward, which reads every input of the node; "
                "clone() it before the in-place op, or do the op out of place)")


def _add_pending(pending, node, i, g):
    slot = pending.get(id(node))
    if slot is None:
        slot = pending[id(node)] = [None] * node.n_outputs
    slot[i] = g if slot[i] is None else slot[i] + g


def _to_leaf(leaf, g, leaves, capture):
    if capture is not None:
        if id(leaf) in capture.grads:
            capture.add(id(leaf), g)
        return
    slot = leaves.get(id(leaf))
    if slot is None:
        leaves[id(leaf)] = [leaf, g]
    else:
        slot[1] = slot[1] + g


def _accumulate(t, g):
    """.grad = a clone of g, or the old .grad + g: out of place, so the graph of g is kept."""
    if g.dtype != t.dtype:
        g = g.to(t.dtype)
    t._grad = g.clone() if t._grad is None else t._grad + g


def _deliver(leaf, g):
    """The leaf's gradient of this pass into ``.grad``, through its tensor hooks and its
    AccumulateGrad node's hooks, then its post-accumulate-grad hooks."""
    hooks = leaf._hooks
    node_hooks = None
    if hooks:
        g = _call_hooks(hooks, g)
        node_hooks = node_api.leaf_node_hooks(hooks)
        if node_hooks is not None:
            g = _run_prehooks(node_hooks.pre, [g])[0]
    if g is not None:
        _accumulate(leaf, g)
    if backward_callbacks.hooks_of(leaf) is not None:
        backward_callbacks.run_post_hooks(leaf)
    if node_hooks is not None:
        for fn in list(node_hooks.post.values()):
            fn((), (g,))


def _output_hooks(node, gouts, retain):
    d = node.__dict__
    for i, fns in d.get("_output_hooks", {}).items():
        if gouts[i] is not None and fns:
            gouts[i] = _call_hooks(fns, gouts[i])
    for i, ref in (d.get("_retained", {}) if retain else {}).items():
        t = ref()
        if t is not None and gouts[i] is not None and t._node is node:
            _accumulate(t, gouts[i])


def _call_hooks(hooks, g):
    """Pass the Tensor g through each hook in turn; a hook returning a Tensor replaces it."""
    Tensor = op_function.Tensor
    for fn in list(hooks.values()):
        if type(fn) is node_api._AccumulateGradMarker:
            continue
        out = fn(g)
        if out is None:
            continue
        name = node_api._hook_name(fn)
        if not isinstance(out, Tensor):
            raise TypeError(f"hook {name!r} returned a {type(out).__name__}; expected a Tensor or None")
        if out.shape != g.shape:
            raise RuntimeError(f"hook {name!r} has changed the size of value: it returned a gradient of shape "
                               f"{list(out.shape)} for a tensor of shape {list(g.shape)}")
        if out.dtype != g.dtype:
            raise RuntimeError(f"hook {name!r} has changed the type of value: it returned dtype {out.dtype} "
                               f"for a gradient of dtype {g.dtype}")
        g = out
    return g


def _metas(node):
    meta = node.__dict__.get("output_meta")
    return None if meta is None else [(tuple(s), np.dtype(getattr(dt, "dtype", dt))) for s, dt in meta]


def _replacements(fn, res, originals, metas=None):
    """node.py's checks of what a node hook returned, keeping the Tensors (and their graphs)."""
    arrays = node_api._replacements(fn, res, [None if g is None else g._data for g in originals], metas)
    return [None if a is None else r for a, r in zip(arrays, res)]


def _run_prehooks(pre, gouts, metas=None):
    for fn in list(pre.values()):
        res = fn(tuple(gouts))
        if res is not None:
            gouts = _replacements(fn, res, gouts, metas)
    return gouts


def _run_posthooks(node, post, gins, gouts):
    slots = [i for i, t in enumerate(node.inputs) if t is not None]
    current = [gins[i] if node.edges[i] is not None else None for i in slots]
    metas = [(node.inputs[i]._data.shape, node.inputs[i]._data.dtype) for i in slots]
    for fn in list(post.values()):
        res = fn(tuple(current), tuple(gouts))
        if res is not None:
            current = _replacements(fn, res, current, metas)
    gins = list(gins)
    for i, g in zip(slots, current):
        gins[i] = g
    return tuple(gins)
