"""Jacobian-vector products, as ``torch.func.jvp`` and ``torch.func.linearize``, on reverse mode.

PyTorch computes J t with forward-mode AD: each primal becomes a dual number carrying its
tangent, and every op pushes the tangent through with its own derivative, so one evaluation of
f gives f(x) and J t together. minidl has no forward mode (``minidl.autograd.forward_ad`` says
why), so these transforms record f once with reverse mode and read J t off rows of the
Jacobian: element k of J t is row k of J (one backward pass seeded with the unit vector e_k)
dotted with t. Reverse mode cannot do better exactly: a backward pass yields v^T J for one
cotangent v, and J t is the vjp of the map v -> J^T v, which needs gradients of gradients.

Inside a transform that differentiates through it (``grad`` of a function that calls ``jvp``),
jvp instead computes J t as PyTorch's double-backward trick does: g(u) = J^T u, from a backward
pass that records its graph (create_graph=True), is linear in u, and its vector-Jacobian product
with t is J t; both passes record their graphs, so the outer transform can differentiate the
result. ``linearize`` has no such form and raises NotImplementedError there.

Cost: one backward pass per element of f's output (only over the part of the graph between
that output and the primals with a nonzero tangent), against one forward evaluation in
PyTorch. That is cheap for functions to few outputs (scalars, losses) and as expensive as
``jacrev`` for wide outputs. ``linearize`` keeps the graph, so each ``jvp_fn`` call costs the
passes again but never reruns f.

The values are PyTorch's; so are the checks and error messages. A tangent of another floating
dtype than its primal is accepted (as by PyTorch) and the product comes out in the output's
dtype (PyTorch's depends on how each op promotes the tangent).
"""
from ..autograd import op_function as _op_function
from ..autograd import functional as _functional
from ..autograd import grad_mode as _grad_mode
from . import _pytree
from ._derivatives import _aux_leaves, _detached, _Differentiating, _split_aux, differentiated_through

__all__ = ["jvp", "linearize"]

_JVP = "jvp(f, primals, tangents)"


def _tensors_only(items, argname):
    if len(items) == 0:
        raise RuntimeError(f"{_JVP}: Expected {argname} to contain at least one Tensor.")
    for x in items:
        if not isinstance(x, _op_function.Tensor):
            raise RuntimeError(f"{_JVP}: Expected {argname} to only contain Tensors, got {type(x)}")


def _check_pair(p, t):
    """What making the dual number (p, t) checks in PyTorch."""
    if not p.is_floating_point():
        raise ValueError(f"Expected primal to be floating point or complex, but got: {p.dtype}")
    if not t.is_floating_point():
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {t.dtype}")
    if tuple(t.shape) != tuple(p.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(p.shape)} while the given forward "
                           f"gradient is of size {list(t.shape)}.")
    if t.device != p.device:
        raise RuntimeError(f"Expected tangent to be on the device of its primal, {p.device}, but got a tangent on "
                           f"{t.device}")


def _check_not_nested(name, tensors):
    """linearize's results are numbers: an enclosing transform could not differentiate them."""
    if differentiated_through(tensors):
        raise NotImplementedError(f"func.{name} inside a transform that differentiates through it (a derivative of "
                                  "a derivative) is not supported: its Jacobian-vector products are read off rows "
                                  "of the Jacobian as numbers and keep no graph; use func.jvp there")


def _record(name, func, flat_primals, spec, has_aux, prefix):
    """Run f once on fresh leaves (views of the primals an enclosing transform differentiates
    through): (leaves, flat outputs, output spec, aux)."""
    leaves = [p.view_as(p) if p.requires_grad and differentiated_through([p]) else p.detach().requires_grad_(True)
              for p in flat_primals]
    with _Differentiating(name, leaves):
        output = func(*spec.unflatten(leaves))
    output, aux = _split_aux(output, has_aux, prefix)
    out_leaves, out_spec = _pytree.flatten(output)
    if len(out_leaves) < 1 or (len(out_leaves) == 1 and out_leaves[0] is None):
        raise RuntimeError(f"{prefix}: Expected f to be a function that has non-empty output (got output = "
                           f"{out_leaves})")
    for o in out_leaves:
        if not isinstance(o, _op_function.Tensor):
            raise RuntimeError(f"{prefix}: expected f(*primals) to return only tensors, got unsupported type "
                               f"{type(o)}")
    return leaves, out_leaves, out_spec, aux


