"""The public ``minidl.autograd.Function``: a user's op written on Tensors, as ``torch.autograd.Function``.

minidl's own ops subclass the array-level base (op_function.py), whose forward and backward run on
NumPy arrays. A user's op is written in PyTorch's idiom instead, and this class runs it unchanged::

    class GradReverse(Function):
        @staticmethod
        def forward(ctx, x, alpha):          # the very Tensor arguments, grad mode off
            ctx.alpha = alpha
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):                # Tensors in, Tensors (or None) out
            return g.neg() * ctx.alpha, None

    y = GradReverse.apply(x, 0.5)            # y.grad_fn.name() == "GradReverseBackward"

How it sits on the array-level machinery: each subclass gets, as in PyTorch, a node class of its own,
``<Name>Backward`` (a subclass of ``CustomNode``, itself an array-level Function, so the engine, the
hooks, ``next_functions`` and ``release`` treat it as any op's node; ``CustomNode`` is PyTorch's
``BackwardCFunction``, and also a ``FunctionCtx``). ``apply`` builds one such node as ``ctx``, runs
the user's forward on the Tensors with grad mode off, and gives the outputs the node as their history.
The engine calls the node's array-level ``backward``, which wraps the gradients in Tensors, calls
the user's backward (grad mode off, nothing recorded) and hands the arrays back. The
pass of ``create_graph=True`` (higher_order.py) calls the node's ``differentiable_backward`` instead:
the same user backward on Tensors with grad mode on, reading the saved Tensors themselves, so a
backward written with minidl's ops yields gradients that can be differentiated again.

What the forward keeps: ``ctx.save_for_backward(*tensors)`` keeps Tensors (inputs, outputs or
intermediates; None allowed). An input or intermediate is kept as the Tensor itself; an output is
kept as its array and version counter, and read back as a new Tensor over them whose history is this
node (PyTorch keeps no reference from a node to its outputs either, so no cycle). Each entry notes
the version of its memory when the forward ended; reading ``ctx.saved_tensors`` after an in-place
write to it raises PyTorch's error. Under ``saved_tensors_hooks`` the entries go through the pack hook
when the forward ends and through unpack on each read, and, as in PyTorch, are not version-checked.

Forward may also return NumPy arrays (they are wrapped), so a Function written on arrays in
minidl's older idiom still runs where its arithmetic works on Tensors too; values that are neither
Tensors nor arrays pass through as non-differentiable outputs, as in PyTorch.

What backward returns is checked as PyTorch checks it: one gradient per forward argument (extra
trailing Nones are dropped), each a Tensor (an array too, in the older idiom) or None, and None
for an argument that is not a Tensor. For an input that needs a gradient, a gradient of another
shape is summed down to the input's shape when the input's shape expands to it (a backward that
returns per-sample gradients of shape (B, *s) for an input of shape s gets their sum: the adjoint
of the expand) and is an error otherwise; a complex gradient for a real input, or an integer one
for a complex input, is an error too. The engine then casts each gradient to its input's dtype, as
for every op.
"""
import functools
import inspect
import warnings

import numpy as np

from . import anomaly_mode, op_function as _op_function, grad_mode, saved_hooks, versions, views
from .op_function import Function as _ArrayFunction
from .node import _FREED_SAVED, FreedSavedTensorsError
from .. import backends

_LEAF = (None, 0)
_MODIFIED_HINT = ("Hint: enable anomaly detection to find the operation that failed to compute its gradient, "
                  "with minidl.autograd.set_detect_anomaly(True).")


