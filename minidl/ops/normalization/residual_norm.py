"""A residual add fused with the norm that reads its sum: (s, y) = (x + r, norm(x + r)).

In a Pre-LN Transformer every residual add is followed by a norm of its sum (the next
sublayer's input), and both are wanted: the sum continues the residual stream, the normalized
sum feeds the sublayer. Done as two ops, the add reads x and r and writes s, then the norm
reads s again and writes y; in backward the norm writes its dL/ds, and autograd adds it to the
gradient the residual stream brings (reading both, writing a third array). Fused, forward
reads x and r once and writes s and y (the norm's statistics are taken from the row just
summed, still in cache), and backward reads dy, the stream's gradient ds and s, and writes the
one gradient both inputs receive: four arrays moved each way instead of five and six.

Forward, per row of D features (norm is LayerNorm or RMSNorm, see layer_norm.py and
rms_norm.py for their own derivations):

    s = x + r
    LayerNorm:  mu = mean(s), rstd = 1 / sqrt(mean((s - mu)^2) + eps), y = (s - mu) rstd gamma + beta
    RMSNorm:    rstd = 1 / sqrt(mean(s^2) + eps),                      y = s rstd gamma

Backward. The loss depends on s through two paths: directly (the stream, cotangent ds = dL/ds
from whatever reads s) and through y (cotangent dy). With g = dy gamma and xhat = (s - mu) rstd
(LayerNorm) or s rstd (RMSNorm), the chain rule through the norm (derived in layer_norm.py and
rms_norm.py) gives the total

    LayerNorm:  dL/ds = ds + rstd (g - mean(g) - xhat mean(g xhat))
    RMSNorm:    dL/ds = ds + rstd (g - xhat mean(g xhat))

and since ds/dx = ds/dr = I, dL/dx = dL/dr = dL/ds: one array, returned for both inputs. Two
leaves may not share one .grad array, so when x and r are both leaves the backward kernel writes
r's copy in the same pass (rather than the engine copying it afterwards). The affine parameters' gradients
are the norm's own, summed over rows: dgamma = sum_rows dy xhat, dbeta = sum_rows dy.

Only s (which is also the op's first output), mean and rstd are saved; xhat is recomputed.
Statistics are float64 (N values each); outputs have the inputs' dtype.
"""
import numpy as np

from ...autograd.op_function import Function, keeps_fresh_grad
from ._dispatch import NORMS, affine_meta, flat_param, into, param_grads, row_output, rows
from .layer_norm import layer_norm_forward_reference, layer_norm_rows
from .rms_norm import rms_norm_forward_reference


def add_layer_norm_forward_reference(x, r, weight, bias, eps, out=None, sum_out=None):
    """(s, y, mean, rstd): s = x + r and LayerNorm of s over its last axis."""
    s = into(sum_out, x + r)
    y, mean, rstd = layer_norm_forward_reference(s, weight, bias, eps, out=out)
    return s, y, mean, rstd


def add_layer_norm_backward_reference(dy, ds, s, mean, rstd, weight, need_dx=True, need_dweight=True,
                                      need_dbias=True, dx_out=None, dr_out=None):
    """(dx, dweight, dbias): dx = dL/ds, the gradient of both x and r (``ds`` None: no stream
    gradient), also written into ``dr_out`` when given (r's own array); dweight, dbias float64
    sums over every leading axis; None where not needed."""
    xhat = (s.astype(np.float64) - mean[..., None]) * rstd[..., None]
    dyf = dy.astype(np.float64)
    g = dyf * weight if weight is not None else dyf
    dx = None
    if need_dx:
        dx = rstd[..., None] * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
        if ds is not None:
            dx = dx + ds
        dx = into(dx_out, dx.astype(s.dtype))
        into(dr_out, dx)
    leading = tuple(range(s.ndim - 1))
    dweight = (dyf * xhat).sum(axis=leading) if need_dweight else None
    dbias = dyf.sum(axis=leading) if need_dbias else None
    return dx, dweight, dbias


def add_rms_norm_forward_reference(x, r, weight, eps, out=None, sum_out=None):
    """(s, y, rstd): s = x + r and RMSNorm of s over its last axis."""
    s = into(sum_out, x + r)
    y, rstd = rms_norm_forward_reference(s, weight, eps, out=out)
    return s, y, rstd


def add_rms_norm_backward_reference(dy, ds, s, rstd, weight, need_dx=True, need_dweight=True, dx_out=None,
                                    dr_out=None):
    """(dx, dweight) as add_layer_norm_backward_reference, for RMSNorm."""
    xhat = s.astype(np.float64) * rstd[..., None]
    dyf = dy.astype(np.float64)
    g = dyf * weight if weight is not None else dyf
    dx = None
    if need_dx:
        dx = rstd[..., None] * (g - xhat * (g * xhat).mean(axis=-1, keepdims=True))
        if ds is not None:
            dx = dx + ds
        dx = into(dx_out, dx.astype(s.dtype))
        into(dr_out, dx)
    dweight = (dyf * xhat).sum(axis=tuple(range(s.ndim - 1))) if need_dweight else None
    return dx, dweight


ADD_LAYER_NORM = NORMS.kernels(("add_layer_norm_forward", "add_layer_norm_backward"), __name__,
                               cpu="minidl.kernels.cpu.residual_norm", cuda="minidl.kernels.cuda.residual_norm")
ADD_RMS_NORM = NORMS.kernels(("add_rms_norm_forward", "add_rms_norm_backward"), __name__,
                             cpu="minidl.kernels.cpu.residual_norm", cuda="minidl.kernels.cuda.residual_norm")


