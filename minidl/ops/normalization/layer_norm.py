"""LayerNorm: normalize each sample over its trailing features, then scale and shift.

For one row x of D features (the trailing ``normalized_shape`` dims flattened):

    mu   = (1/D) sum_k x_k
    var  = (1/D) sum_k (x_k - mu)^2              (biased: LayerNorm has no running statistics)
    rstd = 1 / sqrt(var + eps)
    xhat = (x - mu) * rstd
    y    = gamma * xhat + beta

The statistics belong to one sample, so training and evaluation compute the same thing and
no sample's output depends on another's.

Backward. Write g = dL/dxhat = dy * gamma. Every xhat_j depends on every x_k through mu and
rstd, so dL/dx_k = sum_j g_j dxhat_j/dx_k, with

    dmu/dx_k   = 1/D
    dvar/dx_k  = (2/D)(x_k - mu)          (the term through mu is (2/D) sum_j (x_j - mu) * (-1/D) = 0)
    drstd/dx_k = -1/2 (var + eps)^(-3/2) dvar/dx_k = -rstd^2 xhat_k / D
    dxhat_j/dx_k = rstd (delta_jk - 1/D) + (x_j - mu) drstd/dx_k
                 = rstd (delta_jk - 1/D - xhat_j xhat_k / D)

so that

    dx_k = rstd * (g_k - mean_j(g_j) - xhat_k * mean_j(g_j xhat_j)).

The two subtracted terms are the coupling through the shared statistics: raising x_k raises
the mean, which lowers every xhat_j (hence -mean(g)); and it changes the variance, which
rescales every xhat_j by the same factor, in proportion to how far x_k sits from the mean
(hence -xhat_k mean(g xhat)). The result is orthogonal to both 1 and xhat: moving a row along
the directions the normalization removes (shifting it, scaling it) changes nothing.

The affine parameters are shared by all rows, so their gradients sum over rows:

    dgamma = sum_rows dy * xhat,    dbeta = sum_rows dy.

Statistics are computed and saved in float64 whatever the input dtype (N numbers each,
negligible next to the (N, D) data); the output has the input's dtype.
"""
import numpy as np

from ...autograd.op_function import Function
from ...backends import namespace_of
from .._higher_order import norm_input_grad, norm_statistics
from ._dispatch import NORMS, affine_meta, flat_param, into, param_grads, row_output, rows


def layer_norm_forward_reference(x, weight, bias, eps, out=None):
    """y, mean, rstd for LayerNorm over the last axis of x; weight/bias of shape (D,) or None."""
    xf = x.astype(np.float64)
    mean = xf.mean(axis=-1)
    xc = xf - mean[..., None]
    var = (xc * xc).mean(axis=-1)           # two-pass: exact for data with a large mean
    rstd = 1.0 / namespace_of(x).sqrt(var + eps)
    y = xc * rstd[..., None]
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return into(out, y.astype(x.dtype)), mean, rstd


def layer_norm_backward_reference(dy, x, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True,
                                  dx_out=None):
    """dx, dweight, dbias (the latter two float64, summed over every leading axis; None if not needed)."""
    xhat = (x.astype(np.float64) - mean[..., None]) * rstd[..., None]
    dyf = dy.astype(np.float64)
    g = dyf * weight if weight is not None else dyf
    dx = rstd[..., None] * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    leading = tuple(range(x.ndim - 1))
    dweight = (dyf * xhat).sum(axis=leading) if need_dweight else None
    dbias = dyf.sum(axis=leading) if need_dbias else None
    return into(dx_out, dx.astype(x.dtype)) if need_dx else None, dweight, dbias


LAYER_NORM = NORMS.kernels(("layer_norm_forward", "layer_norm_backward"), __name__,
                           cpu="minidl.kernels.cpu.layer_norm", cuda="minidl.kernels.cuda.layer_norm")


class LayerNormFunction(Function):
    """LayerNorm over the trailing ``d`` features: forward saves x, mean and rstd (not xhat)."""

    @staticmethod
    def forward(ctx, x, weight, bias, d, eps):
        ctx.impl = LAYER_NORM.select(x)
        x2 = rows(x, d)
        y, y2 = row_output(x.shape, x2)
        _, mean, rstd = ctx.impl.layer_norm_forward(x2, flat_param(weight, d), flat_param(bias, d), eps, out=y2)
        ctx.save_for_backward(x2, mean, rstd, weight)
        ctx.shape, ctx.affine, ctx.eps = x.shape, affine_meta(weight, bias), eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x2, mean, rstd, weight = ctx.saved_tensors
        need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
        d = x2.shape[1]
        dx, dx2 = row_output(ctx.shape, x2) if need_dx else (None, None)
        _, dw, db = ctx.impl.layer_norm_backward(rows(dy, d), x2, mean, rstd, flat_param(weight, d),
                                                 need_dx, need_dw, need_db, dx_out=dx2)
        return (dx,) + param_grads(ctx.affine, (need_dw, need_db), (dw, db)) + (None, None)

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors, mean and rstd recomputed from x (layer_norm_rows)."""
        x, weight = inputs[:2]
        return layer_norm_rows(ctx, x, weight, dy, ctx.needs_input_grad[:3]) + (None, None)


def layer_norm_rows(ctx, x, weight, dy, need, residual=None, centered=True):
    """(dx, dweight, dbias) of LayerNorm (RMSNorm: ``centered=False``, no bias) over the trailing
    ``ctx.eps``-regularised rows of the Tensor x, with recorded ops; ``residual``, a Tensor or
    None, is added to dx (the fused residual norms' stream gradient)."""
    d = ctx.saved_tensors[0].shape[1]
    n = x.numel() // d if d else 0
    x2, dy2 = x.reshape(n, d), dy.reshape(n, d)
    xhat, rstd = norm_statistics(x2, (1,), ctx.eps, centered)
    dx = dw = db = None
    if need[0]:
        g = dy2 if weight is None else dy2 * weight.reshape(d)
        dx = norm_input_grad(g, xhat, rstd, (1,), centered).reshape(ctx.shape)
        if residual is not None:
            dx = dx + residual
    if need[1]:
        dw = (dy2 * xhat).sum(0).reshape(ctx.affine[0][0])
    if len(need) > 2 and need[2]:
        db = dy2.sum(0).reshape(ctx.affine[1][0])
    return dx, dw, db
