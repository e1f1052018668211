"""Gradient clipping, as ``torch.nn.utils.clip_grad_norm_``.

total = || (||g_1||_p, ..., ||g_k||_p) ||_p  (the p-norm of all gradients as one vector;
p = inf takes the largest |g|, p = -inf the smallest); if total > max_norm every gradient is
scaled in place by max_norm / (total + 1e-6), so the clipped norm is just under max_norm.
"""
import math
import warnings

import numpy as np

from ...tensor.tensor import Tensor


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients of ``parameters`` (a Tensor or an iterable of them) in place;
    returns the total norm before clipping as a 0-d Tensor.

    The numbers are PyTorch's: each gradient's norm is rounded to that gradient's dtype, the total
    (the norm of those norms; the largest |g| for ``inf``, the smallest for ``-inf``) to the
    promoted dtype of all gradients (float64 when float32 and float64 ones are mixed), and the
    factor is ``(1 / (total + 1e-6)) * max_norm`` in that dtype (PyTorch's ``max_norm / t`` is a
    reciprocal and a product), capped at 1, then cast to each gradient's dtype. So a float16
    gradient is scaled by the factor its float16 norm gives, not by a float64 one."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    norm_type = float(norm_type)
    if isinstance(max_norm, Tensor):
        max_norm = max_norm.item()
    if not grads:
        return Tensor._wrap(np.zeros((), np.float32), None, 0)
    if grads[0].device != "cpu":
        return _clip_on_device(grads, max_norm, norm_type, error_if_nonfinite, grads[0].dtype)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    _scale_by_norm(grads, max_norm, total)
    return total


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of ``tensors`` (a Tensor or an iterable of them, usually gradients) taken as one
    vector, as a 0-d Tensor of their promoted dtype (PyTorch's ``torch.nn.utils.get_total_norm``)."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._wrap(np.zeros((), np.float32), None, 0)
    arrays = [t.numpy(force=True) for t in tensors]
    dtype = np.result_type(*[a.dtype for a in arrays])
    total = dtype.type(_total_norm(arrays, norm_type))
    if error_if_nonfinite and not math.isfinite(float(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return Tensor._wrap(np.asarray(total, dtype=dtype), None, 0)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of ``parameters`` in place by min(max_norm / (total_norm + 1e-6), 1), with
    a ``total_norm`` already computed (PyTorch's ``torch.nn.utils.clip_grads_with_norm_``)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    _scale_by_norm([p.grad for p in parameters if p.grad is not None], max_norm, total_norm)


def _scale_by_norm(grads, max_norm, total_norm):
    """Multiply each gradient by min(coef, 1), coef = (1 / (total + 1e-6)) * max_norm in the total's dtype."""
    if isinstance(max_norm, Tensor):
        max_norm = max_norm.item()
    if not grads:
        return
    total = np.asarray(total_norm.numpy(force=True) if isinstance(total_norm, Tensor) else total_norm)
    dtype = total.dtype if total.dtype.kind == "f" else np.dtype(np.float64)
    total = dtype.type(total)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        denominator = dtype.type(np.float64(total) + 1e-6)
        reciprocal = dtype.type(1.0 / np.float64(denominator))
        coef = dtype.type(np.float64(reciprocal) * np.float64(np.float32(max_norm) if dtype.itemsize < 8
                                                               else max_norm))
        if coef < 1.0 or not math.isfinite(float(total)):
            # PyTorch multiplies by min(coef, 1) unconditionally, so a nan/inf norm spreads into the grads
            coef = coef if np.isnan(coef) else min(coef, dtype.type(1.0))
            for g in grads:
                if g._data.dtype.itemsize < 4:   # float16/bfloat16: the product in float32, rounded once
                    g._data[...] = (g._data.astype(np.float32) * np.float32(coef)).astype(g._data.dtype)
                else:
                    g._data *= g._data.dtype.type(coef)


def _total_norm(arrays, norm_type):
    """The norm of the per-gradient norms, each rounded to its gradient's dtype (as PyTorch's
    per-tensor ``vector_norm``), computed in float64."""
    if math.isinf(norm_type):
        pick, empty = (max, 0.0) if norm_type > 0 else (min, math.inf)
        norms = [float(a.dtype.type(np.abs(a).max() if norm_type > 0 else np.abs(a).min())) if a.size else empty
                 for a in arrays]
        return pick(norms)
    norms = [float(a.dtype.type(np.linalg.norm(a.reshape(-1).astype(np.float64), ord=norm_type))) for a in arrays]
    return float(np.linalg.norm(np.asarray(norms), ord=norm_type))


def _clip_on_device(grads, max_norm, norm_type, error_if_nonfinite, dtype):
    """The same clipping with every number kept on the device (no host round trip): the norm
    is (sum_i sum |g_i|^p)^(1/p) in float64 (= the norm of the per-gradient norms), the
    factor min(coef, 1) is applied where the CPU path would apply it and is 1 elsewhere
    (multiplying by 1 changes nothing). ``error_if_nonfinite`` becomes a deferred device check:
    it raises at the next read from the device, after the gradients were scaled."""
    from ...backends import get, namespace_of
    xp = namespace_of(grads[0]._data)
    if math.isinf(norm_type):
        largest = norm_type > 0    # inf: the largest |g|; -inf: the smallest
        parts = [(xp.abs(g._data).max() if largest else xp.abs(g._data).min()).astype(np.float64)
                 for g in grads if g._data.size]
        total = parts[0] if parts else xp.full((), 0.0 if largest else math.inf, np.float64)
        for part in parts[1:]:
            total = xp.maximum(total, part) if largest else xp.minimum(total, part)
    else:
        total = xp.zeros((), np.float64)
        for g in grads:
            total = total + (xp.abs(g._data.astype(np.float64)) ** norm_type).sum()
        total = total ** (1.0 / norm_type)
    finite = xp.isfinite(total)
    if error_if_nonfinite:
        get(grads[0].device).assert_all(finite, RuntimeError,
                                        f"The total norm of order {norm_type} for gradients from `parameters` is "
                                        "non-finite, so it cannot be clipped (checked on the device, after clipping). "
                                        "To disable this error set `error_if_nonfinite=False`")
    coef = float(max_norm) / (total + 1e-6)
    capped = xp.where(xp.isfinite(coef), xp.minimum(coef, 1.0), coef)
    factor = xp.where((coef < 1.0) | ~finite, capped, 1.0)
    for g in grads:
        g._data *= factor.astype(g.dtype)
    return Tensor._wrap(total.astype(dtype), None, 0)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element into [-clip_value, clip_value] in place."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    for p in parameters:
        if p.grad is not None:
            np.clip(p.grad._data, -clip_value, clip_value, out=p.grad._data)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of ``clip_grad_norm_`` (with PyTorch's FutureWarning)."""
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
