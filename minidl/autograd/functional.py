"""Whole-function derivatives, as ``torch.autograd.functional``: the Jacobian of a function of
Tensors, its vector-Jacobian and Jacobian-vector products, and the Hessian of a scalar function
with its vector products, built on the reverse mode of the engine.

For y = f(x_1, ..., x_n) with outputs y_1, ..., y_m, one backward pass with seed v on the
outputs gives the vector-Jacobian product  (v^T J)_j = sum_i v_i^T dy_i/dx_j  for every input j
at once. ``vjp`` is that pass. ``jacobian`` runs one such pass per output element, seeding the
unit vector e_k of that element, which yields row k of every dy_i/dx_j; the rows, stacked in
the output's element order, form ``jacobian[i][j]`` of shape ``y_i.shape + x_j.shape``. The
graph of f is built once and kept (retain_graph) for all the passes.

Results nest as PyTorch's: a Tensor when f takes one Tensor and returns one, a tuple over the
inputs (or outputs) when that side is a tuple, and a tuple (per output) of tuples (per input)
when both are. An input the outputs do not depend on gets zeros, or is an error with
``strict=True``.

``jvp`` gives J v. Without ``create_graph`` each element of J v is a row of J times v
(``jvp_rows``: one backward pass per output element, see its docstring for the cost); with it,
J v is computed as PyTorch does, by the double-backward trick: g(u) = J^T u is linear in u, so
its vector-Jacobian product with v, d<g(u), v>/du, is J v.

``create_graph=True`` makes the results differentiable functions of the inputs (the backward
passes record a graph, autograd/higher_order.py). ``hessian`` is the Jacobian of the gradient,
``vhp`` the vector-Jacobian product of the gradient (v^T H), and ``hvp`` H v, which for the
symmetric Hessian of a twice continuously differentiable function is the same numbers: it is
computed as v^T H (PyTorch computes it with the double-backward trick, which gives the same).
"""
import numpy as np

from .. import backends
from . import api, engine, op_function, grad_mode, higher_order
from .graph import leaves_reached

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(value, arg_name, fn_name):
    """(whether ``value`` was a tuple, ``value`` as a tuple of Tensors), with PyTorch's errors."""
    Tensor = op_function.Tensor
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {arg_name}"
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                            f"{where} has type {type(el)}.")
    return is_tuple, items


def _unpack(res, outputs_tuple, inputs_tuple):
    """Undo the tupling of outputs and inputs: res[i][j] is output i, input j."""
    if not inputs_tuple:
        res = tuple(r[0] for r in res)
    return res if outputs_tuple else res[0]


