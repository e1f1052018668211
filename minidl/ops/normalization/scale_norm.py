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

from ...autograd.op_function import Function
from ...backends import namespace_of
from .._higher_order import constant, keep_where
from ._dispatch import NORMS, affine_meta, into, param_grads, row_output, rows


def scale_norm_forward_reference(x, g, eps, out=None):
    """y, inv_norm for ScaleNorm over the last axis of x; g a Python float or a (1,) array."""
    xp = namespace_of(x)
    xf = x.astype(np.float64)
    inv = 1.0 / xp.maximum(xp.sqrt((xf * xf).sum(axis=-1)), eps)
    return into(out, (g * xf * inv[..., None]).astype(x.dtype)), inv


def scale_norm_backward_reference(dy, x, inv, g, eps, need_dx=True, need_dg=True, dx_out=None):
    """dx, dg (a float64 scalar); None where not needed."""
    xp = namespace_of(x)
    xf = x.astype(np.float64)
    dyf = dy.astype(np.float64)
    dot = (dyf * xf).sum(axis=-1)
    radial = xp.where(inv == 1.0 / eps, 0.0, inv * inv * dot)      # no radial term where clamped
    dx = g * inv[..., None] * (dyf - xf * radial[..., None])
    return into(dx_out, dx.astype(x.dtype)) if need_dx else None, (dot * inv).sum() if need_dg else None


SCALE_NORM = NORMS.kernels(("scale_norm_forward", "scale_norm_backward"), __name__,
                           cpu="minidl.kernels.cpu.scale_norm", cuda="minidl.kernels.cuda.scale_norm")


def _gain(scale):
    """The scale as the implementations take it: a host array is read once, here (free); a device
    array stays where it is (reading it back would wait for the device) and broadcasts there."""
    if isinstance(scale, np.ndarray):
        return float(scale.reshape(-1)[0])
    return scale if hasattr(scale, "shape") else float(scale)


class ScaleNormFunction(Function):
    """ScaleNorm over the last dim; ``scale`` is a (1,) array (learned) or a Python float (fixed)."""

    @staticmethod
    def forward(ctx, x, scale, eps):
        ctx.impl = SCALE_NORM.select(x)
        d = x.shape[-1]
        g = _gain(scale)
        x2 = rows(x, d)
        y, y2 = row_output(x.shape, x2)
        _, inv = ctx.impl.scale_norm_forward(x2, g, eps, out=y2)
        ctx.save_for_backward(x2, inv, g)
        ctx.eps, ctx.shape = eps, x.shape
        ctx.affine = affine_meta(scale if hasattr(scale, "shape") else None)
        return y

    @staticmethod
    def backward(ctx, dy):
        x2, inv, g = ctx.saved_tensors
        need_dx, need_dg = ctx.needs_input_grad[:2]
        dx, dx2 = row_output(ctx.shape, x2) if need_dx else (None, None)
        _, dg = ctx.impl.scale_norm_backward(rows(dy, x2.shape[1]), x2, inv, g, ctx.eps, need_dx, need_dg,
                                             dx_out=dx2)
        return (dx,) + param_grads(ctx.affine, (need_dg,), (dg,)) + (None,)

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors, s recomputed from x (a constant 1/eps on clamped rows)."""
        x, scale = inputs[:2]
        x2, inv, g = ctx.saved_tensors
        need_dx, need_dg = ctx.needs_input_grad[:2]
        n, d = x2.shape
        clamped = (inv == 1.0 / ctx.eps).reshape(n, 1)
        xr, dyr = x.reshape(n, d), dy.reshape(n, d)
        square = keep_where(~clamped, (xr * xr).sum(1, keepdim=True)) + constant(clamped.astype(x.dtype))
        s = keep_where(~clamped, square ** -0.5) + constant((clamped / ctx.eps).astype(x.dtype))
        xhat = xr * s
        dot = (dyr * xhat).sum(1, keepdim=True)          # <dy, xhat>
        dx = dg = None
        if need_dx:
            gain = scale.reshape(()) if scale is not None else g
            dx = (gain * s * (dyr - xhat * keep_where(~clamped, dot))).reshape(ctx.shape)
        if need_dg:
            dg = dot.sum().reshape(ctx.affine[0][0])
        return dx, dg, None
