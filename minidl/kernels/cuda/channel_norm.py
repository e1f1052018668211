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
float32 for float16/float32 inputs, float64 for float64.
"""
from .layer_norm import norm_backward, norm_forward
from .reduce import accumulator_dtype


def _xp():
    from ...backends.cuda import CUDA_NUMPY
    return CUDA_NUMPY


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


# GroupNorm -------------------------------------------------------------------------------------

def group_norm_function_forward(ctx, x, num_groups, weight, bias, eps):
    rows = _xp().ascontiguousarray(x).reshape(x.shape[0] * num_groups, x.shape[1] // num_groups * _spatial(x))
    xhat, mean, rstd = norm_forward(rows, None, None, eps, center=True)
    ctx.save_for_backward(rows, weight, mean, rstd)
    ctx.shape, ctx.bias_dtype, ctx.cuda_backward = x.shape, None if bias is None else bias.dtype, _group_backward
    return _affine(xhat.reshape(x.shape), weight, bias).astype(x.dtype, copy=False)


def _group_backward(ctx, dy):
    need_x, _, need_w, need_b, _ = ctx.needs_input_grad
    dx, dw, db = _group_grads(ctx, dy, need_x, need_w, need_b)
    return dx, None, dw, db, None


def _group_grads(ctx, dy, need_x, need_w, need_b):
    rows, weight, mean, rstd = ctx.saved_tensors
    dx = dw = db = None
    if need_x:
        d = dy if weight is None else dy * _per_channel(weight, dy.ndim)
        dx, _, _ = norm_backward(d.astype(rows.dtype, copy=False).reshape(rows.shape), rows, mean, rstd, None,
                                 True, False, False, center=True)
        dx = dx.reshape(ctx.shape)
    if need_w:
        xhat = ((rows - mean.reshape(-1, 1)) * rstd.reshape(-1, 1)).reshape(ctx.shape)
        dw = _channel_sum(dy * xhat).astype(weight.dtype)
    if need_b:
        db = _channel_sum(dy).astype(ctx.bias_dtype)
    return dx, dw, db


# InstanceNorm: GroupNorm with one group per channel, plus optional running estimates -------------

def instance_norm_function_forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    N, C = x.shape[:2]
    y = group_norm_function_forward(ctx, x, C, weight, bias, eps)
    _, _, mean, rstd = ctx.saved_tensors
    m = _spatial(x)
    if x.size == 0:     # no instance, or instances of no values: the estimates stay as they are
        running_mean = running_var = None
    if running_mean is not None:
        running_mean *= 1.0 - momentum
        running_mean += (momentum * mean.reshape(N, C).mean(axis=0)).astype(running_mean.dtype)
    if running_var is not None:
        unbiased = (1.0 / rstd.reshape(N, C) ** 2 - eps) * m / max(m - 1, 1)
        running_var *= 1.0 - momentum
        running_var += (momentum * unbiased.mean(axis=0)).astype(running_var.dtype)
    ctx.cuda_backward = _instance_backward
    return y


def _instance_backward(ctx, dy):
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    dx, dw, db = _group_grads(ctx, dy, need_x, need_w, need_b)
    return dx, dw, db, None, None, None, None


# BatchNorm -------------------------------------------------------------------------------------

def _channel_rows(a):
    """(N, C, *) -> contiguous (C, N * prod(*)): one row per channel."""
    return _xp().ascontiguousarray(a.swapaxes(0, 1)).reshape(a.shape[1], a.shape[0] * _spatial(a))


def _from_channel_rows(rows, shape):
    return _xp().ascontiguousarray(rows.reshape((shape[1], shape[0]) + tuple(shape[2:])).swapaxes(0, 1))


def batch_norm_function_forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps, mask):
    if mask is not None:
        from . import masked_batch_norm
        return masked_batch_norm.forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps,
                                         mask)
    rows = _channel_rows(x)
    if training:
        xhat, mean, rstd = norm_forward(rows, None, None, eps, center=True)
        count = rows.shape[1]
        if count == 0:      # an empty batch (its statistics were never computed) leaves the estimates alone
            running_mean = running_var = None
        if running_mean is not None:
            running_mean *= 1.0 - momentum
            running_mean += (momentum * mean).astype(running_mean.dtype)
        if running_var is not None:
            unbiased = (1.0 / rstd ** 2 - eps) * count / max(count - 1, 1)
            running_var *= 1.0 - momentum
            running_var += (momentum * unbiased).astype(running_var.dtype)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: evaluation mode needs running_mean and running_var")
        acc = accumulator_dtype(x.dtype)
        mean = running_mean.astype(acc)
        rstd = 1.0 / _xp().sqrt(running_var.astype(acc) + eps)
        xhat = ((rows - mean.reshape(-1, 1)) * rstd.reshape(-1, 1)).astype(x.dtype)
    y = _affine(_from_channel_rows(xhat, x.shape), weight, bias).astype(x.dtype, copy=False)
    ctx.save_for_backward(rows, weight, mean, rstd)
    ctx.shape, ctx.training, ctx.cuda_backward = x.shape, training, _batch_backward
    ctx.bias_dtype = None if bias is None else bias.dtype
    return y


def _batch_backward(ctx, dy):
    rows, weight, mean, rstd = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    dy_rows = _channel_rows(dy)
    dx = dw = db = None
    if need_x:
        d = dy_rows if weight is None else dy_rows * weight.reshape(-1, 1)
        d = d.astype(rows.dtype, copy=False)
        if ctx.training:
            dx_rows, _, _ = norm_backward(d, rows, mean, rstd, None, True, False, False, center=True)
        else:   # mean and rstd are constants: dx = gamma * rstd * dy
            dx_rows = (d * rstd.reshape(-1, 1)).astype(rows.dtype)
        dx = _from_channel_rows(dx_rows, ctx.shape)
    if need_w:
        xhat = (rows - mean.reshape(-1, 1)) * rstd.reshape(-1, 1)
        dw = (dy_rows * xhat).sum(axis=1).astype(weight.dtype)
    if need_b:
        db = dy_rows.sum(axis=1).astype(ctx.bias_dtype)
    return dx, dw, db, None, None, None, None, None, None
