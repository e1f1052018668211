"""InstanceNorm: normalize each channel of each sample over its spatial positions.

Forward. For x of shape (N, C, *), instance (n, c) owns the M = prod(*) values x[n, c, ...]:

    mean = (1/M) sum_i x_i,   var = (1/M) sum_i (x_i - mean)^2,   rstd = 1 / sqrt(var + eps)
    y_i = gamma_c (x_i - mean) rstd + beta_c

It is GroupNorm with one channel per group (G = C), and BatchNorm applied to one sample
at a time; the fused kernel is GroupNorm's with G = C.

Backward. With g_i = dL/dy_i, d_i = gamma_c g_i and xhat_i = (x_i - mean) rstd, the sums of
BatchNorm's derivation (batch_norm.py) run over one instance:

    dL/dx_j = (rstd / M) (M d_j - sum_i d_i - xhat_j sum_i d_i xhat_i)      (sums over (n, c))
    dL/dgamma_c = sum_{n, i} g xhat,   dL/dbeta_c = sum_{n, i} g.

With ``use_input_stats=False`` (eval with running statistics) the statistics are per-channel
constants and the op is BatchNorm's eval mode (see batch_norm.BatchNormFunction). The running
estimates, when tracked, are updated with the batch average of the instances' mean and
unbiased variance, as PyTorch does; an input without values (no sample, or no position)
leaves them as they are.
"""
import math

import numpy as np

from ...autograd.op_function import Function
from ...backends import namespace_of
from ._dispatch import NORMS, affine_meta, param_grads
from .batch_norm import batch_norm_grads
from .running_stats import update_running_stats


def _rows(a):
    """(N, C, *) -> (N, C, M)."""
    return a.reshape(a.shape[0], a.shape[1], math.prod(a.shape[2:]))


def instance_norm_forward_reference(x, weight=None, bias=None, eps=1e-5):
    """Returns (y, mean, rstd); mean and rstd float64 of shape (N, C)."""
    xr = _rows(x.astype(np.float64))
    mean = xr.mean(axis=2)
    var = ((xr - mean[:, :, None]) ** 2).mean(axis=2)
    rstd = 1.0 / namespace_of(x).sqrt(var + eps)
    y = (xr - mean[:, :, None]) * rstd[:, :, None]
    if weight is not None:
        y = y * weight.reshape(1, -1, 1)
    if bias is not None:
        y = y + bias.reshape(1, -1, 1)
    return y.reshape(x.shape).astype(x.dtype), mean, rstd


def instance_norm_backward_reference(dy, x, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True):
    """Returns (dx, dweight, dbias), the weight and bias gradients in float64."""
    g = _rows(dy.astype(np.float64))
    xhat = (_rows(x.astype(np.float64)) - mean[:, :, None]) * rstd[:, :, None]
    dweight = (g * xhat).sum(axis=(0, 2))
    dbias = g.sum(axis=(0, 2))
    d = g if weight is None else g * weight.reshape(1, -1, 1)
    m = g.shape[2]
    sum_d = d.sum(axis=2, keepdims=True)
    sum_dxhat = (d * xhat).sum(axis=2, keepdims=True)
    dx = rstd[:, :, None] / m * (m * d - sum_d - xhat * sum_dxhat)
    return dx.reshape(x.shape).astype(x.dtype), dweight, dbias


INSTANCE_NORM = NORMS.kernels(("instance_norm_forward", "instance_norm_backward"), __name__,
                              cpu="minidl.kernels.cpu.group_norm", cuda="minidl.kernels.cuda.channel_norm")


class InstanceNormFunction(Function):
    """Per (sample, channel) statistics from the input; folds them into running estimates when
    given. Saves x, mean and rstd (N, C)."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
        ctx.impl = INSTANCE_NORM.select(x)
        y, mean, rstd = ctx.impl.instance_norm_forward(x, weight, bias, eps)
        count = math.prod(x.shape[2:]) if x.size else 0   # no instance, or instances of no values: nothing to fold
        update_running_stats(running_mean, running_var, mean, 1.0 / rstd ** 2 - eps, count, momentum)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.affine, ctx.eps = affine_meta(weight, bias), eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        need = ctx.needs_input_grad[:3]
        dx, dw, db = ctx.impl.instance_norm_backward(dy, x, mean, rstd, weight, *need)
        return (dx if need[0] else None,) + param_grads(ctx.affine, need[1:], (dw, db)) + (None,) * 4

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors, each instance's mean and rstd recomputed from x."""
        x, weight = inputs[:2]
        spatial = tuple(range(2, x.ndim))
        return batch_norm_grads(ctx, x, weight, dy, None, None, None, ctx.needs_input_grad[:3], spatial,
                                training=True) + (None,) * 4
