"""RMSNorm (Zhang & Sennrich, 2019): LayerNorm without the centering and without beta.

For one row x of D features:

    rstd = 1 / sqrt(mean_k(x_k^2) + eps)
    xhat = x * rstd
    y    = gamma * xhat

Dropping the mean saves a reduction and, in the papers that use it, loses nothing: the
re-scaling invariance is what stabilises training, not the re-centering.

Backward. With g = dL/dxhat = dy * gamma and

    drstd/dx_k   = -1/2 (mean(x^2) + eps)^(-3/2) * 2 x_k / D = -rstd^3 x_k / D
    dxhat_j/dx_k = rstd delta_jk + x_j drstd/dx_k = rstd (delta_jk - xhat_j xhat_k / D)

we get

    dx_k = rstd * (g_k - xhat_k * mean_j(g_j xhat_j)).

Compared with LayerNorm only the scale couples the features (x_k changes the root mean
square, which rescales every xhat_j); there is no mean, hence no -mean(g) term. dx is
orthogonal to xhat (scaling a row changes nothing) but not to 1.

    dgamma = sum_rows dy * xhat.

Only rstd is saved (float64); the output has the input's dtype.
"""
import numpy as np

from ...autograd.op_function import Function
from ...backends import namespace_of
from ._dispatch import NORMS, affine_meta, flat_param, into, param_grads, row_output, rows
from .layer_norm import layer_norm_rows


def rms_norm_forward_reference(x, weight, eps, out=None):
    """y, rstd for RMSNorm over the last axis of x; weight (D,) or None."""
    xf = x.astype(np.float64)
    rstd = 1.0 / namespace_of(x).sqrt((xf * xf).mean(axis=-1) + eps)
    y = xf * rstd[..., None]
    if weight is not None:
        y = y * weight
    return into(out, y.astype(x.dtype)), rstd


def rms_norm_backward_reference(dy, x, rstd, weight, need_dx=True, need_dweight=True, dx_out=None):
    """dx, dweight (float64, summed over every leading axis; None if not needed)."""
    xhat = x.astype(np.float64) * rstd[..., None]
    dyf = dy.astype(np.float64)
    g = dyf * weight if weight is not None else dyf
    dx = rstd[..., None] * (g - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    dweight = (dyf * xhat).sum(axis=tuple(range(x.ndim - 1))) if need_dweight else None
    return into(dx_out, dx.astype(x.dtype)) if need_dx else None, dweight


RMS_NORM = NORMS.kernels(("rms_norm_forward", "rms_norm_backward"), __name__,
                         cpu="minidl.kernels.cpu.rms_norm", cuda="minidl.kernels.cuda.layer_norm")


class RMSNormFunction(Function):
    """RMSNorm over the trailing ``d`` features: forward saves x and rstd."""

    @staticmethod
    def forward(ctx, x, weight, d, eps):
        ctx.impl = RMS_NORM.select(x)
        x2 = rows(x, d)
        y, y2 = row_output(x.shape, x2)
        _, rstd = ctx.impl.rms_norm_forward(x2, flat_param(weight, d), eps, out=y2)
        ctx.save_for_backward(x2, rstd, weight)
        ctx.shape, ctx.affine, ctx.eps = x.shape, affine_meta(weight), eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x2, rstd, weight = ctx.saved_tensors
        need_dx, need_dw = ctx.needs_input_grad[:2]
        d = x2.shape[1]
        dx, dx2 = row_output(ctx.shape, x2) if need_dx else (None, None)
        _, dw = ctx.impl.rms_norm_backward(rows(dy, d), x2, rstd, flat_param(weight, d), need_dx, need_dw,
                                           dx_out=dx2)
        return (dx,) + param_grads(ctx.affine, (need_dw,), (dw,)) + (None, None)

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors, rstd recomputed from x (layer_norm.layer_norm_rows)."""
        x, weight = inputs[:2]
        return layer_norm_rows(ctx, x, weight, dy, ctx.needs_input_grad[:2], centered=False)[:2] + (None, None)
