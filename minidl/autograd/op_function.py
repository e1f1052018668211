"""Function: one differentiable op, with its forward and its backward written by hand on arrays.

This is the array-level base every op of minidl subclasses. The public ``minidl.autograd.Function``,
which a user subclasses in PyTorch's idiom (forward and backward on Tensors), is built on it in
custom_function.py. An op subclasses this one with two static methods::

    class Cube(Function):
        @staticmethod
        def forward(ctx, x):             # x is the tensor's array (NumPy on the CPU)
            ctx.save_for_backward(x)
            return x ** 3
        @staticmethod
        def backward(ctx, grad):          # dL/dy in, dL/dx out, as arrays
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * grad

    y = Cube.apply(t)

Forward and backward see *arrays*, not Tensors: an op is defined in the array language
(NumPy), and the Tensor layer around it only records the graph.
Arguments that are not Tensors (dims, flags, Python numbers) reach forward unchanged and
get ``None`` as their gradient. backward returns one gradient per forward argument (a
single value when forward took one argument); ``None`` means "no gradient". For gradients of
gradients (``create_graph=True``) a class also defines ``differentiable_backward(ctx, inputs,
*grads)``, the same formula in Tensor operations, which higher_order.py's pass records.

The ``ctx`` object *is* the graph node: ``apply`` records on it the input tensors and, per
input, the edge ``(node, output index)`` its gradient flows to (or None where no gradient is
needed); the engine later calls ``backward(ctx, ...)`` and then frees what the node saved.
Edges are taken when the node is built because an in-place op later gives its tensor a new
history, while this node must still send its gradient to the tensor's old one.

The node is also what ``t.grad_fn`` returns, and answers PyTorch's ``torch.autograd.graph.Node``
interface (``name()``, ``next_functions``, ``metadata``, ``register_hook``, ``register_prehook``:
``NodeAPI`` in node.py). While saved-tensor hooks are set in some thread (saved_hooks.py), apply is
wrapped so that what each recorded node keeps goes through the pack hook; as for autocast, the
wrapper is installed only then, and ops pay nothing for either otherwise.

``apply`` also keeps the promises of the version counters (``versions.py``): an output
that lives in an input's memory (a view) shares that input's counter, a recorded node notes
the versions of its input and output tensors, and an input that is a view of a tensor
written in place since the view was made first takes that tensor's new history
(``views.py``).
"""
import numpy as np

from . import anomaly_mode, autocast_state, grad_mode, saved_hooks, versions, views
from .node import Node, NodeAPI

_ndarray = np.ndarray
# The Tensor class. The tensor module imports autograd, so autograd cannot import it back:
# minidl/tensor/tensor.py hands the class over once, right after defining it
# (register_tensor_type), and every part of autograd and the ops that needs the type reads
# it here. A plain module global keeps Function.apply's lookup free of any call.
Tensor = None
_LEAF = (None, 0)   # the edge to a leaf: the engine finds the leaf itself in ctx.inputs
_autocast = autocast_state.state          # per thread: .on is False unless autocast is enabled
_autocast_rules = autocast_state.RULES    # the ops autocast casts the arguments of (minidl/amp/policy.py)
_anomaly = False    # anomaly detection on: each node records its forward's stack (anomaly_mode.py)


def alias_vjp(cls):
    """PyTorch's two names for a Function's backward: a class defines one of ``backward`` and
    ``vjp``, and the other becomes its alias."""
    d = cls.__dict__
    if "vjp" in d:
        if "backward" in d:
            raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is not allowed. "
                               "You should only implement one of them.")
        cls.backward = d["vjp"]
    elif "backward" in d:
        cls.vjp = d["backward"]


