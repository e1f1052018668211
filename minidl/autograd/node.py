"""The graph node seen from Python: PyTorch's ``torch.autograd.graph.Node`` interface.

In minidl the node of an op *is* its ``ctx`` (a Function instance, see op_function.py); ``t.grad_fn``
returns it. ``NodeAPI``, a base of Function, gives it PyTorch's node interface:

- ``name()``: ``"MulBackward0"`` for minidl's own ops (PyTorch's names for its built-in nodes),
  ``"CubeBackward"`` for a Function defined elsewhere (PyTorch's name for a custom Function);
- ``next_functions``: one ``(node, output index)`` per Tensor argument of the forward, in order:
  the node that produced it, the leaf's ``AccumulateGrad`` node for a leaf that requires grad,
  ``(None, 0)`` for a tensor that needs no gradient (arguments that are not Tensors have no entry);
- ``metadata``: a dict that is the user's to fill;
- ``register_prehook(fn)``: ``fn(grad_outputs) -> None | tuple`` runs before the backward, after
  the hooks of the node's output tensors; a tuple it returns replaces the gradients;
- ``register_hook(fn)``: ``fn(grad_inputs, grad_outputs) -> None | tuple`` runs after it; a
  tuple it returns replaces the gradients sent to the inputs (one per ``next_functions`` entry).

Hooks live in the node's ``__dict__`` under ``_node_hooks``; the engine looks for that key next to
the tensor hooks' keys (one dict test per node) and runs ``run_prehooks``/``run_posthooks`` only
for a node that has them. Like the rest of a node's state, they are released with its saved
arrays once a backward without ``retain_graph`` has run it (``release``), which keeps only the
graph's structure: ``next_functions`` and ``metadata`` read the same before and after.

A leaf has no Function node; ``AccumulateGrad`` stands for the step that adds its gradient into
``.grad``, as in PyTorch: one per leaf while anything holds it (``accumulate_grad(leaf)``), with
``variable`` the leaf. Its hooks run in the engine's leaf path (engine._deliver): the leaf's
tensor hooks, then the node's pre-hooks (which may replace the gradient), the accumulation, the
post-accumulate-grad hooks, then its post hooks with ``((), (grad,))``.
"""
import abc
import weakref

import numpy as np

from . import op_function, hooks, saved_hooks

_FREED_SAVED = ("Trying to backward through the graph a second time (or directly access saved tensors after "
                "they have already been freed). Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved tensors after calling backward.")


class FreedSavedTensorsError(RuntimeError, AttributeError):
    """Reading what a freed node saved: PyTorch's RuntimeError, which is also an AttributeError
    because the attribute is gone (``hasattr(node, "saved_tensors")`` is False)."""


class Node(abc.ABC):
    """A node of the backward graph: ``isinstance(t.grad_fn, Node)`` holds for every op's node
    and for ``AccumulateGrad``."""

    @abc.abstractmethod
    def name(self):
        """The node's name, e.g. ``"MulBackward0"``."""

    @property
    @abc.abstractmethod
    def next_functions(self):
        """Per input: ``(node, output index)`` its gradient goes to, ``(None, 0)`` when none."""

    @property
    @abc.abstractmethod
    def metadata(self):
        """A dict for the user's own annotations."""

    @abc.abstractmethod
    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after the node ran; returns a RemovableHandle."""

    @abc.abstractmethod
    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before the node runs; returns a RemovableHandle."""


class _NodeHooks:
    """A node's pre-hooks and post hooks, in registration order."""
    __slots__ = ("pre", "post")

    def __init__(self):
        self.pre, self.post = hooks.HookDict(), hooks.HookDict()