def _host(t):
    return _functional._host(t.detach())


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(f(*primals), J t)`` (``(output, jvp_out, aux)`` with ``has_aux``): the output of f and
    its Jacobian at ``primals`` times ``tangents``, as ``torch.func.jvp``.

    ``primals`` is the tuple of f's positional arguments (pytrees of floating Tensors, all of
    them differentiated); ``tangents`` has the same structure and shapes. ``jvp_out`` has the
    output's structure, each entry of its output's shape and dtype; an output that does not
    depend on the primals gets zeros, or is an error with ``strict=True``. Computed by reverse
    mode, one backward pass per output element (see the module docstring)."""
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{_JVP}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals).")
    flat_primals, primals_spec = _pytree.flatten(primals)
    flat_tangents, tangents_spec = _pytree.flatten(tangents)
    if primals_spec != tangents_spec:
        raise RuntimeError(f"{_JVP}: Expected primals and tangents to have the same python structure. For example, "
                           f"if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
                           f"{primals_spec!r} and tangents with structure {tangents_spec!r}")
    _tensors_only(flat_primals, "primals")
    _tensors_only(flat_tangents, "tangents")
    for p, t in zip(flat_primals, flat_tangents):
        _check_pair(p, t)
    with _grad_mode.enable_grad():
        leaves, outputs, out_spec, aux = _record("jvp", func, flat_primals, primals_spec, has_aux, _JVP)
        aux_leaves = _aux_leaves(aux) if has_aux else []
        nested = differentiated_through(list(flat_primals) + list(flat_tangents) + outputs + aux_leaves)
        if nested:
            products = _functional._jvp_double_backward(outputs, leaves, flat_tangents, strict)
            result = (out_spec.unflatten(outputs), out_spec.unflatten(list(products)))
            return result + (aux,) if has_aux else result
    if strict:
        for o in outputs:
            if not o.requires_grad:
                raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is independent of the "
                                   "inputs. This is not allowed with strict=True.")
    host_tangents = [_host(t) for t in flat_tangents]
    products = [_functional.jvp_rows(o, leaves, host_tangents) for o in outputs]
    result = (out_spec.unflatten([o.detach() for o in outputs]), out_spec.unflatten(products))
    return result + (_detached(aux),) if has_aux else result


def linearize(func, *primals):
    """``(f(*primals), jvp_fn)``, as ``torch.func.linearize``: ``jvp_fn(*tangents)`` gives J t at
    ``primals`` for tangents of the primals' structure, shapes, devices and dtypes.

    f runs once, here, and its graph is kept for every ``jvp_fn`` call; each call costs one
    backward pass per output element (see the module docstring)."""
    flat_primals, primals_spec = _pytree.flatten(primals)
    _tensors_only(flat_primals, "primals")
    for p in flat_primals:
        if not p.is_floating_point():
            raise ValueError(f"Expected primal to be floating point or complex, but got: {p.dtype}")
    with _grad_mode.enable_grad():
        leaves, outputs, out_spec, _ = _record("linearize", func, flat_primals, primals_spec, False,
                                               "linearize(f, *primals)")
        _check_not_nested("linearize", list(flat_primals) + outputs)
    metas = [(p.shape, p.device, p.dtype) for p in flat_primals]

    def jvp_fn(*tangents):
        flat_tangents, tangents_spec = _pytree.flatten(tangents)
        if tangents_spec != primals_spec:
            raise RuntimeError(f"Expected the tangents {tangents_spec!r} to have the same argspec as the primals "
                               f"{primals_spec!r}")
        for idx, (t, (shape, device, dtype)) in enumerate(zip(flat_tangents, metas)):
            if not isinstance(t, _op_function.Tensor):
                raise RuntimeError(f"linearize: Expected tangents to only contain Tensors, got {type(t)}")
            for what, got, want in (("shape", t.shape, shape), ("device", t.device, device),
                                    ("dtype", t.dtype, dtype)):
                if got != want:
                    raise RuntimeError(f"tangent:{idx} with {what} {got} in flattened pytree doesn't match the "
                                       f"{what} {want} of the corresponding primal.")
        _check_not_nested("linearize", flat_tangents)
        host_tangents = [_host(t) for t in flat_tangents]
        return out_spec.unflatten([_functional.jvp_rows(o, leaves, host_tangents) for o in outputs])

    return out_spec.unflatten([o.detach() for o in outputs]), jvp_fn

