"""The derivative transforms of ``torch.func``: grad, grad_and_value, vjp, jacrev, jacfwd
and hessian, built on minidl's reverse-mode autograd.

Each transform calls the function once with its differentiated arguments replaced by fresh
leaves that require grad (``x.detach().requires_grad_()``, sharing x's memory), so the graph
it records starts at them, and then runs backward passes from the outputs to those leaves:

- ``grad``: one pass seeded with 1 from the scalar output; the gradient has each input's shape.
- ``vjp``: the returned ``vjp_fn(v)`` runs one pass seeded with ``v`` and gives v^T J per input;
  it keeps the graph, so it may be called again with other cotangents.
- ``jacrev``: one pass per output element k, seeded with the unit vector e_k, gives row k of
  d output / d input; the rows, stacked in the output's element order and reshaped, form the
  Jacobian of shape ``output.shape + input.shape``.
- ``jacfwd``: the same Jacobian. PyTorch builds it column by column with forward mode (one
  Jacobian-vector product per input element); minidl has no forward mode, so it is computed
  by reverse mode as ``jacrev`` does, in the dtype forward mode would give (the output's).
- ``hessian``: ``jacfwd(jacrev(f))``, as PyTorch defines it.

Arguments and results may be pytrees (tuples, lists, dicts of tensors; see _pytree.py), nested
as PyTorch nests them. Results are detached: the transforms run the function under
``enable_grad`` and return plain tensors, as torch.func does for inputs that do not require
grad.

Transforms compose (``grad(grad(f))``, ``jacrev(grad(f))``, ``grad`` of a function that calls
``vjp`` on its input). While a transform's function runs, the transform notes the leaves it
differentiates with respect to; a transform called inside it whose inputs, outputs or cotangents
depend on those leaves is one the outer transform differentiates through. That inner transform
then takes its arguments as views of them (so the graph leads on to the outer leaves), runs its
backward passes with create_graph=True (autograd/higher_order.py) and returns results that keep
their graph, which the outer transform differentiates. An op without a differentiable backward
on that path raises NotImplementedError naming it.
"""
import functools
import threading

import numpy as np

from .. import backends
from .. import random as _random
from ..autograd import api as _api
from ..autograd import op_function as _op_function
from ..autograd import functional as _functional
from ..autograd import grad_mode as _grad_mode
from ..autograd.graph import leaves_reached
from . import _pytree

__all__ = ["grad", "grad_and_value", "vjp", "jacrev", "jacfwd", "hessian"]