class NodeAPI:
    """PyTorch's Node interface on a Function node (see the module docstring)."""

    def name(self):
        cls = type(self)
        return cls.__name__ + ("Backward0" if cls.__module__.startswith("minidl.") else "Backward")

    @property
    def next_functions(self):
        out = []
        for t, e in zip(self.inputs, self.edges):
            if t is None:
                continue                      # not a Tensor argument
            if e is None:
                out.append((None, 0))
            elif e[0] is None:
                out.append((accumulate_grad(t), 0))
            else:
                out.append(e)
        return tuple(out)

    @property
    def metadata(self):
        m = _metadata.get(self)
        if m is None:
            m = _metadata[self] = {}
        return m

    def register_prehook(self, fn):
        return hooks.add(_node_hooks(self).pre, fn)

    def register_hook(self, fn):
        return hooks.add(_node_hooks(self).post, fn)

    def __repr__(self):
        return f"<{self.name()} object at {hex(id(self))}>"

    def __getattr__(self, name):
        """Only reached when ordinary lookup fails: what the forward saved while saved-tensor
        hooks were set (saved_hooks.py), unpacked on each access as in PyTorch; and
        ``saved_tensors`` of a node that saved nothing (``()``) or was freed (an error)."""
        packed = self.__dict__.get("_packed")
        if packed is not None and name in packed:
            return saved_hooks.unpack_value(packed[name])
        if name == "saved_tensors":
            if self.freed:
                raise FreedSavedTensorsError(_FREED_SAVED)
            return ()
        if name.startswith(("_saved_", "_raw_saved_")):
            where = saved_attribute(self, name)
            if where is not None:
                return SavedTensor(self, where) if name.startswith("_raw") else saved_value(self, where)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class _Released:
    """Stands, in a released node's ``inputs``, for a Tensor argument it no longer holds."""
    __slots__ = ()

    def __repr__(self):
        return "<released input>"


_RELEASED = _Released()


def release(node, hooked=True):
    """Free what ``node`` kept for its backward (saved arrays, the input tensors that are not
    leaves, hooks, output metadata) once a backward without ``retain_graph`` has run it. As in
    PyTorch, the graph's structure stays: ``edges`` (so ``next_functions`` still leads to the
    producers), the leaves its gradients went to (their AccumulateGrad nodes) and which outputs
    retain their grad (looked for only where the engine saw hooks, ``hooked``); ``metadata``
    lives outside the node's ``__dict__``. Only a second backward or reading what it saved is an
    error (``freed``). This runs once per node of every backward, so it is kept short."""
    d = node.__dict__
    edges = d.get("edges")
    if edges is None:             # an op's node records its edges only when some input needs grad
        d.clear()
        d["freed"] = True
        return
    inputs = d["inputs"]
    retained = d.get("_retained") if hooked else None     # retains_grad stays True, as in PyTorch
    d.clear()
    # one or two arguments (nearly every op) spelled out
    if len(edges) == 2:
        a, b = inputs
        ea, eb = edges
        kept = (a if a is None or (ea is not None and ea[0] is None) else _RELEASED,
                b if b is None or (eb is not None and eb[0] is None) else _RELEASED)
    elif len(edges) == 1:
        a, ea = inputs[0], edges[0]
        kept = (a if a is None or (ea is not None and ea[0] is None) else _RELEASED,)
    else:
        kept = tuple(t if t is None or (e is not None and e[0] is None) else _RELEASED
                     for t, e in zip(inputs, edges))
    d["edges"] = edges
    d["inputs"] = kept
    d["freed"] = True
    if retained is not None:
        d["_retained"] = retained


# node -> its metadata dict, for as long as the node lives (outside the node's __dict__, which a
# backward clears)
_metadata = weakref.WeakKeyDictionary()


def _node_hooks(node):
    h = node.__dict__.get("_node_hooks")
    if h is None:
        h = node.__dict__["_node_hooks"] = _NodeHooks()
    return h


def _hook_name(fn):
    return getattr(fn, "__name__", type(fn).__name__)


def _wrap_all(grads):
    Tensor = op_function.Tensor
    return tuple(None if g is None else Tensor._wrap(g, None, 0) for g in grads)


def _replacements(fn, res, originals, metas=None):
    """The arrays in the tuple ``res`` a hook returned in place of ``originals`` (PyTorch's checks:
    a tuple, of the same length, of Tensors or None, each of its original's shape and dtype)."""
    Tensor = op_function.Tensor
    if type(res) is not tuple:
        raise TypeError(f"expected tuple, but hook returned '{type(res).__name__}'")
    if len(res) != len(originals):
        raise RuntimeError(f"hook '{_hook_name(fn)}' has returned an incorrect number of values "
                           f"(got {len(res)}, but expected {len(originals)})")
    out = []
    for i, (r, g) in enumerate(zip(res, originals)):
        if r is None:
            out.append(None)
            continue
        if not isinstance(r, Tensor):
            raise TypeError(f"expected Tensor or None, but hook returned '{type(r).__name__}'")
        a = r._data
        shape, dtype = (g.shape, g.dtype) if g is not None else (metas[i] if metas else (a.shape, a.dtype))
        if a.shape != shape:
            raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the size of value: it returned shape "
                               f"{list(a.shape)} for a gradient of shape {list(shape)}")
        if a.dtype != dtype:
            raise RuntimeError(f"hook '{_hook_name(fn)}' has changed the type of value (was {dtype} got {a.dtype})")
        out.append(a)
    return out


