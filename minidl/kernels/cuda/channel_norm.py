"""GroupNorm, InstanceNorm and BatchNorm on cuda, built on the row-normalisation kernels of layer_norm.py
(the math: minidl/ops/normalization/group_norm.py and batch_norm.py).

All three are "normalise rows, then apply a per-channel affine":

- GroupNorm: a row is one (sample, group): x (N, C, *) viewed as (N * G, C / G * prod(*)), which
  is already contiguous, so the row kernel runs **one block per (sample, group)**; InstanceNorm
  is the case G = C;
- BatchNorm (training): a row is one channel across the batch: x is first laid out as
  (C, N * prod(*)) (one copy kernel), then **one block per channel**.

The row kernels normalise without an affine (gamma and beta are per channel, not per row
feature); the affine, dgamma = sum dy * xhat and dbeta = sum dy run on the generic kernels.
The backward feeds d = dy * gamma to the row backward kernel, whose formula
dx = rstd (d - mean(d) - xhat mean(d xhat)) is the same for all three norms. Statistics are
float32 for float16/float32 inputs, float64 for float64. The array-level signatures are the CPU
kernels' (minidl/kernels/cpu/batch_norm.py, group_norm.py); backward lays x out as rows again
rather than keeping a second copy of it from forward.
"""
from . import masked_batch_norm
from ._common import xp_of as _xp
from .layer_norm import norm_backward, norm_forward
from .reduce import accumulator_dtype


def _per_channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def _affine(y, weight, bias):
    if weight is not None:
        y = y * _per_channel(weight, y.ndim)
    if bias is not None:
        y = y + _per_channel(bias, y.ndim)
    return y


def _spatial(x):
    """prod(*) of an (N, C, *) array (spelled out: a -1 in reshape is ambiguous for an empty array)."""
    n = 1
    for s in x.shape[2:]:
        n *= s
    return n


def _channel_sum(a):
    return a.reshape(a.shape[0], a.shape[1], _spatial(a)).sum(axis=(0, 2))


# GroupNorm: a row is one (sample, group); InstanceNorm is the case G = C --------------------------

def _group_rows(x, num_groups):
    return _xp(x).ascontiguousarray(x).reshape(x.shape[0] * num_groups, x.shape[1] // num_groups * _spatial(x))


def group_norm_forward(x, num_groups, weight=None, bias=None, eps=1e-5):
    """(y, mean, rstd), mean and rstd (N, num_groups) in the accumulator dtype."""
    xhat, mean, rstd = norm_forward(_group_rows(x, num_groups), None, None, eps, center=True)
    y = _affine(xhat.reshape(x.shape), weight, bias).astype(x.dtype, copy=False)
    return y, mean.reshape(x.shape[0], num_groups), rstd.reshape(x.shape[0], num_groups)


def group_norm_backward(dy, x, mean, rstd, weight, num_groups, need_dx=True, need_dweight=True, need_dbias=True):
    """(dx, dweight, dbias), the parameter gradients in the accumulator dtype; None where not needed."""
    rows = _group_rows(x, num_groups)
    mean, rstd = mean.reshape(-1, 1), rstd.reshape(-1, 1)
    dx = dw = db = None
    if need_dx:
        d = dy if weight is None else dy * _per_channel(weight, dy.ndim)
        dx, _, _ = norm_backward(d.astype(rows.dtype, copy=False).reshape(rows.shape), rows, mean.reshape(-1),
                                 rstd.reshape(-1), None, True, False, False, center=True)
        dx = dx.reshape(x.shape)
    if need_dweight:
        dw = _channel_sum(dy * ((rows - mean) * rstd).reshape(x.shape))
    if need_dbias:
        db = _channel_sum(dy)
    return dx, dw, db


def instance_norm_forward(x, weight=None, bias=None, eps=1e-5):
    return group_norm_forward(x, x.shape[1], weight, bias, eps)


def instance_norm_backward(dy, x, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True):
    return group_norm_backward(dy, x, mean, rstd, weight, x.shape[1], need_dx, need_dweight, need_dbias)


# BatchNorm: a row is one channel across the batch --------------------------------------------------

def _channel_rows(a):
    """(N, C, *) -> contiguous (C, N * prod(*)): one row per channel."""
    return _xp(a).ascontiguousarray(a.swapaxes(0, 1)).reshape(a.shape[1], a.shape[0] * _spatial(a))


def _from_channel_rows(rows, shape):
    return _xp(rows).ascontiguousarray(rows.reshape((shape[1], shape[0]) + tuple(shape[2:])).swapaxes(0, 1))


def batch_norm_statistics(running_mean, running_var, eps, dtype):
    """Eval mode's (mean, rstd) from the running estimates, in the accumulator dtype of ``dtype``."""
    acc = accumulator_dtype(dtype)
    return running_mean.astype(acc), 1.0 / _xp(running_var).sqrt(running_var.astype(acc) + eps)


def batch_norm_forward(x, weight=None, bias=None, eps=1e-5, mask=None):
    """Training forward: (y, mean, rstd), the statistics (C,) in the accumulator dtype."""
    if mask is not None:
        return masked_batch_norm.forward(x, weight, bias, eps, mask)
    xhat, mean, rstd = norm_forward(_channel_rows(x), None, None, eps, center=True)
    return _affine(_from_channel_rows(xhat, x.shape), weight, bias).astype(x.dtype, copy=False), mean, rstd


def batch_norm_apply(x, mean, rstd, weight=None, bias=None, mask=None):
    """y with the given (eval) statistics."""
    if mask is not None:
        return masked_batch_norm.apply(x, mean, rstd, weight, bias, mask)
    xhat = ((_channel_rows(x) - mean.reshape(-1, 1)) * rstd.reshape(-1, 1)).astype(x.dtype)
    return _affine(_from_channel_rows(xhat, x.shape), weight, bias).astype(x.dtype, copy=False)


def batch_norm_backward(dy, x, mean, rstd, weight=None, training=True, mask=None, need_dx=True, need_dweight=True,
                        need_dbias=True):
    """(dx, dweight, dbias), the parameter gradients in the accumulator dtype; None where not needed."""
    if mask is not None:
        return masked_batch_norm.backward(dy, x, mean, rstd, weight, training, mask, need_dx, need_dweight,
                                          need_dbias)
    rows = _channel_rows(x)
    dy_rows = _channel_rows(dy)
    dx = dw = db = None
    if need_dx:
        d = dy_rows if weight is None else dy_rows * weight.reshape(-1, 1)
        d = d.astype(rows.dtype, copy=False)
        if training:
            dx_rows, _, _ = norm_backward(d, rows, mean, rstd, None, True, False, False, center=True)
        else:   # mean and rstd are constants: dx = gamma * rstd * dy
            dx_rows = (d * rstd.reshape(-1, 1)).astype(rows.dtype)
        dx = _from_channel_rows(dx_rows, x.shape)
    if need_dweight:
        dw = (dy_rows * ((rows - mean.reshape(-1, 1)) * rstd.reshape(-1, 1))).sum(axis=1)
    if need_dbias:
        db = dy_rows.sum(axis=1)
    return dx, dw, db

