"""Gradient clipping, as ``torch.nn.utils.clip_grad_norm_``.

total = || (||g_1||_p, ..., ||g_k||_p) ||_p  (the p-norm of all gradients as one vector;
p = inf takes the largest |g|); if total > max_norm every gradient is scaled in place by
max_norm / (total + 1e-6), so the clipped norm is just under max_norm.
"""
import math

import numpy as np

from ...tensor.tensor import Tensor


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients of ``parameters`` (a Tensor or an iterable of them) in place;
    returns the total norm before clipping as a 0-d Tensor."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    norm_type = float(norm_type)
    if not grads:
        return Tensor._wrap(np.zeros((), np.float32), None, 0)
    dtype = grads[0].dtype
    if grads[0].device != "cpu":
        return _clip_on_device(grads, max_norm, norm_type, error_if_nonfinite, dtype)
    arrays = [g.numpy() for g in grads]
    if math.isinf(norm_type):
        norms = [np.abs(a).max() if a.size else 0.0 for a in arrays]
        total = max(float(n) for n in norms)
    else:
        norms = [np.linalg.norm(a.reshape(-1).astype(np.float64), ord=norm_type) for a in arrays]
        total = float(np.linalg.norm(np.asarray(norms), ord=norm_type))
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    clip_coef = float(max_norm) / (total + 1e-6)
    if clip_coef < 1.0 or not math.isfinite(total):
        # PyTorch multiplies by min(coef, 1) unconditionally, so a nan/inf norm spreads into the grads
        coef = min(clip_coef, 1.0) if math.isfinite(clip_coef) else clip_coef
        for g in grads:
            g._data *= np.asarray(coef, dtype=g.dtype)
    return Tensor._wrap(np.asarray(total, dtype=dtype), None, 0)


def _clip_on_device(grads, max_norm, norm_type, error_if_nonfinite, dtype):
    """The same clipping with every number kept on the device (no host round trip): the norm
    is (sum_i sum |g_i|^p)^(1/p) in float64 (= the norm of the per-gradient norms), the
    factor min(coef, 1) is applied where the CPU path would apply it and is 1 elsewhere
    (multiplying by 1 changes nothing). ``error_if_nonfinite`` becomes a deferred device check:
    it raises at the next read from the device, after the gradients were scaled."""
    from ...backends import get, namespace_of
    xp = namespace_of(grads[0]._data)
    if math.isinf(norm_type):
        parts = [xp.abs(g._data).max().astype(np.float64) for g in grads if g._data.size]
        total = parts[0] if parts else xp.zeros((), np.float64)
        for part in parts[1:]:
            total = xp.maximum(total, part)
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