def _fresh_inputs(inputs, create_graph=False):
    """New tensors requiring grad, sharing the inputs' memory: the gradients the engine returns
    for them belong to this call only, even if f also reads the caller's tensors directly. With
    ``create_graph`` an input that requires grad becomes a view of itself (a new tensor whose
    gradient flows on to it), so that the results are differentiable with respect to it."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad else x.detach().requires_grad_(True)
                 for x in inputs)


def _postprocess(tensors, create_graph):
    """The results as PyTorch returns them: detached unless ``create_graph``."""
    return tuple(tensors) if create_graph else tuple(t.detach() for t in tensors)


def _check_outputs(outputs, strict):
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The "
                                   "outputs must be computed in a differentiable manner from the input when "
                                   "running in strict mode.")


def _backward(outputs, seeds, inputs, create_graph=False):
    """One backward pass from the outputs that require grad (with their seeds; None for an
    implicit one) to ``inputs``: a gradient Tensor per input, None where none arrives. With
    ``create_graph`` the pass records the graph of the gradients (and of Tensor seeds)."""
    pairs = [(o, s) for o, s in zip(outputs, seeds) if o.requires_grad]
    if not pairs:
        return [None] * len(inputs)
    roots = [o for o, _ in pairs]
    if create_graph:
        seeds = api._seed_tensors(roots, [s for _, s in pairs], "autograd.functional")
        return higher_order.run(roots, seeds, retain_graph=True, targets=list(inputs))
    arrays = api._seeds(roots, [s for _, s in pairs], "autograd.functional")
    return engine.run(roots, arrays, retain_graph=True, targets=list(inputs))


def _zeros_like(x):
    return op_function.Tensor._wrap(backends.namespace_of(x._data).zeros(x.shape, dtype=x.dtype), None, 0)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T J)``: the outputs of ``func`` (detached) and the product of ``v``
    (one Tensor per output, of its shape) with the Jacobian, one Tensor per input. ``v`` may be
    omitted when ``func`` returns a single one-element Tensor. With ``create_graph`` both are
    differentiable functions of the inputs (and of ``v``)."""
    with grad_mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _fresh_inputs(inputs, create_graph)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "vjp")
        _check_outputs(outputs, strict)
        if v is not None:
            v = _sized_v(v, outputs, outputs_tuple, "vjp")
            seeds = [el_v if create_graph else el_v.detach() for el_v in v]
        else:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                                   "Tensor with a single element.")
            seeds = [None]
        grads = _backward(outputs, seeds, inputs, create_graph)
    res = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                                   "not allowed in strict mode.")
            g = _zeros_like(x)
        res.append(g)
    outputs, res = _postprocess(outputs, create_graph), _postprocess(res, create_graph)
    return (outputs if outputs_tuple else outputs[0]), (res if inputs_tuple else res[0])


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: ``J[i][j]`` of shape ``outputs[i].shape +
    inputs[j].shape`` holds d outputs[i] / d inputs[j], nested as the inputs and outputs are
    (a single Tensor when both are single Tensors).

    Every variant is computed by reverse mode, one backward pass per output element.
    ``vectorize`` (PyTorch: batch those passes with vmap) changes nothing here but the checks
    PyTorch makes; ``strategy="forward-mode"`` (PyTorch: one forward-mode pass per input
    element; only with ``vectorize=True``) gives the same numbers in the outputs' dtype.
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                             'Otherwise, prefer to use "reverse-mode".')
    forward_mode = strategy == "forward-mode"
    if forward_mode:
        if create_graph:
            raise NotImplementedError('autograd.functional.jacobian: `create_graph=True` and '
                                      '`strategy="forward-mode"` are not supported together (yet). Please either set '
                                      '`create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError('autograd.functional.jacobian: `strict=True` and `strategy="forward-mode"` are not '
                               'supported together (yet). Please either set `strict=False` or '
                               '`strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is only "
                                      "implemented for `vectorize=True`.")
    with grad_mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _fresh_inputs(inputs, create_graph)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
        _check_outputs(outputs, strict)
        if vectorize and strict:
            raise RuntimeError("autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
        if create_graph:
            res = tuple(_jacobian_with_graph(i, out, inputs, strict) for i, out in enumerate(outputs))
            return _unpack(res, outputs_tuple, inputs_tuple)
    res = []
    for i, out in enumerate(outputs):
        dtypes = [out.dtype if forward_mode else x.dtype for x in inputs]
        n = out.numel()
        # the rows of every dy_i/dx_j, on the host; uploaded once at the end for a device input
        rows = [np.zeros((n,) + tuple(x.shape), dtype=d) for x, d in zip(inputs, dtypes)]
        seed = np.zeros(n, dtype=out.dtype)
        for k in range(n):
            seed[k] = 1
            grads = _backward([out], [seed.reshape(tuple(out.shape))], inputs)
            seed[k] = 0
            for j, g in enumerate(grads):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is independent of input {j}. "
                                           "This is not allowed in strict mode.")
                    continue
                rows[j][k] = g._data if type(g._data) is np.ndarray else backends.get(g.device).to_host(g._data)
        res.append(tuple(_on_device_of(r.reshape(tuple(out.shape) + tuple(x.shape)), x)
                         for r, x in zip(rows, inputs)))
    return _unpack(tuple(res), outputs_tuple, inputs_tuple)


def _jacobian_with_graph(i, out, inputs, strict):
    """The blocks d out / d inputs[j] as differentiable Tensors: the rows (one backward pass
    recording its graph per element of ``out``) stacked and reshaped."""
    from ..ops import stack
    n, shape = out.numel(), tuple(out.shape)
    rows = [[] for _ in inputs]
    seed = np.zeros(n, dtype=out.dtype)
    for k in range(n):
        seed[k] = 1
        grads = _backward([out], [seed.reshape(shape)], inputs, create_graph=True)
        seed[k] = 0
        for j, g in enumerate(grads):
            if g is None:
                if strict:
                    raise RuntimeError(f"Output {i} of the user-provided function is independent of input {j}. "
                                       "This is not allowed in strict mode.")
                g = _zeros_like(inputs[j])
            elif strict and not g.requires_grad:
                raise RuntimeError(f"The jacobian of the user-provided function is independent of input {j}. This "
                                   "is not allowed in strict mode when create_graph=True.")
            rows[j].append(g)
    return tuple(stack(r).reshape(shape + tuple(x.shape)) if n else
                 _on_device_of(np.zeros(shape + tuple(x.shape), dtype=x.dtype), x) for r, x in zip(rows, inputs))


def _on_device_of(array, x):
    """A Tensor holding host ``array`` on the device of tensor ``x``."""
    if x.device != "cpu":
        array = backends.get(x.device).from_host(array)
    return op_function.Tensor._wrap(array, None, 0)


