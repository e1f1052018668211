"""ScaleNorm on cuda (the math: minidl/ops/normalization/scale_norm.py), composed from the generic
kernels: the row reductions (sum of squares, sum of dy * x) are the ``reduce`` kernel's, the rest
is elementwise. The learned scale g stays a (1,) device array that broadcasts, so no step reads
it back to the host (the CPU path takes it as a Python float).
"""
import math


def _xp():
    from ...backends.cuda import CUDA_NUMPY
    return CUDA_NUMPY


def scale_norm_function_forward(ctx, x, scale, eps):
    xp = _xp()
    d = x.shape[-1]
    x2 = xp.ascontiguousarray(x).reshape(math.prod(x.shape[:-1]), d)   # (a -1 is ambiguous for an empty x)
    inv = 1.0 / xp.maximum(xp.sqrt((x2 * x2).sum(axis=1, keepdims=True)), eps)   # (n, 1)
    g = scale.reshape(1, 1) if hasattr(scale, "shape") else float(scale)
    ctx.save_for_backward(x2, inv, g)
    ctx.eps, ctx.shape, ctx.cuda_backward = eps, x.shape, _backward
    ctx.scale_meta = (scale.shape, scale.dtype) if hasattr(scale, "shape") else None
    return (x2 * inv * g).astype(x.dtype, copy=False).reshape(x.shape)


def _backward(ctx, dy):
    """dx = g inv (dy - x inv^2 <dy, x>) (no radial term where the norm was clamped to eps);
    dg = sum_rows inv <dy, x>."""
    xp = _xp()
    x2, inv, g = ctx.saved_tensors
    need_dx, need_dg = ctx.needs_input_grad[:2]
    dy2 = xp.ascontiguousarray(dy).reshape(x2.shape)
    dot = (dy2 * x2).sum(axis=1, keepdims=True)
    dx = dscale = None
    if need_dx:
        radial = xp.where(inv == 1.0 / ctx.eps, 0.0, inv * inv * dot)
        dx = (g * inv * (dy2 - x2 * radial)).astype(x2.dtype, copy=False).reshape(ctx.shape)
    if need_dg:
        shape, dtype = ctx.scale_meta
        dscale = (dot * inv).sum().reshape(shape).astype(dtype)
    return dx, dscale, None