def run_prehooks(node_hooks, gouts, metas=None):
    """The node's pre-hooks on its output gradients (a list, None where none arrived); returns
    the list the backward gets."""
    for fn in list(node_hooks.pre.values()):
        res = fn(_wrap_all(gouts))
        if res is not None:
            gouts = _replacements(fn, res, gouts, metas)
    return gouts


def run_posthooks(node, node_hooks, gins, gouts):
    """The node's post hooks: they see one gradient per Tensor argument (None where its input
    needs none) and may replace them; returns the backward's gradients with the replacements."""
    if not node_hooks.post:
        return gins
    slots = [i for i, t in enumerate(node.inputs) if t is not None]
    edges = node.edges
    current = [gins[i] if edges[i] is not None else None for i in slots]
    metas = [(node.inputs[i]._data.shape, node.inputs[i]._data.dtype) for i in slots]
    grad_outputs = _wrap_all(gouts)
    for fn in list(node_hooks.post.values()):
        res = fn(_wrap_all(current), grad_outputs)
        if res is not None:
            current = _replacements(fn, res, current, metas)
    gins = list(gins)
    for i, g in zip(slots, current):
        gins[i] = g
    return tuple(gins)


class AccumulateGrad(Node):
    """The node that adds a leaf's gradient into its ``.grad`` (``variable`` is the leaf)."""

    def __init__(self, variable):
        self.variable = variable
        self._metadata = {}
        self._hooks = None

    def name(self):
        # PyTorch's name, so code that tells nodes apart by name() ports unchanged
        return "torch::autograd::AccumulateGrad"

    @property
    def next_functions(self):
        return ()

    @property
    def metadata(self):
        return self._metadata

    def register_prehook(self, fn):
        return hooks.add(self._leaf_hooks().pre, fn)

    def register_hook(self, fn):
        return hooks.add(self._leaf_hooks().post, fn)

    def _leaf_hooks(self):
        """The node's hooks, found by the engine through a marker among the leaf's tensor hooks
        (which also sends the leaf down the engine's hooked path)."""
        if self._hooks is None:
            self._hooks = _NodeHooks()
            leaf = self.variable
            if leaf._hooks is None:
                leaf._hooks = hooks.HookDict()
            hooks.add(leaf._hooks, _AccumulateGradMarker(self))
        return self._hooks

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


class _AccumulateGradMarker:
    """Stands among a leaf's tensor hooks for its AccumulateGrad node's hooks; the engine runs
    those itself at their place in the order, and skips the marker as a tensor hook."""
    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    def __call__(self, grad):
        return None


def leaf_node_hooks(leaf_hooks):
    """The AccumulateGrad hooks among a leaf's tensor hooks, or None."""
    for fn in leaf_hooks.values():
        if type(fn) is _AccumulateGradMarker:
            return fn.node._hooks
    return None


# id(leaf) -> its AccumulateGrad while something holds the node (the node holds the leaf, so the
# id cannot be reused meanwhile)
_accumulators = weakref.WeakValueDictionary()


def accumulate_grad(leaf):
    """The AccumulateGrad node of ``leaf`` (the same object while any reference to it lives)."""
    node = _accumulators.get(id(leaf))
    if node is None or node.variable is not leaf:
        node = _accumulators[id(leaf)] = AccumulateGrad(leaf)
    return node