RANDOM_IN_VMAP = ("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                  "'different' randomness flags on vmap or perform the randomness operation out of vmap")
_stack = threading.local()    # .frames: [(transform name, ids of the leaves it differentiates w.r.t.)]


def check_randomness(randomness):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")


class _Differentiating:
    """While the function of a transform runs: records which leaves that transform will
    differentiate with respect to, so that a transform nested inside can tell whether the
    outer one differentiates through it."""

    def __init__(self, name, leaves):
        # the leaves, and for a view of an outer transform's leaf the leaves its graph leads to
        ids = {id(t) for t in leaves}
        ids.update(id(t) for t in leaves_reached([t for t in leaves if t.grad_fn is not None]))
        self.frame = (name, ids)

    def __enter__(self):
        if not hasattr(_stack, "frames"):
            _stack.frames = []
        _stack.frames.append(self.frame)

    def __exit__(self, *exc):
        _stack.frames.pop()


def differentiated_through(tensors):
    """Does an enclosing transform differentiate through ``tensors`` (they are, or were computed
    from, the leaves it differentiates with respect to)? The inner transform then records the
    graph of its results, for the outer one to differentiate."""
    frames = getattr(_stack, "frames", None)
    if not frames:
        return False
    Tensor = _op_function.Tensor
    tensors = [t for t in tensors if isinstance(t, Tensor) and t.requires_grad]
    if not tensors:
        return False
    reached = {id(t) for t in tensors if t.grad_fn is None} | {id(t) for t in leaves_reached(tensors)}
    return any(reached & ids for _, ids in frames)


def _wrap_argnum(argnum, n):
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < n:
        return argnum
    if -n <= argnum < 0:
        return argnum + n
    raise RuntimeError(f"Got argnum={argnum}, but only {n} positional inputs")


def _check_argnums(argnums, n):
    if isinstance(argnums, int):
        return _wrap_argnum(argnums, n)
    if isinstance(argnums, tuple):
        if len(argnums) == 0:
            raise RuntimeError("argnums must be non-empty")
        if len(set(argnums)) != len(argnums):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")
        return tuple(_wrap_argnum(a, n) for a in argnums)
    raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")


def _float_for_reverse(x):
    if not x.is_floating_point():
        raise RuntimeError("only Tensors of floating point dtype can require gradients")


def _float_for_forward(x):
    if not x.is_floating_point():
        raise ValueError(f"Expected primal to be floating point or complex, but got: {x.dtype}")


class _Primals:
    """The differentiated arguments of one call: the originals, their fresh leaves, the pytree
    spec to put results in their shape, and the call's arguments with the leaves in place."""

    def __init__(self, args, argnums, check_dtype=_float_for_reverse):
        if argnums is None:                      # vjp: every positional argument
            chosen, where = tuple(args), None
        else:
            where = _check_argnums(argnums, len(args))
            chosen = args[where] if isinstance(where, int) else tuple(args[i] for i in where)
        self.originals, self.spec = _pytree.flatten(chosen)
        Tensor = _op_function.Tensor
        for x in self.originals:
            if not isinstance(x, Tensor):
                raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
            check_dtype(x)
        # an argument an enclosing transform differentiates through: a view of it, whose
        # gradient flows on to it; any other: a fresh leaf
        self.leaves = [x.view_as(x) if x.requires_grad and differentiated_through([x]) else
                       x.detach().requires_grad_(True) for x in self.originals]
        rebuilt = self.spec.unflatten(self.leaves)
        if where is None:
            self.args = rebuilt
        else:
            new = list(args)
            for i, value in ([(where, rebuilt)] if isinstance(where, int) else zip(where, rebuilt)):
                new[i] = value
            self.args = tuple(new)


def _split_aux(output, has_aux, prefix):
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{prefix}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return output


def _aux_leaves(aux):
    leaves, _ = _pytree.flatten(aux)
    for a in leaves:
        if not isinstance(a, _op_function.Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(a)}")
    return leaves


def _detached(tree, keep_graph=False):
    """The tensors of ``tree`` detached (kept as they are for an enclosing transform)."""
    if keep_graph:
        return tree
    Tensor = _op_function.Tensor
    return _pytree.tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def _gradients(outputs, seeds, leaves, retain_graph=True, create_graph=False):
    """d(sum_i seeds_i . outputs_i)/d leaf for each leaf (zeros where none arrives); outputs
    that do not require grad add nothing. A seed of None is 1 for a one-element output."""
    pairs = [(o, s) for o, s in zip(outputs, seeds) if o.requires_grad]
    if not pairs:
        return [_functional._zeros_like(x) for x in leaves]
    return list(_api.grad([o for o, _ in pairs], leaves, grad_outputs=[s for _, s in pairs],
                          retain_graph=retain_graph or create_graph, create_graph=create_graph, allow_unused=True,
                          materialize_grads=True))


def grad_and_value(func, argnums=0, has_aux=False):
    """``grad_and_value(f)(*args)`` is ``(gradient, f(*args))``: the gradient of f's scalar
    output with respect to ``args[argnums]`` (a tuple of gradients for a tuple of argnums),
    in the shape (pytree) of those arguments. With ``has_aux`` f returns ``(output, aux)``
    and the result is ``(gradient, (output, aux))``. Keyword arguments are passed through and
    not differentiated; an argument the output does not depend on gets zeros."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _grad_mode.enable_grad():
            primals = _Primals(args, argnums)
            with _Differentiating("grad", primals.leaves):
                output = func(*primals.args, **kwargs)
            output, aux = _split_aux(output, has_aux, "grad_and_value(f)(*args)")
            if not isinstance(output, _op_function.Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                   f"{type(output)}")
            if output.ndim != 0:
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
                                   f"with {output.ndim} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            aux_leaves = _aux_leaves(aux) if has_aux else []
            nested = differentiated_through(primals.originals + [output] + aux_leaves)
            grads = _gradients([output], [None], primals.leaves, retain_graph=False, create_graph=nested)
        gradient = primals.spec.unflatten(grads)
        value = output if nested else output.detach()
        if has_aux:
            return gradient, (value, _detached(aux, nested))
        return gradient, value
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``grad(f)(*args)``: the gradient of f's scalar output with respect to ``args[argnums]``,
    as ``torch.func.grad`` (see grad_and_value; with ``has_aux``, ``(gradient, aux)``)."""
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradient, value = inner(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient
    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(f(*primals), vjp_fn)`` (``(output, vjp_fn, aux)`` with ``has_aux``): ``vjp_fn(v)``,
    for cotangents ``v`` shaped as f's output (a pytree of tensors), returns the tuple of
    v^T J, one per primal, each in that primal's shape. ``vjp_fn`` keeps the graph and can be
    called again, unless called with ``retain_graph=False``."""
    with _grad_mode.enable_grad():
        args = _Primals(primals, None)
        with _Differentiating("vjp", args.leaves):
            output = func(*args.args)
        output, aux = _split_aux(output, has_aux, "vjp(f, *primals)")
        out_leaves, out_spec = _pytree.flatten(output)
        for o in out_leaves:
            if not isinstance(o, _op_function.Tensor):
                raise RuntimeError(f"vjp(f, *primals): expected f(*primals) to return only tensors, got unsupported "
                                   f"type {type(o)}")
            if not o.is_floating_point():
                raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got "
                                   f"Tensor with dtype {o.dtype}")
        aux_leaves = _aux_leaves(aux) if has_aux else []
        nested = differentiated_through(args.originals + out_leaves + aux_leaves)

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        """v^T J per primal; with ``create_graph`` (or inside a transform that differentiates
        through it) the products keep their graph."""
        cot_leaves, cot_spec = _pytree.flatten(cotangents)
        if cot_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                               f"to the function. cotangents: {cot_spec!r}, primal output: {out_spec!r}")
        for i, (c, o) in enumerate(zip(cot_leaves, out_leaves)):
            if c is not None and not isinstance(c, _op_function.Tensor):
                raise TypeError(f"gradients can be either Tensors or None, but got {type(c).__name__}")
            if c is not None and tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {c.shape} and output[{i}] has "
                                   f"a shape of {o.shape}.")
        graph = bool(create_graph) or nested or differentiated_through(cot_leaves)
        with _grad_mode.enable_grad():
            used = [(o, c if graph else c.detach()) for o, c in zip(out_leaves, cot_leaves) if c is not None]
            grads = _gradients([o for o, _ in used], [c for _, c in used], args.leaves, retain_graph=retain_graph,
                               create_graph=graph)
        return tuple(args.spec.unflatten(grads))

    result = (_detached(output, nested), vjp_fn)
    return result + (_detached(aux, nested),) if has_aux else result


def _host(t):
    return t._data if type(t._data) is np.ndarray else backends.get(t.device).to_host(t._data)


def _jacobian(name, func, argnums, has_aux, args, kwargs, forward, randomness="different"):
    """The Jacobian of every output of f with respect to every differentiated argument, by one
    backward pass per output element, nested as (outputs' pytree) of (arguments' pytree)."""
    prefix = "jvp(f, primals, tangents)" if forward else "vjp(f, *primals)"
    with _grad_mode.enable_grad():
        primals = _Primals(args, argnums, _float_for_forward if forward else _float_for_reverse)
        with _Differentiating(name, primals.leaves):
            if randomness == "error":
                with _random._draws_forbidden(RANDOM_IN_VMAP):
                    output = func(*primals.args, **kwargs)
            else:
                output = func(*primals.args, **kwargs)
        output, aux = _split_aux(output, has_aux, prefix)
        out_leaves, out_spec = _pytree.flatten(output)
        for o in out_leaves:
            if not isinstance(o, _op_function.Tensor):
                raise RuntimeError(f"{prefix}: expected f(*primals) to return only tensors, got unsupported type "
                                   f"{type(o)}")
            if not forward and not o.is_floating_point():
                raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got "
                                   f"Tensor with dtype {o.dtype}")
        aux_leaves = _aux_leaves(aux) if has_aux else []
        nested = differentiated_through(primals.originals + out_leaves + aux_leaves)
        if nested:
            jacobian = out_spec.unflatten([primals.spec.unflatten(_blocks_with_graph(o, primals.leaves, forward))
                                           for o in out_leaves])
            return (jacobian, aux) if has_aux else jacobian
    per_output = []
    for o in out_leaves:
        n, out_shape = o.numel(), tuple(o.shape)
        dtypes = [o._data.dtype if forward else x._data.dtype for x in primals.leaves]
        rows = [np.zeros((n,) + tuple(x.shape), dtype=d) for x, d in zip(primals.leaves, dtypes)]
        if o.requires_grad and o.is_floating_point():
            seed = np.zeros(n, dtype=o._data.dtype)
            for k in range(n):
                seed[k] = 1
                grads = _functional._backward([o], [seed.reshape(out_shape)], primals.leaves)
                seed[k] = 0
                for j, g in enumerate(grads):
                    if g is not None:
                        rows[j][k] = _host(g)
        jac = [_functional._on_device_of(r.reshape(out_shape + tuple(x.shape)), x)
               for r, x in zip(rows, primals.leaves)]
        per_output.append(primals.spec.unflatten(jac))
    jacobian = out_spec.unflatten(per_output)
    return (jacobian, _detached(aux)) if has_aux else jacobian


def _blocks_with_graph(o, leaves, forward):
    """d o / d leaf for each leaf, as Tensors that keep their graph (for an enclosing transform)."""
    if not (o.requires_grad and o.is_floating_point()):
        dtypes = [o.dtype if forward else x.dtype for x in leaves]
        return [_functional._on_device_of(np.zeros(tuple(o.shape) + tuple(x.shape), dtype=d), x)
                for x, d in zip(leaves, dtypes)]
    blocks = _functional._jacobian_with_graph(0, o, leaves, strict=False)
    return [b.to(o.dtype) if forward and b.dtype != o.dtype else b for b in blocks]


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """``jacrev(f)(*args)``: the Jacobian of f with respect to ``args[argnums]`` by reverse mode,
    one backward pass per output element. For an output of shape S and an argument of shape T
    the block has shape S + T; several outputs (a pytree) give that pytree of blocks, several
    arguments (a tuple of argnums, or a pytree argument) a pytree of blocks per output. With
    ``has_aux``: ``(jacobian, aux)``. The blocks are in the arguments' dtype. ``chunk_size``
    (PyTorch: how many rows to batch per vmapped pass) is checked and changes nothing here."""
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _jacobian("jacrev", func, argnums, has_aux, args, kwargs, forward=False)
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """``jacfwd(f)(*args)``: the Jacobian of f with respect to ``args[argnums]``, nested and
    shaped as jacrev's, in the outputs' dtype (integer outputs give zeros).

    PyTorch computes it with forward-mode AD, one Jacobian-vector product per input element
    (vmapped). minidl has no forward mode: this computes the same numbers by reverse mode, one
    backward pass per output element, running f once. ``randomness`` is vmap's: with "error" a
    random draw inside f raises RuntimeError; with "same" or "different" f draws once and every
    column sees those numbers (PyTorch's "different" gives each column its own draw)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        check_randomness(randomness)
        return _jacobian("jacfwd", func, argnums, has_aux, args, kwargs, forward=True, randomness=randomness)
    return wrapper


def hessian(func, argnums=0):
    """``hessian(f)(*args)``: the Hessian of f with respect to ``args[argnums]``, as PyTorch
    defines it, ``jacfwd(jacrev(f, argnums), argnums)``: the inner Jacobian keeps its graph (its
    passes run with create_graph=True), and the outer one differentiates it. For a scalar f and
    an argument of shape T the result has shape T + T."""
    return jacfwd(jacrev(func, argnums), argnums)