class Function(NodeAPI):
    # set on each node by apply
    inputs = ()             # the forward arguments that are Tensors (None elsewhere)
    edges = ()              # per forward argument: (node, output index) its gradient goes to, or None
    needs_input_grad = ()   # per forward argument: does it need a gradient?
    _saved_versions = None  # what versions.check compares before backward
    n_outputs = 1
    freed = False
    materialize_grads = True    # zeros for the outputs no gradient reached (set_materialize_grads)

    def __init_subclass__(cls, **kwargs):
        """PyTorch's two other ways of writing a Function, mapped onto forward(ctx, ...) and
        backward: a backward named ``vjp`` (its alias), and a ``forward`` without ctx together
        with ``setup_context(ctx, inputs, output)``, which apply calls right after it (with the
        forward's arguments and result, arrays here as everywhere in a Function)."""
        super().__init_subclass__(**kwargs)
        alias_vjp(cls)
        d = cls.__dict__
        if "setup_context" in d or ("forward" in d and cls.setup_context is not Function.setup_context):
            plain = d["forward"].__func__ if "forward" in d else cls._forward_without_ctx
            setup = cls.setup_context

            def forward(ctx, *args):
                out = plain(*args)
                setup(ctx, args, out)
                return out
            cls._forward_without_ctx = staticmethod(plain)
            cls.forward = staticmethod(forward)

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    # ctx helpers, named as in PyTorch
    def save_for_backward(self, *arrays):
        self.saved_tensors = arrays

    def set_materialize_grads(self, value):
        """With False, backward gets None (not zeros) for an output no gradient reached."""
        self.materialize_grads = bool(value)

    def mark_non_differentiable(self, *arrays):
        """The outputs among ``arrays`` (an index, a mask) come out not requiring grad, as in
        PyTorch; backward still takes one gradient per output and gets zeros for these."""
        self.non_differentiable = tuple(id(a) for a in arrays)

    @classmethod
    def apply(cls, *args):
        record = grad_mode._state.enabled
        arrays, tensors, needs, edges, seen = [], [], [], [], []
        any_needs = False
        array_type = None   # all Tensor arguments must live on one device: same array type
        for a in args:
            if isinstance(a, Tensor):
                if a._base is not None and a._view_version != a._version_counter.value:
                    views.refresh(a)    # a view whose base was written in place since
                data = a._data
                if array_type is None:
                    array_type = type(data)
                elif type(data) is not array_type:
                    _check_same_device(cls, args)
                arrays.append(data)
                tensors.append(a)
                seen.append(a._version_counter.value)
                n = record and a._requires_grad
                needs.append(n)
                edges.append(None if not n else _LEAF if a._node is None else (a._node, a._out_index))
                any_needs = any_needs or n
            else:
                arrays.append(a)
                tensors.append(None)
                seen.append(None)
                needs.append(False)
                edges.append(None)

        ctx = cls.__new__(cls)
        ctx.needs_input_grad = tuple(needs)
        if _anomaly and any_needs:
            anomaly_mode.record(ctx)
        out = cls.forward(ctx, *arrays)

        node = ctx if any_needs else None
        if isinstance(out, tuple):
            outs = tuple(Tensor._wrap(o, node, i) for i, o in enumerate(out))
            if node is not None and "non_differentiable" in ctx.__dict__:
                for o, a in zip(outs, out):
                    if id(a) in ctx.non_differentiable:
                        o._node, o._requires_grad = None, False
            ctx.n_outputs = len(out)
            ctx.output_meta = [(o.shape, o.dtype) for o in outs]
            _share_counters(outs, tensors)
            if any_needs:
                ctx.inputs, ctx.edges = tuple(tensors), tuple(edges)
                versions.snapshot(ctx, seen, outs)
            return outs

        if node is not None and "non_differentiable" in ctx.__dict__ and id(out) in ctx.non_differentiable:
            node = None
        o = Tensor._wrap(out, node, 0)
        data = o._data
        if type(data) is _ndarray and data.base is None:
            # owns its memory: a fresh result (the common case) or an input passed through
            for t in tensors:
                if t is not None and t._data is data:
                    _view_of(o, t)
                    break
            if any_needs:              # versions.snapshot, spelled out for the common case
                ctx.inputs, ctx.edges = tuple(tensors), tuple(edges)
                c = o._version_counter
                ctx._saved_versions = (versions._writes[0], seen, [(c, c.value, id(data))])
        else:
            _share_counters((o,), tensors)
            if any_needs:
                ctx.inputs, ctx.edges = tuple(tensors), tuple(edges)
                versions.snapshot(ctx, seen, (o,))
        return o


def keeps_fresh_grad(ctx, i):
    """Will the gradient ``ctx``'s backward returns for forward argument i become, as it is, the
    ``.grad`` of a leaf that has none yet? The engine keeps a fresh array there uncopied, but
    copies one it has already given to another leaf (no two ``.grad`` arrays share memory). An op
    that returns one array for two such arguments can instead write the second copy itself, in
    the pass that computes the first."""
    e = ctx.edges[i]
    return e is not None and e[0] is None and ctx.inputs[i]._grad is None


