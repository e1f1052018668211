"""Whole-function derivatives, as ``torch.autograd.functional``: the Jacobian of a function of
Tensors and its vector-Jacobian product, built on the first-order reverse mode of the engine.

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

Anything that differentiates a gradient needs the backward pass to record a graph of its own,
and minidl's backward formulas run on arrays and record none: ``create_graph=True``,
``hessian``, ``hvp``, ``vhp`` and ``jvp`` (which PyTorch computes by differentiating a vjp
again) raise NotImplementedError.
"""
import numpy as np

from .. import backends
from . import api, engine, function, grad_mode

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _second_order(what):
    return NotImplementedError(f"autograd.functional.{what} is not supported: it needs gradients of gradients, as "
                               "create_graph=True does, and backward formulas run on arrays and record no graph")


def _as_tuple(value, arg_name, fn_name):
    """(whether ``value`` was a tuple, ``value`` as a tuple of Tensors), with PyTorch's errors."""
    Tensor = function.Tensor
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


def _fresh_inputs(inputs):
    """New leaves requiring grad, sharing the inputs' memory: the gradients the engine returns
    for them belong to this call only, even if f also reads the caller's tensors directly."""
    return tuple(x.detach().requires_grad_(True) for x in inputs)


def _check_outputs(outputs, strict):
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The "
                                   "outputs must be computed in a differentiable manner from the input when "
                                   "running in strict mode.")


def _backward(outputs, seeds, inputs):
    """One backward pass from the outputs that require grad (with their seed arrays; None
    for an implicit one) to ``inputs``: a gradient Tensor per input, None where none arrives."""
    pairs = [(o, s) for o, s in zip(outputs, seeds) if o.requires_grad]
    if not pairs:
        return [None] * len(inputs)
    roots = [o for o, _ in pairs]
    arrays = api._seeds(roots, [s for _, s in pairs], "autograd.functional")
    return engine.run(roots, arrays, retain_graph=True, targets=list(inputs))


def _zeros_like(x):
    return function.Tensor._wrap(backends.namespace_of(x._data).zeros(x.shape, dtype=x.dtype), None, 0)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T J)``: the outputs of ``func`` (detached) and the product of ``v``
    (one Tensor per output, of its shape) with the Jacobian, one Tensor per input. ``v`` may be
    omitted when ``func`` returns a single one-element Tensor."""
    if create_graph:
        raise NotImplementedError(api._NO_HIGHER_ORDER)
    with grad_mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _fresh_inputs(inputs)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "vjp")
        _check_outputs(outputs, strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            if len(v) != len(outputs):
                raise RuntimeError(f"v is a tuple of invalid length: should be {len(outputs)} but got {len(v)}."
                                   if outputs_tuple else "The given v should contain a single Tensor.")
            for i, (el_v, o) in enumerate(zip(v, outputs)):
                if el_v.shape != o.shape:
                    prefix = f"Entry {i} in " if outputs_tuple else ""
                    raise RuntimeError(f"{prefix}v has invalid size: should be {o.shape} but got {el_v.shape}.")
            seeds = [el_v.detach() for el_v in v]
        else:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                                   "Tensor with a single element.")
            seeds = [None]
    grads = _backward(outputs, seeds, inputs)
    res = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                                   "not allowed in strict mode.")
            g = _zeros_like(x)
        res.append(g)
    outputs = tuple(o.detach() for o in outputs)
    return (outputs if outputs_tuple else outputs[0]), (tuple(res) if inputs_tuple else res[0])


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
    if create_graph:
        raise NotImplementedError(api._NO_HIGHER_ORDER)
    with grad_mode.enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _fresh_inputs(inputs)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", "jacobian")
        _check_outputs(outputs, strict)
        if vectorize and strict:
            raise RuntimeError("autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
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


def _on_device_of(array, x):
    """A Tensor holding host ``array`` on the device of tensor ``x``."""
    if x.device != "cpu":
        array = backends.get(x.device).from_host(array)
    return function.Tensor._wrap(array, None, 0)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """Not supported: PyTorch computes J v by differentiating a vector-Jacobian product a second
    time (the double-backward trick), which needs gradients of gradients."""
    raise _second_order("jvp")


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """Not supported: the Hessian is the Jacobian of a gradient (gradients of gradients)."""
    raise _second_order("hessian")


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """Not supported: v^T H differentiates a gradient (gradients of gradients)."""
    raise _second_order("vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """Not supported: H v differentiates a gradient (gradients of gradients)."""
    raise _second_order("hvp")
