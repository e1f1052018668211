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

from ...autograd.function import Function
from ...backends import device_of
from ._dispatch import param_grad, use_kernel


def rms_norm_forward_reference(x, weight, eps):
    """y, rstd for RMSNorm over the last axis of x; weight (D,) or None."""
    xf = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((xf * xf).mean(axis=-1) + eps)
    y = xf * rstd[..., None]
    if weight is not None:
        y = y * weight
    return y.astype(x.dtype), rstd


def rms_norm_backward_reference(dy, x, rstd, weight):
    """dx, dweight (float64, summed over every leading axis)."""
    xhat = x.astype(np.float64) * rstd[..., None]
    dyf = dy.astype(np.float64)
    g = dyf * weight if weight is not None else dyf
    dx = rstd[..., None] * (g - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    dweight = (dyf * xhat).sum(axis=tuple(range(x.ndim - 1)))
    return dx.astype(x.dtype), dweight


class RMSNormFunction(Function):
    """RMSNorm over the trailing ``d`` features: forward saves x and rstd."""

    @staticmethod
    def forward(ctx, x, weight, d, eps):
        if type(x) is not np.ndarray and device_of(x) == "cuda":   # the device's fused kernels
            from ...kernels.cuda.layer_norm import rms_norm_function_forward
            return rms_norm_function_forward(ctx, x, weight, d, eps)
        n = x.size // d if d else 0
        x2 = np.ascontiguousarray(x).reshape(n, d)
        if use_kernel(x):
            from ...kernels.cpu.rms_norm import rms_norm_forward
            y = np.empty(x.shape, x.dtype)
            _, rstd = rms_norm_forward(x2, weight, eps, out=y.reshape(n, d))
        else:
            y2, rstd = rms_norm_forward_reference(x2, None if weight is None else weight.reshape(d), eps)
            y = y2.reshape(x.shape)
        ctx.save_for_backward(x2, rstd, weight)
        ctx.shape = x.shape
        return y

    @staticmethod
    def backward(ctx, dy):
        if getattr(ctx, "cuda_backward", None) is not None:
            return ctx.cuda_backward(ctx, dy)
        x2, rstd, weight = ctx.saved_tensors
        need_dx, need_dw = ctx.needs_input_grad[:2]
        n, d = x2.shape
        dy2 = np.ascontiguousarray(dy).reshape(n, d)
        dx = None
        if use_kernel(x2):
            from ...kernels.cpu.rms_norm import rms_norm_backward
            if need_dx:
                dx = np.empty(ctx.shape, x2.dtype)
            _, dw = rms_norm_backward(dy2, x2, rstd, weight, need_dx, need_dw,
                                      dx_out=None if dx is None else dx.reshape(n, d))
        else:
            dx2, dw = rms_norm_backward_reference(dy2, x2, rstd, None if weight is None else weight.reshape(d))
            if need_dx:
                dx = dx2.reshape(ctx.shape)
        dweight = param_grad(dw, weight.shape, weight.dtype) if need_dw else None
        return dx, dweight, None, None