class _SavedEntry:
    """One tensor ``save_for_backward`` kept (see the module docstring)."""
    __slots__ = ("tensor", "data", "counter", "version", "output", "differentiable", "history", "packed",
                 "unpack")

    def __init__(self, t, output_index, differentiable):
        self.output = output_index                 # None: an input or an intermediate, kept as it is
        self.tensor = t if output_index is None else None
        self.data, self.counter = t._data, t._version_counter
        self.version = t._version_counter.value
        self.differentiable = differentiable
        self.unpack = None

    def as_tensor(self, node):
        if self.output is None:
            return self.tensor
        t = _op_function.Tensor._wrap(self.data, node if self.differentiable else None, self.output)
        t._version_counter = self.counter
        return t

    def pack(self, pack_hook, unpack_hook):
        """Through saved_tensors_hooks: keep what pack returns, and the history to give back."""
        t = self.tensor
        self.history = None if t is None or t._node is None else (t._node, t._out_index)
        self.packed, self.unpack = pack_hook(t), unpack_hook
        self.tensor = self.data = None             # the hooks own what is stored

    def get(self, node):
        if self.unpack is not None:
            return self._unpacked(node)
        now = self.counter.value
        if now != self.version:
            t = self.tensor
            where = ""
            if t is not None and t._node is not None:
                where = f", which is output {t._out_index} of {_short_name(t._node)},"
            elif t is None:
                where = f", which is output {self.output} of {_short_name(node)},"
            raise versions.modified_error(
                f"[{versions._describe(self.data.shape, self.data.dtype, type(self.data))}]{where}", now,
                self.version, ". " + _MODIFIED_HINT)
        return self.as_tensor(node)

    def _unpacked(self, node):
        """unpack's Tensor, given the saved tensor's history as PyTorch does: an output's is this
        node, a non-leaf input's the node that made it (a leaf's comes back as unpack returns it)."""
        Tensor = _op_function.Tensor
        out = saved_hooks.unpacked(self.unpack, self.packed)
        if self.output is not None:
            return Tensor._wrap(out._data, node if self.differentiable else None, self.output)
        if self.history is not None:
            return Tensor._wrap(out._data, *self.history)
        return out


def _short_name(node):
    name = node.name()
    for suffix in ("Backward0", "Backward"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


class FunctionCtx:
    """What ``ctx`` offers a Function's forward (or setup_context), as PyTorch's ``FunctionCtx``: the
    ctx of a call is its node (CustomNode below), and ``Function`` inherits these too, as there."""
    _materialize = True         # the user's set_materialize_grads

    def save_for_backward(self, *tensors):
        Tensor = _op_function.Tensor
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of type "
                                f"{type(t).__name__}")
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        """Tensors kept for a forward-mode ``jvp`` (as ``saved_for_forward``, PyTorch's name)."""
        Tensor = _op_function.Tensor
        if not all(t is None or isinstance(t, Tensor) for t in tensors):
            raise AssertionError("save_for_forward expects all arguments to be tensors; you should save "
                                 "non-tensors as attributes on ctx.")
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors):
        """The inputs among ``tensors`` were modified in place by forward (and are returned)."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = tuple(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        """With False, backward gets None (not zeros) for an output no gradient reached."""
        self._materialize = bool(value)

    def mark_shared_storage(self, *pairs):
        """Nothing to do: a view shares its base's version counter by itself (PyTorch deprecates it)."""
        warnings.warn("`mark_shared_storage` is deprecated. Tensors with shared storages are automatically "
                      "tracked. Note that calls to `set_()` are not tracked", FutureWarning, stacklevel=2)


class CustomNode(FunctionCtx, _ArrayFunction):
    """The node (and ``ctx``) of a call of a Tensor-level Function: PyTorch's ``BackwardCFunction``.
    Each Function subclass has its own subclass of this, ``<Name>Backward``, with ``_forward_cls`` the
    user's class."""
    _forward_cls = None
    materialize_grads = False   # the engine leaves None for outputs no gradient reached: see _gradients_in
    _out_meta = ()              # per output: (shape, dtype) of a Tensor output, None for another value

    def name(self):
        return self._forward_cls.__name__ + "Backward"

    def apply(self, *grads):
        """The user's backward on this node, called directly (no checks, nothing recorded by the engine),
        as PyTorch's ``grad_fn.apply``."""
        return self._forward_cls.backward(self, *grads)

    @property
    def saved_tensors(self):
        """The Tensors save_for_backward kept, read back (and checked) now."""
        d = self.__dict__
        if self.freed:
            raise FreedSavedTensorsError(_FREED_SAVED)
        saved = d.get("_saved")
        if saved is None:
            return tuple(d.get("_to_save", ()))       # inside forward, before apply has taken them
        return tuple(None if e is None else e.get(self) for e in saved)

    # the two backward passes ---------------------------------------------------------------------
    @staticmethod
    def backward(ctx, *grads):
        """The engine's call: output gradients as arrays in, input gradients as arrays out."""
        Tensor = _op_function.Tensor
        grads = _gradients_in(ctx, [None if g is None else Tensor._wrap(g, None, 0) for g in grads])
        out = _gradients_out(ctx, ctx._forward_cls.backward(ctx, *grads))
        kept = None
        result = []
        for g in out:
            if isinstance(g, Tensor):
                g = g._data
                if kept is None:      # an input's or a saved tensor's memory must not become a .grad
                    kept = _kept_arrays(ctx)
                if id(g) in kept:
                    g = g.copy()
            result.append(g)
        return tuple(result)

    @staticmethod
    def differentiable_backward(ctx, inputs, *grads):
        """The create_graph pass's call (grad mode on): the user's backward on Tensors, recorded."""
        Tensor = _op_function.Tensor
        grads = _gradients_in(ctx, list(grads))
        out = _gradients_out(ctx, ctx._forward_cls.backward(ctx, *grads))
        return tuple(g if g is None or isinstance(g, Tensor) else Tensor._wrap(g, None, 0) for g in out)


