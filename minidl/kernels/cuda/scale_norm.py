"""ScaleNorm on cuda (the math: minidl/ops/normalization/scale_norm.py), composed from the generic
kernels: the row reductions (sum of squares, sum of dy * x) are the ``reduce`` kernel's, the rest
is elementwise. The learned scale g stays a (1,) device array that broadcasts, so no step reads
it back to the host (the CPU kernels take it as a Python float). The array-level signatures are
the CPU kernels' (minidl/kernels/cpu/scale_norm.py); ``inv`` is kept as an (n, 1) column.
"""
from ._common import xp_of as _xp


def _gain(g):
    return g.reshape(1, 1) if hasattr(g, "shape") else float(g)


def scale_norm_forward(x2, g, eps, out=None):
    """y, inv for the rows of x2 (n, d); y written into ``out`` when given."""
    xp = _xp(x2)
    inv = 1.0 / xp.maximum(xp.sqrt((x2 * x2).sum(axis=1, keepdims=True)), eps)   # (n, 1)
    y = (x2 * inv * _gain(g)).astype(x2.dtype, copy=False)
    if out is None:
        return y, inv
    out[...] = y
    return out, inv


def scale_norm_backward(dy2, x2, inv, g, eps, need_dx=True, need_dg=True, dx_out=None):
    """dx = g inv (dy - x inv^2 <dy, x>) (no radial term where the norm was clamped to eps);
    dg = sum_rows inv <dy, x> (a 0-d device array)."""
    xp = _xp(x2)
    dot = (dy2 * x2).sum(axis=1, keepdims=True)
    dx = dg = None
    if need_dx:
        radial = xp.where(inv == 1.0 / eps, 0.0, inv * inv * dot)
        dx = (_gain(g) * inv * (dy2 - x2 * radial)).astype(x2.dtype, copy=False)
        if dx_out is not None:
            dx_out[...] = dx
            dx = dx_out
    if need_dg:
        dg = (dot * inv).sum()
    return dx, dg