# PyTorch's ``_saved_<name>`` attributes of a node, per op: Function class name -> {name: where its
# value is}. ("input", i, slot, number): forward argument i, present when saved_tensors[slot] is not
# None: its Tensor from node.inputs (the very object, as PyTorch), or for a Python number that number
# (``number``: as it is, e.g. PowBackward0's exponent; else a 0-d tensor, as PyTorch's wrapped
# numbers). ("output", slot): the output array the forward saved at that slot, as a Tensor.
_SELF, _OTHER = ("input", 0, 0, False), ("input", 1, 1, False)
_RESULT = {"result": ("output", 0)}
SAVED_ATTRIBUTES = {
    "Exp": _RESULT, "Sigmoid": _RESULT, "Tanh": _RESULT, "Sqrt": _RESULT,
    "Log": {"self": _SELF}, "Sin": {"self": _SELF}, "Cos": {"self": _SELF},
    "Mul": {"self": _SELF, "other": _OTHER}, "Div": {"self": _SELF, "other": _OTHER},
    "Pow": {"self": ("input", 0, 0, True), "exponent": ("input", 1, 1, True), "result": ("output", 2)},
    "MatMul": {"self": _SELF, "other": _OTHER, "mat2": _OTHER},
    "Linear": {"input": _SELF, "weight": _OTHER},
}


def saved_attribute(node, name):
    """Where ``name`` (``_saved_x`` or ``_raw_saved_x``) of ``node`` is found, or None."""
    cls = type(node)
    table = SAVED_ATTRIBUTES.get(cls.__name__) if cls.__module__.startswith("minidl.") else None
    if table is None:
        return None
    return table.get(name[len("_raw_saved_"):] if name.startswith("_raw") else name[len("_saved_"):])


def _saved_slot(node, slot):
    """What the node keeps at ``saved_tensors[slot]``: an array, a number or None, or a
    saved_hooks entry when it went through a pack hook."""
    packed = node.__dict__.get("_packed")
    if packed is not None and "saved_tensors" in packed:
        return packed["saved_tensors"].items[slot]
    saved = node.__dict__.get("saved_tensors", ())
    return saved[slot] if slot < len(saved) else None


def saved_value(node, where):
    """The value of a ``_saved_*`` attribute: the input Tensor, the output as a Tensor (its grad_fn
    the node, as PyTorch's), a number, or None where the forward kept nothing for it; what the
    unpack hook returns where it went through saved-tensor hooks."""
    if node.freed:
        raise FreedSavedTensorsError(_FREED_SAVED)
    Tensor = op_function.Tensor
    value = _saved_slot(node, where[-1] if where[0] == "output" else where[2])
    if value is None:
        return None
    if type(value) is saved_hooks._Saved:
        return value.unpack(value.packed)
    if where[0] == "output":
        return Tensor._wrap(value, node, 0)
    t = node.inputs[where[1]]
    if t is not None:
        return t
    return value if where[3] else Tensor._wrap(np.asarray(value), None, 0)


_FREED_RAW = ("Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values of the "
              "graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need "
              "to backward through the graph a second time or if you need to access saved variables after calling "
              "backward.")


class SavedTensor:
    """One tensor a node saved (``node._raw_saved_x``): ``register_hooks(pack_hook, unpack_hook)``
    sends it through a pack/unpack pair of its own, as the ``saved_tensors_hooks`` context does for
    every op in it: ``pack_hook`` gets the tensor now and the node keeps what it returns; the
    backward (and ``_saved_x``) get ``unpack_hook(packed)``. One pair per saved tensor."""
    __slots__ = ("_node", "_where")

    def __init__(self, node, where):
        self._node, self._where = node, where

    def register_hooks(self, pack_hook, unpack_hook):
        for what, fn in (("pack_hook", pack_hook), ("unpack_hook", unpack_hook)):
            if not callable(fn):
                raise TypeError(f"register_hooks(): {what} must be callable, got {type(fn).__name__}")
        node, where = self._node, self._where
        if node.freed:
            raise RuntimeError(_FREED_RAW)
        slot = where[-1] if where[0] == "output" else where[2]
        value = _saved_slot(node, slot)
        if type(value) is saved_hooks._Saved:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. "
                               "Hint: only one pair of hooks is allowed at a time.")
        if value is None or not saved_hooks._is_array(value):
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is forbidden")
        Tensor = op_function.Tensor
        t = node.inputs[where[1]] if where[0] == "input" else None
        if t is None or t._data is not value:
            t = Tensor._wrap(value, None, 0)
        d = node.__dict__
        packed = d.get("_packed")
        if packed is not None and "saved_tensors" in packed:
            items = packed["saved_tensors"].items
        else:
            items = list(d["saved_tensors"])
        items[slot] = saved_hooks._Saved(pack_hook(t), unpack_hook, value)
        if packed is None:
            packed = d["_packed"] = {}
        packed["saved_tensors"] = saved_hooks._SavedSequence(tuple, items)
        d.pop("saved_tensors", None)