def _gradients_in(ctx, grads):
    """The output gradients backward gets: zeros where none reached a Tensor output (unless
    set_materialize_grads(False)), None for outputs that are not Tensors."""
    meta = ctx._out_meta
    if ctx._materialize and any(g is None for g, m in zip(grads, meta) if m is not None):
        Tensor = _op_function.Tensor
        like = next(g for g in grads if g is not None)
        xp = backends.namespace_of(like._data)
        grads = [Tensor._wrap(xp.zeros(m[0], m[1]), None, 0) if g is None and m is not None else g
                 for g, m in zip(grads, meta)]
    return grads


def _gradients_out(ctx, out):
    """backward's result as one gradient per positional forward argument, checked and fitted to the
    inputs as PyTorch does (see the module docstring)."""
    if type(out) is not tuple:
        out = (out,)
    needs = ctx.needs_input_grad
    n = len(needs)
    if len(out) > n and all(g is None for g in out[n:]):
        out = out[:n]
    if len(out) != n:
        raise RuntimeError(f"function {ctx.name()} returned an incorrect number of gradients (expected {n}, "
                           f"got {len(out)})")
    Tensor = _op_function.Tensor
    fitted = None
    for i, (t, g) in enumerate(zip(ctx.inputs, out)):
        if g is None:
            continue
        if t is None:
            raise RuntimeError(f"function {ctx.name()} returned a gradient different than None at position {i + 1}, "
                               "but the corresponding forward input was not a Variable")
        if not isinstance(g, Tensor) and not _is_array(g):
            raise RuntimeError(f"function {ctx.name()} returned an invalid gradient at position {i + 1}: expected "
                               f"Variable or None (got {type(g).__name__})")
        if needs[i]:
            f = _fit_gradient(ctx, i, t, g)
            if f is not g:
                fitted = fitted or list(out)
                fitted[i] = f
    return out if fitted is None else tuple(fitted)


def _fit_gradient(ctx, i, t, g):
    """The gradient ``g`` of input ``t`` (forward argument i), as PyTorch's engine takes it: of t's
    shape, summed down to it when t's shape expands to g's (sum_to_size, recorded on the create_graph
    pass), or an error; of a kind (real or complex) that a cast to t's dtype keeps meaningful."""
    shape, got = tuple(t.shape), tuple(g.shape)
    if got != shape:
        try:
            expands = np.broadcast_shapes(shape, got) == got
        except ValueError:
            expands = False
        if not expands:
            raise RuntimeError(f"Function {ctx.name()} returned an invalid gradient at index {i} - got {list(got)} "
                               f"but expected shape compatible with {list(shape)}")
        if not isinstance(g, _op_function.Tensor):
            g = _op_function.Tensor._wrap(g, None, 0)
        g = g.sum_to_size(shape)
    kind = (g._data if isinstance(g, _op_function.Tensor) else g).dtype.kind
    complex_input = t._data.dtype.kind == "c"
    if kind not in "fV" and (kind == "c") != complex_input:
        expected = "a floating point or complex dtype" if complex_input else "a real dtype"
        raise RuntimeError(f"Function {ctx.name()} returned an invalid gradient at index {i} - got dtype "
                           f"{(g._data if isinstance(g, _op_function.Tensor) else g).dtype} but expected {expected} "
                           f"for an input of dtype {t._data.dtype}")
    return g


def _kept_arrays(ctx):
    """The ids of the arrays of the node's input Tensors and of what it saved."""
    ids = {id(t._data) for t in ctx.inputs if t is not None and hasattr(t, "_data")}
    for e in ctx.__dict__.get("_saved") or ():
        if e is not None:
            ids.add(id(e.data))
    return ids


