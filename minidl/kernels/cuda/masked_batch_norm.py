"""Masked BatchNorm1d on cuda: BatchNorm of a padded batch (N, C, L) whose real tokens are where
the bool mask (N, L) is True, with the mask kept on the device (the math: the masked part of
minidl/ops/normalization/batch_norm.py's docstring).

Channels become rows, (C, N * L), as in unmasked BatchNorm, and the mask a (1, N * L) weight m
(1 at real tokens, 0 at padding); with M = sum m (a device scalar: never read on the host)

    mean = sum(x m) / M,   var = sum((x - mean)^2 m) / M,   rstd = 1 / sqrt(var + eps),
    xhat = (x - mean) rstd m,   y = (gamma xhat + beta) m,
    dx   = m rstd / M (M d - sum d - xhat sum(d xhat)),   d = gamma dy m   (training)
    dx   = m rstd d                                                       (eval),

every sum over a row, in the accumulator dtype (float32 for float16/32, float64 for float64).
These are compositions of the generic map / zip / reduce kernels; no kernel of its own.
"""
from .reduce import accumulator_dtype


def _xp():
    from ...backends.cuda import CUDA_NUMPY
    return CUDA_NUMPY


def _rows(a):
    """(N, C, L) -> contiguous (C, N * L)."""
    return _xp().ascontiguousarray(a.swapaxes(0, 1)).reshape(a.shape[1], a.shape[0] * a.shape[2])


def _unrows(rows, shape):
    return _xp().ascontiguousarray(rows.reshape((shape[1], shape[0]) + tuple(shape[2:])).swapaxes(0, 1))


def forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps, mask):
    xp, acc = _xp(), accumulator_dtype(x.dtype)
    if type(mask) is not type(x):
        raise TypeError(f"masked batch_norm: the mask must live on the input's device 'cuda', "
                        f"got a {type(mask).__name__}")
    rows = _rows(x).astype(acc, copy=False)
    m = mask.reshape(1, -1).astype(acc)
    count = m.sum()
    if training:
        mean = (rows * m).sum(axis=1) / count
        centered = rows - mean.reshape(-1, 1)
        var = (centered * centered * m).sum(axis=1) / count
        rstd = 1.0 / xp.sqrt(var + eps)
        if rows.shape[1] == 0:   # an empty batch (count 0: NaN statistics) leaves the estimates alone
            running_mean = running_var = None
        if running_mean is not None:
            running_mean *= 1.0 - momentum
            running_mean += (momentum * mean).astype(running_mean.dtype)
        if running_var is not None:
            unbiased = var * count / xp.maximum(count - 1.0, 1.0)
            running_var *= 1.0 - momentum
            running_var += (momentum * unbiased).astype(running_var.dtype)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: evaluation mode needs running_mean and running_var")
        mean = running_mean.astype(acc)
        rstd = 1.0 / xp.sqrt(running_var.astype(acc) + eps)
    xhat = (rows - mean.reshape(-1, 1)) * rstd.reshape(-1, 1) * m
    y = xhat
    if weight is not None:
        y = y * weight.reshape(-1, 1)
    if bias is not None:
        y = (y + bias.reshape(-1, 1)) * m
    ctx.save_for_backward(xhat, weight, rstd, m, count)
    ctx.shape, ctx.dtype, ctx.training, ctx.cuda_backward = x.shape, x.dtype, training, backward
    ctx.bias_dtype = None if bias is None else bias.dtype
    return _unrows(y.astype(x.dtype), x.shape)


def backward(ctx, dy):
    xhat, weight, rstd, m, count = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    g = _rows(dy).astype(xhat.dtype, copy=False) * m
    dx = dw = db = None
    if need_x:
        d = g if weight is None else g * weight.reshape(-1, 1)
        if ctx.training:
            sum_d = d.sum(axis=1, keepdims=True)
            sum_dxhat = (d * xhat).sum(axis=1, keepdims=True)
            dx_rows = (rstd.reshape(-1, 1) / count) * (count * d - sum_d - xhat * sum_dxhat) * m
        else:
            dx_rows = d * rstd.reshape(-1, 1)
        dx = _unrows(dx_rows.astype(ctx.dtype), ctx.shape)
    if need_w:
        dw = (g * xhat).sum(axis=1).astype(weight.dtype)
    if need_b:
        db = g.sum(axis=1).astype(ctx.bias_dtype)
    return dx, dw, db, None, None, None, None, None, None