def jvp_rows(output, leaves, tangents):
    """J t for one ``output`` of a recorded graph, as a Tensor of its shape and dtype on its device:
    ``(J t)_k = sum_j <d output_k / d leaves[j], tangents[j]>`` (tangents: host arrays shaped as the
    leaves; None or all-zero ones are skipped).

    Cost. Without forward mode, and without gradients of gradients (which would give J t as the
    vjp of the linear map v -> J^T v), reverse mode reaches J t only through rows of J: row k is
    the vector-Jacobian product with the unit vector e_k, one backward pass, and no seed gives
    more than one element of J t exactly. So this is one backward pass per element of the output,
    each restricted to the leaves that have a nonzero tangent and that the output depends on (an
    output that depends on none is zeros, with no pass at all). Cheap for few outputs, as many
    passes as jacrev for many; the graph is kept across them."""
    n = output.numel()
    host = np.zeros(n, dtype=output.dtype)
    if output.requires_grad and n:
        reached = {id(t) for t in leaves_reached([output])} | ({id(output)} if output._node is None else set())
        used = [(x, t) for x, t in zip(leaves, tangents)
                if t is not None and id(x) in reached and np.any(t)]
        if used:
            targets = [x for x, _ in used]
            flat = [t.reshape(-1).astype(np.float64) for _, t in used]
            seed = np.zeros(n, dtype=output.dtype)
            shape = tuple(output.shape)
            for k in range(n):
                seed[k] = 1
                grads = _backward([output], [seed.reshape(shape)], targets)
                seed[k] = 0
                host[k] = sum(float(np.dot(_host(g).reshape(-1).astype(np.float64), t))
                              for g, t in zip(grads, flat) if g is not None)
    return _on_device_of(host.reshape(tuple(output.shape)), output)


def _host(t):
    return t._data if type(t._data) is np.ndarray else backends.get(t.device).to_host(t._data)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), J v)``: the outputs of ``func`` (detached) and the product of its
    Jacobian with ``v`` (one Tensor per input, of its shape), one Tensor per output, in the
    output's dtype. ``v`` may be omitted when the input is a single one-element Tensor.

    Without ``create_graph`` minidl computes it from rows of J by reverse mode, one backward pass
    per output element (``jvp_rows``); with it, as PyTorch, by differentiating a vector-Jacobian
    product a second time (two passes that record their graphs; the results are differentiable)."""
    with grad_mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _fresh_inputs(inputs, create_graph)
        v = _input_sized_v(v, inputs, inputs_tuple, "jvp")
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jvp")
        _check_outputs(outputs, strict)
        if create_graph:
            res = _jvp_double_backward(outputs, inputs, v, strict)
            return (outputs if outputs_tuple else outputs[0]), (res if outputs_tuple else res[0])
    if strict:
        reached = {id(t) for t in leaves_reached(outputs)}
        for i, x in enumerate(inputs):
            if id(x) not in reached and not any(o is x for o in outputs):
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                                   "not allowed in strict mode.")
    tangents = [_host(el_v) for el_v in v]
    res = tuple(jvp_rows(o, inputs, tangents) for o in outputs)
    outputs = tuple(o.detach() for o in outputs)
    return (outputs if outputs_tuple else outputs[0]), (res if outputs_tuple else res[0])


def _jvp_double_backward(outputs, inputs, v, strict):
    """J v by the double-backward trick: g(u) = J^T u (one pass recording its graph, from zero
    seeds u that require grad) is linear in u, and the vector-Jacobian product of g with v is J v."""
    us = [_zeros_like(o).requires_grad_(True) if o.requires_grad else None for o in outputs]
    grads = _backward(outputs, us, inputs, create_graph=True)
    pairs = []
    for i, (g, el_v) in enumerate(zip(grads, v)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                                   "not allowed in strict mode.")
            continue
        if g.requires_grad:
            pairs.append((g, el_v))
    targets = [u for u in us if u is not None]
    found = dict.fromkeys(map(id, targets))
    if pairs and targets:
        seeds = api._seed_tensors([g for g, _ in pairs], [el_v for _, el_v in pairs], "jvp")
        for u, jv in zip(targets, higher_order.run([g for g, _ in pairs], seeds, True, targets=targets)):
            found[id(u)] = jv
    res = []
    for i, (o, u) in enumerate(zip(outputs, us)):
        jv = None if u is None else found[id(u)]
        if jv is None:
            if strict:
                raise RuntimeError(f"The gradient with respect to the input is independent of entry {i} in the "
                                   "grad_outputs when using the double backward trick to compute forward mode "
                                   "gradients. This is not allowed in strict mode.")
            jv = _zeros_like(o)
        res.append(jv)
    return tuple(res)


def _scalar_output(func, inputs, strict, what):
    """func(*inputs), checked to be one Tensor of one element (what a Hessian is defined for)."""
    outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", what)
    _check_outputs(outputs, strict)
    if outputs_tuple:
        raise RuntimeError(f"The function given to {what} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {what} should contain a single element")
    return outputs[0]


def _gradient(output, inputs, strict):
    """d output / d inputs, recording its graph (the first half of every second derivative)."""
    grads = _backward([output], [None], inputs, create_graph=True)
    for i, g in enumerate(grads):
        if strict and (g is None or not g.requires_grad):
            raise RuntimeError("While computing the hessian, found that the jacobian of the user-provided function "
                               f"with respect to input {i} is independent of the input. This is not allowed in "
                               "strict mode. You should ensure that your function is twice differentiable and "
                               "that the jacobian depends on the inputs.")
    return [_zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of the scalar function ``func`` at ``inputs``: the Jacobian of its gradient,
    ``H[i][j]`` of shape ``inputs[i].shape + inputs[j].shape`` (a Tensor for a single input).
    The gradient is computed by a backward pass that records its graph, then differentiated by
    one backward pass per element (``jacobian``). ``outer_jacobian_strategy`` and ``vectorize``
    are those of ``jacobian``."""
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    inputs_tuple, inputs_t = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        return tuple(_gradient(_scalar_output(func, xs, strict, "hessian"), xs, strict))

    res = jacobian(gradient, inputs_t, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return res if inputs_tuple else res[0][0]


def _sized_v(v, like, like_tuple, what):
    """``v`` as a tuple of one tensor per tensor of ``like`` (the outputs for vjp, the inputs
    for jvp, vhp and hvp), each of its shape, with PyTorch's checks and messages."""
    _, v = _as_tuple(v, "v", what)
    if len(v) != len(like):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got {len(v)}."
                           if like_tuple else "The given v should contain a single Tensor.")
    for i, (el_v, x) in enumerate(zip(v, like)):
        if el_v.shape != x.shape:
            prefix = f"Entry {i} in " if like_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be {x.shape} but got {el_v.shape}.")
    return v