class FunctionMeta(type):
    """The class of every Function, as PyTorch's: on each subclass it maps the other spellings (a
    backward named ``vjp``; a forward without ctx plus setup_context) onto what apply calls, and
    makes the subclass's node class, ``<Name>Backward``."""

    def __init__(cls, name, bases, attrs, **kwargs):
        super().__init__(name, bases, attrs, **kwargs)
        if not any(isinstance(b, FunctionMeta) for b in bases):
            return                      # Function itself
        _op_function.alias_vjp(cls)
        cls._setup_style = cls.setup_context is not Function.setup_context
        cls._signature = None
        node = name + "Backward"
        cls._backward_cls = type(node, (CustomNode,), {"_forward_cls": cls, "__module__": cls.__module__,
                                                        "__qualname__": node,
                                                        # its own, for higher_order.py's lookup
                                                        "differentiable_backward":
                                                            CustomNode.__dict__["differentiable_backward"]})


class Function(FunctionCtx, metaclass=FunctionMeta):
    """Subclass with static ``forward`` and ``backward`` (or ``vjp``), or a ``forward`` without ctx
    plus ``setup_context(ctx, inputs, output)``; call ``apply``. See the module docstring."""
    _backward_cls = CustomNode
    _setup_style = False

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions are all static, "
                      "so you should invoke them on the class itself. Instantiating an autograd function will "
                      "raise an error in a future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                           "new-style autograd function with static forward method: call the class's apply.")

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    # what a subclass that defines neither says, as the array-level base says it
    setup_context = staticmethod(_ArrayFunction.setup_context)
    backward = vjp = staticmethod(_ArrayFunction.backward)

    @classmethod
    def apply(cls, *args, **kwargs):
        if kwargs or cls._setup_style:
            args, kwargs = _bind(cls, args, kwargs)
        Tensor = _op_function.Tensor
        state = grad_mode._state
        record = state.enabled
        tensors, needs, edges = [], [], []
        any_needs = False
        for a in args:
            if isinstance(a, Tensor):
                views.current(a)
                n = record and a._requires_grad
                tensors.append(a)
                needs.append(n)
                edges.append(None if not n else _LEAF if a._node is None else (a._node, a._out_index))
                any_needs = any_needs or n
            else:
                tensors.append(None)
                needs.append(False)
                edges.append(None)
        ctx = cls._backward_cls.__new__(cls._backward_cls)
        ctx.needs_input_grad = tuple(needs)
        if _op_function._anomaly and any_needs:
            anomaly_mode.record(ctx)
        state.enabled = False
        try:
            if cls._setup_style:
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        finally:
            state.enabled = record
        node = ctx if any_needs else None
        outs = _outputs(ctx, node, out if type(out) is tuple else (out,), tensors)
        if any_needs:
            ctx.inputs, ctx.edges = tuple(tensors), tuple(edges)
        _keep_saved(ctx, outs)
        return outs if type(out) is tuple else outs[0]


def _bind(cls, args, kwargs):
    """Keyword arguments bound to forward's parameters, as PyTorch's apply does; the setup_context
    style also fills in defaults (its ``inputs`` holds every argument)."""
    sig = cls.__dict__.get("_signature")
    if sig is None:
        sig = inspect.signature(cls.forward)
        if not cls._setup_style:
            params = list(sig.parameters.values())[1:]       # without ctx
            sig = sig.replace(parameters=params)
        cls._signature = sig
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{cls.__name__}.apply: {e}") from None
    if cls._setup_style:
        bound.apply_defaults()
    return bound.args, bound.kwargs


def _is_array(a):
    """An array of some device (NumPy's on the CPU), not a NumPy scalar."""
    return any(isinstance(a, b.array_type) for b in backends._BACKENDS.values())


def _outputs(ctx, node, raw, tensors):
    """The Tensors apply returns, with ``node`` (None when no input needs grad) as their history."""
    Tensor = _op_function.Tensor
    d = ctx.__dict__
    dirty = d.get("_dirty", ())
    nondiff = d.get("non_differentiable", ())
    inputs = {id(t) for t in tensors if t is not None}
    outs, meta, returned = [], [], set()
    for i, o in enumerate(raw):
        if _is_array(o):
            o = Tensor._wrap(o, None, 0)
        if not isinstance(o, Tensor):
            outs.append(o)          # not a Tensor: passed through, no gradient
            meta.append(None)
            continue
        differentiable = node is not None and id(raw[i]) not in nondiff
        if any(o is t for t in dirty):
            r = _dirty_output(o, node if differentiable else None, i)
        elif id(o) in inputs or id(o) in returned or o._node is not None or o._requires_grad:
            r = Tensor._wrap(o._data, node if differentiable else None, i)   # an alias of it, as PyTorch
            r._version_counter = o._version_counter
            if grad_mode._state.enabled:           # a differentiable view, as views.py describes
                r._base = o if o._base is None else o._base
                r._view_version = o._version_counter.value
        else:                       # a fresh result of the forward: it takes the history itself
            r = o
            r._node, r._out_index = (node, i) if differentiable else (None, 0)
            r._requires_grad = differentiable and (o._data.dtype.kind == "f" or o._data.dtype.kind == "V")
            if differentiable:
                _op_function._share_counters((r,), tensors)    # a view of an input: in its view family
        returned.add(id(o))
        outs.append(r)
        meta.append((o._data.shape, o._data.dtype))
    for t in dirty:
        if id(t) not in returned:
            raise RuntimeError("Some elements marked as dirty during the forward method were not returned as output. "
                               "The inputs that are modified inplace must all be outputs of the Function.")
    ctx.n_outputs = len(raw)
    ctx._out_meta = meta
    ctx.output_meta = [m if m is not None else ((), np.dtype(np.float32)) for m in meta]
    return tuple(outs)


