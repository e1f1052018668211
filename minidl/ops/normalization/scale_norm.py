"""ScaleNorm (Nguyen & Salazar, 2019) and FixNorm: project each row onto a sphere of radius g.

For one row x of D features and a scalar g (learned for ScaleNorm, fixed for FixNorm):

    s = 1 / max(||x||_2, eps)
    y = g * x * s

The clamp keeps an all-zero row finite. ScaleNorm replaces LayerNorm's D gains and biases
with a single scale, which the authors found trains Transformers faster, with warmup-free
stability.

Backward, per row. Where the norm is above eps, with xhat = x * s (a unit vector):

    dy_j/dx_k = g s (delta_jk - xhat_j xhat_k)        (d||x||/dx_k = xhat_k)
    dx        = g s (dy - xhat * <dy, xhat>)          = g s (dy - x s^2 <dy, x>)

that is, the gradient loses its radial component: moving x along itself changes nothing.
Where the clamp is active (||x|| <= eps) s is the constant 1/eps and dx = g s dy.
For the scale, shared by all rows:

    dg = sum_rows <dy, x> s.

Only s is saved (float64, one per row); clamping is recognised by s == 1/eps.
"""
import numpy as np

from ...autograd.function import Function
from ...backends import device_of
from ._dispatch import param_grad, use_kernel


def scale_norm_forward_reference(x, g, eps):
    """y, inv_norm for ScaleNorm over the last axis of x; g a Python float."""
    xf = x.astype(np.float64)
    inv = 1.0 / np.maximum(np.sqrt((xf * xf).sum(axis=-1)), eps)
    return (g * xf * inv[..., None]).astype(x.dtype), inv


def scale_norm_backward_reference(dy, x, inv, g, eps):
    """dx, dg (a float64 scalar)."""
    xf = x.astype(np.float64)
    dyf = dy.astype(np.float64)
    dot = (dyf * xf).sum(axis=-1)
    radial = np.where(inv == 1.0 / eps, 0.0, inv * inv * dot)      # no radial term where clamped
    dx = g * inv[..., None] * (dyf - xf * radial[..., None])
    return dx.astype(x.dtype), float((dot * inv).sum())


class ScaleNormFunction(Function):
    """ScaleNorm over the last dim; ``scale`` is a (1,) array (learned) or a Python float (fixed)."""

    @staticmethod
    def forward(ctx, x, scale, eps):
        if type(x) is not np.ndarray and device_of(x) == "cuda":   # the device's own kernels
            from ...kernels.cuda.scale_norm import scale_norm_function_forward
            return scale_norm_function_forward(ctx, x, scale, eps)
        d = x.shape[-1]
        n = x.size // d if d else 0
        g = float(scale.reshape(-1)[0]) if isinstance(scale, np.ndarray) else float(scale)
        x2 = np.ascontiguousarray(x).reshape(n, d)
        if use_kernel(x):
            from ...kernels.cpu.scale_norm import scale_norm_forward
            y = np.empty(x.shape, x.dtype)
            _, inv = scale_norm_forward(x2, g, eps, out=y.reshape(n, d))
        else:
            y2, inv = scale_norm_forward_reference(x2, g, eps)
            y = y2.reshape(x.shape)
        ctx.save_for_backward(x2, inv)
        ctx.g, ctx.eps, ctx.shape = g, eps, x.shape
        ctx.scale_meta = (scale.shape, scale.dtype) if isinstance(scale, np.ndarray) else None
        return y

    @staticmethod
    def backward(ctx, dy):
        if getattr(ctx, "cuda_backward", None) is not None:
            return ctx.cuda_backward(ctx, dy)
        x2, inv = ctx.saved_tensors
        need_dx, need_dg = ctx.needs_input_grad[:2]
        n, d = x2.shape
        dy2 = np.ascontiguousarray(dy).reshape(n, d)
        dx = None
        if use_kernel(x2):
            from ...kernels.cpu.scale_norm import scale_norm_backward
            if need_dx:
                dx = np.empty(ctx.shape, x2.dtype)
            _, dg = scale_norm_backward(dy2, x2, inv, ctx.g, ctx.eps, need_dx, need_dg,
                                        dx_out=None if dx is None else dx.reshape(n, d))
        else:
            dx2, dg = scale_norm_backward_reference(dy2, x2, inv, ctx.g, ctx.eps)
            if need_dx:
                dx = dx2.reshape(ctx.shape)
        dscale = param_grad(np.float64(dg), *ctx.scale_meta) if need_dg else None
        return dx, dscale, None
