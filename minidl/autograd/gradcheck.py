"""Finite-difference gradient checking, with PyTorch's ``gradcheck`` semantics.

For a function f of several tensors, pick a random cotangent v_k for every output y_k
and form the scalar  L(x) = sum_k <v_k, y_k(x)>. Its gradient dL/dx is exactly what one
backward pass with ``gradient=v_k`` computes (the vector-Jacobian product J^T v). The
check compares it, element by element, with central differences

    dL/dx_i ~ (L(x + eps e_i) - L(x - eps e_i)) / (2 eps),

accepting |analytic - numerical| <= atol + rtol * |numerical|.

The cotangents are random on purpose: with v = 1 a BatchNorm output sums to a constant,
so dL/dx = 0 whatever backward returns, and a wrong formula would pass.
Central differences have error O(eps**2) but need float64: in float32 the rounding
error of L / eps swamps the answer, so other dtypes get a warning.

``gradgradcheck`` checks second derivatives the same way: the function it hands to gradcheck
maps (inputs, grad_outputs) to the first-order gradients, computed by a backward pass that
records its graph (create_graph=True); their backward, differentiated by the engine, is compared
with finite differences of that function, with respect to the inputs and the grad_outputs.
"""
import warnings

import numpy as np

from .. import backends
from . import engine, op_function, grad_mode


class GradcheckError(RuntimeError):
    """Raised by gradcheck when an analytic gradient disagrees with finite differences."""


def _as_outputs(out):
    Tensor = op_function.Tensor
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, Tensor) and o.dtype.kind == "f"]


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, seed=0):
    """Check the gradients of ``func(*inputs)`` w.r.t. every input with requires_grad.

    Returns True when they agree; otherwise raises GradcheckError naming the input, the
    worst element and both values (or returns False when ``raise_exception=False``).
    """
    Tensor = op_function.Tensor
    if not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"gradcheck: eps must be a finite number > 0, got {eps!r}")
    if not (atol >= 0 and rtol >= 0):
        raise ValueError(f"gradcheck: atol and rtol must be >= 0, got atol={atol!r}, rtol={rtol!r}")

    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad, so there is nothing to check")
    for i in checked:
        if inputs[i].dtype != np.float64:
            warnings.warn(f"gradcheck: input {i} has dtype {inputs[i].dtype}; finite differences are "
                          "only reliable in float64, so this check may fail or pass spuriously", stacklevel=2)

    # fresh leaves, so the caller's .grad is left alone
    leaves = tuple(x.detach().requires_grad_(True) if i in checked else x for i, x in enumerate(inputs))
    outputs = _as_outputs(func(*leaves))
    if not outputs:
        raise ValueError("gradcheck: func returned no floating point tensor")
    rng = np.random.default_rng(seed)
    cotangents = [rng.standard_normal(o.shape).astype(o.dtype) for o in outputs]
    differentiable = [(o, v) for o, v in zip(outputs, cotangents) if o.requires_grad]
    if differentiable:
        engine.backward([o for o, _ in differentiable],
                        [v if o.device == "cpu" else backends.get(o.device).from_host(v) for o, v in differentiable])

    def objective():
        with grad_mode.no_grad():
            outs = _as_outputs(func(*leaves))
        return sum(float(np.sum(o.numpy(force=True).astype(np.float64) * v)) for o, v in zip(outs, cotangents))

    for i in checked:
        x = leaves[i]
        analytic = np.zeros(x.shape) if x.grad is None else x.grad.numpy(force=True).astype(np.float64)
        numerical = np.zeros(x.shape)
        data = x._data  # perturbed in place (any strides), and always restored
        # a device array is perturbed on a host copy, uploaded before each evaluation
        upload = None if type(data) is np.ndarray else backends.get(x.device).from_host
        if upload is not None:
            data = x.numpy(force=True).copy()
        for j in np.ndindex(*x.shape):
            orig = data[j]
            try:
                data[j] = orig + eps
                if upload is not None:
                    x._data = upload(data)
                plus = objective()
                data[j] = orig - eps
                if upload is not None:
                    x._data = upload(data)
                minus = objective()
            finally:
                data[j] = orig
                if upload is not None:
                    x._data = upload(data)
            numerical[j] = (plus - minus) / (2 * eps)
        # |analytic - numerical| <= atol + rtol |numerical|, as torch.allclose: a NaN on either side
        # is a mismatch (equal infinities are not)
        bad = ~np.isclose(analytic, numerical, rtol=rtol, atol=atol)
        if bad.any():
            with np.errstate(invalid="ignore"):
                err = np.abs(analytic - numerical) - (atol + rtol * np.abs(numerical))
            err = np.where(bad, np.nan_to_num(err, nan=np.inf), -np.inf)   # the worst, NaNs first
            worst = np.unravel_index(int(np.argmax(err)), x.shape)
            msg = (f"gradcheck: Jacobian mismatch for input {i} (shape {tuple(x.shape)}) at index {tuple(int(w) for w in worst)}: "
                   f"numerical {numerical[worst]:.8g}, analytic {analytic[worst]:.8g} "
                   f"(atol={atol}, rtol={rtol}; {int(bad.sum())} of {bad.size} elements differ)")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, gen_non_contig_grad_outputs=False,
                  raise_exception=True, seed=0):
    """Check the second derivatives of ``func(*inputs)``, as PyTorch's gradgradcheck: gradcheck of
    (inputs, grad_outputs) -> d<grad_outputs, func(*inputs)>/d inputs (the inputs that require
    grad), whose backward differentiates func's backward. Without ``grad_outputs``, random ones
    (uniform in [-1, 1), requiring grad, so they are checked too) are drawn for every floating
    output that requires grad. Returns True, or raises GradcheckError (False with
    ``raise_exception=False``)."""
    Tensor = op_function.Tensor
    from . import api
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if grad_outputs is None:
        rng = np.random.default_rng(seed + 1)
        grad_outputs = []
        for o in _as_outputs(func(*inputs)):
            if o.requires_grad:
                v = rng.uniform(-1, 1, o.shape).astype(o._data.dtype)
                if gen_non_contig_grad_outputs and v.ndim:
                    v = np.repeat(v, 2, axis=-1)[..., ::2]     # the same values, every other element of a copy
                g = Tensor._wrap(v if o.device == "cpu" else backends.get(o.device).from_host(v), None, 0)
                grad_outputs.append(g.requires_grad_(True))
    else:
        grad_outputs = list(grad_outputs) if isinstance(grad_outputs, (tuple, list)) else [grad_outputs]
    n = len(inputs)

    def first_derivatives(*args):
        xs, vs = args[:n], args[n:]
        with grad_mode.enable_grad():
            outputs = [o for o in _as_outputs(func(*xs)) if o.requires_grad]
            wrt = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
            if not outputs or not wrt:
                return ()
            grads = api.grad(outputs, wrt, list(vs), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivatives, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, seed=seed)