_plain_apply = Function.__dict__["apply"].__func__


def _apply_under_autocast(cls, *args):
    """Function.apply while autocast is enabled in some thread: in a thread where it is on, an op
    with an autocast rule goes to the policy (minidl/amp/policy.py), which casts its arguments
    and comes back to the plain apply; everything else goes straight there."""
    if _autocast.on and cls in _autocast_rules:
        return autocast_state.run(cls, args)
    return _plain_apply(cls, *args)


_seams = {"autocast": False, "saved_hooks": False}
_inner_apply = _plain_apply     # the apply _apply_with_saved_hooks wraps


def _apply_with_saved_hooks(cls, *args):
    """Function.apply while saved-tensor hooks are set in some thread: in a thread where they
    are, what the recorded node keeps goes through the innermost pack hook (saved_hooks.py)."""
    out = _inner_apply(cls, *args)
    s = saved_hooks.state
    if s.stack and not s.packing:
        saved_hooks.pack_outputs(out)
    return out


def _install(seam, on):
    """Give Function the apply each seam needs: the one that checks for autocast while some
    thread has it enabled, wrapped in the one that packs saved arrays while some thread has
    saved-tensor hooks set; the plain apply while neither is, so ops pay nothing for them."""
    global _inner_apply
    _seams[seam] = on
    _inner_apply = _apply_under_autocast if _seams["autocast"] else _plain_apply
    Function.apply = classmethod(_apply_with_saved_hooks if _seams["saved_hooks"] else _inner_apply)
    if _seams.get("profiler"):       # outermost: a profiler times the op with all the other seams in it
        _timed[0] = Function.__dict__["apply"].__func__
        Function.apply = classmethod(_apply_timed)


def _install_seam(on):
    _install("autocast", on)


def _install_saved_hooks_seam(on):
    _install("saved_hooks", on)


_timed = [_plain_apply]     # the apply a profiler times: whatever the other seams installed
op_timer = None             # profiler.time_op(cls, args, apply), set by minidl/autograd/profiler.py


def _apply_timed(cls, *args):
    """Function.apply while a profiler records in some thread (profiler.py): the op, timed; as for
    autocast, installed only then, so ops pay nothing for profiling otherwise."""
    return op_timer(cls, args, _timed[0])


def _install_profiler_seam(on):
    _install("profiler", on)


autocast_state.install_seam = _install_seam
saved_hooks.install_seam = _install_saved_hooks_seam
Node.register(Function)


def _set_anomaly(on):
    global _anomaly
    _anomaly = on


anomaly_mode.on_change = _set_anomaly


def register_tensor_type(cls):
    """Make ``cls`` the Tensor type that Function.apply and the engine wrap arrays in."""
    global Tensor
    Tensor = cls


def _share_counters(outs, tensors):
    """An output that views an input's memory shares the input's version counter, and
    remembers (as ``_base``) the tensor whose memory it views."""
    storage_of = versions.storage_of
    roots = None
    for o in outs:
        data = o._data
        if type(data) is _ndarray and data.base is None:
            # owns its memory: a fresh result (the common case) or an input passed through
            for t in tensors:
                if t is not None and t._data is data:
                    _view_of(o, t)
                    break
            continue
        if roots is None:
            roots = [(storage_of(t._data), t) for t in tensors if t is not None]
        root = storage_of(data)
        for r, t in roots:
            if r is root:
                _view_of(o, t)
                break


def _view_of(view, t):
    view._version_counter = t._version_counter
    if grad_mode._state.enabled:
        # a differentiable view: its history follows the base's (views.py). One made under
        # no_grad shares the counter only, like detach() (PyTorch: not a differentiable view)
        view._base = t if t._base is None else t._base
        view._view_version = t._version_counter.value


def _check_same_device(cls, args):
    devices = [a.device for a in args if isinstance(a, Tensor)]
    for d in devices[1:]:
        if d != devices[0]:
            raise RuntimeError(f"{cls.__name__}: expected all tensors on the same device, "
                               f"but found {devices[0]} and {d}")