def _input_sized_v(v, inputs, inputs_tuple, what):
    """``v`` for jvp, vhp and hvp (see _sized_v): ones for None, allowed only for a single
    one-element input."""
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        return (op_function.Tensor._wrap(np.ones(inputs[0].shape, dtype=inputs[0].dtype), None, 0),)
    return _sized_v(v, inputs, inputs_tuple, what)


def _second_order_product(what, func, inputs, v, create_graph, strict):
    """(func(*inputs), v^T H) for vhp and hvp, with PyTorch's checks."""
    with grad_mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", what)
        inputs = _fresh_inputs(inputs, create_graph)
        v = _input_sized_v(v, inputs, inputs_tuple, what)
        v = tuple(el_v if create_graph else el_v.detach() for el_v in v)
        output = _scalar_output(func, inputs, strict, what)
        grads = _gradient(output, inputs, strict)
        pairs = [(g, el_v) for g, el_v in zip(grads, v) if g.requires_grad]
        found = [None] * len(inputs)
        if pairs:
            found = _backward([g for g, _ in pairs], [el_v for _, el_v in pairs], inputs, create_graph)
        res = []
        for i, (g, x) in enumerate(zip(found, inputs)):
            if g is None:
                if strict:
                    raise RuntimeError(f"The jacobian of the user-provided function is independent of input {i}. "
                                       "This is not allowed in strict mode.")
                g = _zeros_like(x)
            elif strict and create_graph and not g.requires_grad:
                raise RuntimeError(f"The hessian of the user-provided function is independent of input {i}. This "
                                   "is not allowed in strict mode when create_graph=True.")
            res.append(g)
    output, res = _postprocess((output,), create_graph)[0], _postprocess(res, create_graph)
    return output, (res if inputs_tuple else res[0])


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T H)``: the scalar output of ``func`` and the product of ``v`` (one
    Tensor per input, of its shape) with the Hessian, one Tensor per input: the gradient, by a
    pass that records its graph, then its vector-Jacobian product with v."""
    return _second_order_product("vhp", func, inputs, v, create_graph, strict)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), H v)``: as ``vhp``. The Hessian of a twice continuously differentiable
    function is symmetric, so H v = (v^T H)^T, and that is how it is computed (PyTorch computes
    the same numbers with the double-backward trick)."""
    return _second_order_product("hvp", func, inputs, v, create_graph, strict)
