"""Batch Renormalization (Ioffe 2017): BatchNorm whose training output is corrected towards the
running statistics, so that a network trains with (nearly) the normalization it is tested with.

Forward (training). For x of shape (N, C, *), channel c owns the M = N * prod(*) values x_i. With
the batch's mean mu_B and sigma_B = sqrt(var_B + eps) (var_B biased, as BatchNorm's) and the running
mean mu and sigma = sqrt(running_var + eps):

    r = clip(sigma_B / sigma,       1 / r_max, r_max)
    d = clip((mu_B - mu) / sigma,  -d_max,     d_max)
    xhat_i = (x_i - mu_B) / sigma_B
    y_i    = gamma (r xhat_i + d) + beta

Where neither clip is active, r xhat_i + d = (x_i - mu) / sigma: training normalizes with the
running statistics, exactly as eval mode does, while the gradient still sees the batch (below).
r_max = 1, d_max = 0 give r = 1, d = 0: plain BatchNorm (the start of Ioffe's schedule, which then
relaxes r_max and d_max; the module ramps them in). The running estimates are folded in after r and
d are taken from them, by BatchNorm's rule (``running_stats.py``: unbiased variance, momentum).

Backward. Ioffe treats r and d as constants: their dependence on the batch is not differentiated
(it would only push mu_B and sigma_B towards the running values). With r, d fixed the output is
y_i = (gamma r) xhat_i + (gamma d + beta), BatchNorm's output with weight gamma r and bias
gamma d + beta, so with g_i = dL/dy_i:

    dL/dbeta  = sum_i g_i
    dL/dgamma = sum_i g_i (r xhat_i + d)  =  r sum_i g_i xhat_i + d sum_i g_i
    dL/dxhat_i = gamma r g_i =: d_i

and xhat depends on the batch through mu_B and sigma_B exactly as in BatchNorm (its derivation,
``batch_norm.py``, with M values per channel):

    dL/dx_j = (1 / (sigma_B M)) (M d_j - sum_i d_i - xhat_j sum_i d_i xhat_i).

So the gradient is BatchNorm's backward with weight gamma r, followed by the two lines for gamma
and beta; the op runs BatchNorm's apply and backward implementations (reference, Numba, cuda) with
that weight, and only the statistics and the (C,) correction are its own. This is the exact
gradient of y as a function of x, gamma and beta with r and d frozen at their forward values; of
the full forward it is the exact gradient only where both clips are active (r and d then do not
depend on x at all). The tests check both. In eval mode the layer is BatchNorm's eval.
"""
import numpy as np

from ...autograd.op_function import Function
from ...backends import namespace_of
from .._higher_order import constant
from ._dispatch import NORMS, affine_meta, param_grads
from .batch_norm import _axes, batch_norm_apply_reference, batch_norm_backward_reference, batch_norm_grads  # noqa: F401
from .running_stats import update_running_stats


def batch_renorm_statistics_reference(x, eps):
    """(mean, rstd) of every channel over every axis but 1, float64 of shape (C,); NaN for an
    input without values."""
    xp = namespace_of(x)
    xf = x.astype(np.float64)
    axes = _axes(x)
    count = x.size / max(x.shape[1], 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = xf.sum(axis=axes) / count
        var = ((xf - mean.reshape((1, -1) + (1,) * (x.ndim - 2))) ** 2).sum(axis=axes) / count
        return mean, 1.0 / xp.sqrt(var + eps)


def batch_renorm_correction(mean, rstd, running_mean, running_var, r_max, d_max, eps):
    """Ioffe's (r, d) per channel from the batch's (mean, rstd) and the running estimates, in the
    statistics' dtype and on their device."""
    xp = namespace_of(mean)
    sigma = xp.sqrt(running_var.astype(mean.dtype) + eps)
    r = xp.minimum(xp.maximum(1.0 / (rstd * sigma), 1.0 / r_max), r_max)
    d = xp.minimum(xp.maximum((mean - running_mean.astype(mean.dtype)) / sigma, -d_max), d_max)
    return r, d


BATCH_RENORM = NORMS.kernels(("batch_renorm_statistics", "batch_norm_apply", "batch_norm_backward"), __name__,
                             cpu="minidl.kernels.cpu.batch_renorm", cuda="minidl.kernels.cuda.channel_norm",
                             fallback=("batch_renorm_statistics",))


class BatchRenormFunction(Function):
    """Training-mode Batch Renormalization: y = gamma (r xhat + d) + beta per channel, r and d
    from the batch and the running estimates (or ``correction=(r, d)`` given, used as is), which
    are then updated in place. Saves x, the (C,) statistics and r, d; xhat is recomputed."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, r_max, d_max, momentum, eps, correction):
        impl = ctx.impl = BATCH_RENORM.select(x)
        mean, rstd = impl.batch_renorm_statistics(x, eps)
        xp = namespace_of(mean)
        if correction is not None:
            r, d = (xp.asarray(c, dtype=mean.dtype) for c in correction)
        elif x.size == 0:        # no values: nothing to correct (and no NaN into the parameter gradients)
            r, d = xp.ones(mean.shape, mean.dtype), xp.zeros(mean.shape, mean.dtype)
        else:
            r, d = batch_renorm_correction(mean, rstd, running_mean, running_var, r_max, d_max, eps)
        scale, shift = _scale_shift(weight, bias, r, d)
        y = impl.batch_norm_apply(x, mean, rstd, scale, shift)
        update_running_stats(running_mean, running_var, mean, 1.0 / rstd ** 2 - eps, x.size / max(x.shape[1], 1),
                             momentum)
        ctx.save_for_backward(x, weight, mean, rstd, r, d)
        ctx.affine, ctx.eps = affine_meta(weight, bias), eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd, r, d = ctx.saved_tensors
        need = ctx.needs_input_grad[:3]
        scale = r if weight is None else weight.astype(r.dtype) * r
        dx, sum_dy_xhat, sum_dy = ctx.impl.batch_norm_backward(dy, x, mean, rstd, scale, True, None, need[0],
                                                               need[1], need[1] or need[2])
        dweight = r * sum_dy_xhat + d * sum_dy if need[1] else None
        return (dx if need[0] else None,) + param_grads(ctx.affine, need[1:], (dweight, sum_dy)) + (None,) * 7

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors: BatchNorm's (batch_norm_grads, the statistics recomputed
        from x) with weight gamma r, then dgamma = r sum(dy xhat) + d sum(dy); r, d constants."""
        x, weight = inputs[:2]
        _, _, _, _, r, d = ctx.saved_tensors
        need = ctx.needs_input_grad[:3]
        shape = (1, -1) + (1,) * (x.ndim - 2)
        r_c = constant(r.astype(x.dtype).reshape(shape))
        scale = r_c if weight is None else weight.reshape(shape) * r_c
        dx, sum_dy_xhat, sum_dy = batch_norm_grads(ctx, x, scale, dy, None, None, None,
                                                   (need[0], need[1], need[1] or need[2]), training=True)
        dweight = None
        if need[1]:
            dweight = sum_dy_xhat * constant(r.astype(x.dtype)) + sum_dy * constant(d.astype(x.dtype))
        return (dx, dweight, sum_dy if need[2] else None) + (None,) * 7


def _scale_shift(weight, bias, r, d):
    """BatchNorm's affine that gives gamma (r xhat + d) + beta: weight gamma r, bias gamma d + beta."""
    scale = r if weight is None else weight.astype(r.dtype) * r
    shift = d if weight is None else weight.astype(d.dtype) * d
    return scale, shift if bias is None else shift + bias.astype(d.dtype)