def _outputs(x, d):
    """x's rows and two fresh outputs of x's shape (the sum, the normalized sum) with their rows."""
    x2 = rows(x, d)
    s, s2 = row_output(x.shape, x2)
    y, y2 = row_output(x.shape, x2)
    return x2, s, s2, y, y2


def _grad_outputs(ctx, s2):
    """(dx, its rows, r's own copy, its rows) for the backward kernel to write; (None, None) for
    what is not needed. r gets a copy of its own only when x and r are two leaves that will keep
    their gradients as they are (``keeps_fresh_grad``): the kernel then writes both in its one
    pass, where the engine would otherwise copy the single array afterwards (a read and a write
    more). Any other input gets the one array."""
    nx, nr = ctx.needs_input_grad[:2]
    if not (nx or nr):
        return None, None, None, None
    dx, dx2 = row_output(ctx.shape, s2)
    if nx and nr and ctx.inputs[0] is not ctx.inputs[1] and keeps_fresh_grad(ctx, 0) and keeps_fresh_grad(ctx, 1):
        return (dx, dx2) + row_output(ctx.shape, s2)
    return dx, dx2, None, None


def _input_grads(ctx, dx, dr):
    """The one gradient dL/ds, for x and r as each needs it (r's copy ``dr`` when it has one)."""
    nx, nr = ctx.needs_input_grad[:2]
    return (dx if nx else None), ((dx if dr is None else dr) if nr else None)


def _cotangents(ctx, grads):
    """(ds, dy): the stream's gradient (None when the sum was not returned) and the norm's."""
    return grads if ctx.return_sum else (None, grads[0])


class AddLayerNormFunction(Function):
    """(x + r, LayerNorm(x + r)) over the trailing ``d`` features (only the latter unless
    ``return_sum``); saves the sum, mean and rstd."""

    @staticmethod
    def forward(ctx, x, r, weight, bias, d, eps, return_sum=True):
        ctx.impl = ADD_LAYER_NORM.select(x)
        x2, s, s2, y, y2 = _outputs(x, d)
        _, _, mean, rstd = ctx.impl.add_layer_norm_forward(x2, rows(r, d), flat_param(weight, d),
                                                           flat_param(bias, d), eps, out=y2, sum_out=s2)
        ctx.save_for_backward(s2, mean, rstd, weight)
        ctx.shape, ctx.affine, ctx.return_sum, ctx.eps = x.shape, affine_meta(weight, bias), return_sum, eps
        return (s, y) if return_sum else y

    @staticmethod
    def backward(ctx, *grads):
        ds, dy = _cotangents(ctx, grads)
        s2, mean, rstd, weight = ctx.saved_tensors
        need_dw, need_db = ctx.needs_input_grad[2:4]
        d = s2.shape[1]
        dx, dx2, dr, dr2 = _grad_outputs(ctx, s2)
        ds2 = None if ds is None else rows(ds, d)
        _, dw, db = ctx.impl.add_layer_norm_backward(rows(dy, d), ds2, s2, mean, rstd, flat_param(weight, d),
                                                     dx is not None, need_dw, need_db, dx_out=dx2, dr_out=dr2)
        return _input_grads(ctx, dx, dr) + param_grads(ctx.affine, (need_dw, need_db), (dw, db)) + (None, None, None)

    @staticmethod
    def differentiable_backward(ctx, inputs, *grads):
        """backward's formula on Tensors, the statistics recomputed from s = x + r."""
        return _differentiable_grads(ctx, inputs, grads, True)


class AddRMSNormFunction(Function):
    """(x + r, RMSNorm(x + r)) over the trailing ``d`` features (only the latter unless
    ``return_sum``); saves the sum and rstd."""

    @staticmethod
    def forward(ctx, x, r, weight, d, eps, return_sum=True):
        ctx.impl = ADD_RMS_NORM.select(x)
        x2, s, s2, y, y2 = _outputs(x, d)
        _, _, rstd = ctx.impl.add_rms_norm_forward(x2, rows(r, d), flat_param(weight, d), eps, out=y2, sum_out=s2)
        ctx.save_for_backward(s2, rstd, weight)
        ctx.shape, ctx.affine, ctx.return_sum, ctx.eps = x.shape, affine_meta(weight), return_sum, eps
        return (s, y) if return_sum else y

    @staticmethod
    def backward(ctx, *grads):
        ds, dy = _cotangents(ctx, grads)
        s2, rstd, weight = ctx.saved_tensors
        need_dw = ctx.needs_input_grad[2]
        d = s2.shape[1]
        dx, dx2, dr, dr2 = _grad_outputs(ctx, s2)
        _, dw = ctx.impl.add_rms_norm_backward(rows(dy, d), None if ds is None else rows(ds, d), s2, rstd,
                                               flat_param(weight, d), dx is not None, need_dw, dx_out=dx2,
                                               dr_out=dr2)
        return _input_grads(ctx, dx, dr) + param_grads(ctx.affine, (need_dw,), (dw,)) + (None, None, None)

    @staticmethod
    def differentiable_backward(ctx, inputs, *grads):
        """backward's formula on Tensors, rstd recomputed from s = x + r."""
        return _differentiable_grads(ctx, inputs, grads, False)


def _differentiable_grads(ctx, inputs, grads, centered):
    """The Tensor form of both backwards: dL/ds = ds + the norm's dx of dy at s = x + r, for x and r."""
    x, r, weight = inputs[:3]
    ds, dy = _cotangents(ctx, grads)
    nx, nr = ctx.needs_input_grad[:2]
    need = (nx or nr,) + tuple(ctx.needs_input_grad[2:4 if centered else 3])
    dx, dw, db = layer_norm_rows(ctx, x + r, weight, dy, need, ds, centered)
    return (dx if nx else None, dx if nr else None, dw) + ((db,) if centered else ()) + (None, None, None)