def _dirty_output(t, node, i):
    """An input forward modified in place (mark_dirty): its version moves, and with ``node`` its
    history becomes the node (through CopySlices on its base when it is a view), as PyTorch's."""
    if node is not None:
        base = t._base
        if t._requires_grad and t._node is None:
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
        if base is not None and base._requires_grad and base._node is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    versions.bump(t._version_counter)
    if node is None:
        return t
    old_node, old_index = t._node, t._out_index
    if t._base is not None:
        result = _op_function.Tensor._wrap(t._data, node, i)
        pos = views.write_through_view(t, result)
        views.adopt_view_history(t, pos)
    else:
        t._node, t._out_index, t._requires_grad = node, i, True
        if old_node is not None:
            views.move_retained(t, old_node, old_index)
    return t


def _keep_saved(ctx, outs):
    """Turn what save_for_backward was given into the node's entries (module docstring)."""
    d = ctx.__dict__
    to_save = d.pop("_to_save", None)
    if to_save is None:
        return
    by_id = {id(o): i for i, o in enumerate(outs) if isinstance(o, _op_function.Tensor)}
    entries = []
    for t in to_save:
        if t is None:
            entries.append(None)
            continue
        i = by_id.get(id(t))
        entries.append(_SavedEntry(t, i, i is not None and t._node is not None))
    s = saved_hooks.state
    if s.stack and not s.packing:
        pack, unpack = s.stack[-1]
        s.packing = True
        try:
            for e, t in zip(entries, to_save):
                if e is not None:
                    e.tensor = t                # the very tensor saved (an output too), as PyTorch packs it
                    e.pack(pack, unpack)
        finally:
            s.packing = False
    d["_saved"] = entries


class DelayedError(_ArrayFunction):
    """Stands after the gradients of a ``once_differentiable`` backward computed while a graph is
    recorded: the values pass unchanged, and differentiating through them raises PyTorch's error."""
    message = "trying to differentiate twice a function that was marked with @once_differentiable"

    def name(self):
        return "torch::autograd::Error"      # PyTorch's name for this node, as AccumulateGrad's

    @staticmethod
    def forward(ctx, *arrays):
        return arrays if len(arrays) > 1 else arrays[0]

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(DelayedError.message)

    @staticmethod
    def differentiable_backward(ctx, inputs, *grads):
        raise RuntimeError(DelayedError.message)


def once_differentiable(fn):
    """PyTorch's decorator for a backward that is not itself differentiable: it runs with grad mode
    off, and where the create_graph pass called it with gradients that require grad, its results
    come back through ``DelayedError``, so a second differentiation raises instead of silently
    missing this op's second derivative. (An array-level Function's backward runs on arrays with
    grad mode off in any case, so there it changes nothing.)"""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with grad_mode.no_grad():
            outputs = fn(ctx, *args)
        if not grad_mode.is_grad_enabled():
            return outputs
        Tensor = _op_function.Tensor
        if not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return outputs
        single = type(outputs) is not tuple
        items = list((outputs,) if single else outputs)
        slots = []
        for k, g in enumerate(items):
            data = g._data if isinstance(g, Tensor) else g if _is_array(g) else None
            if data is not None and (data.dtype.kind == "f" or data.dtype.kind == "V"):
                leaf = Tensor._wrap(data, None, 0)
                leaf._requires_grad = True
                items[k] = leaf
                slots.append(k)
        if slots:
            delayed = DelayedError.apply(*(items[k] for k in slots))
            for k, t in zip(slots, delayed if len(slots) > 1 else (delayed,)):
                items[k] = t
        return items[0] if single else tuple(items)
    return wrapper


BackwardCFunction = CustomNode     # PyTorch's name for the base of the node classes
