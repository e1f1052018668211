"""The residual add fused with LayerNorm / RMSNorm on cuda (the math:
minidl/ops/normalization/residual_norm.py), with the CPU kernels' array-level signatures.

The GPU path composes kernels that exist: the elementwise add (one map kernel writing s), then
the row norm of s (kernels/cuda/layer_norm.py), and in backward the norm's backward followed by
one in-place add of the stream's gradient. That is one pass more each way than the CPU's fused
loops. It is kept because on the GPU these passes are a small part of a Transformer step next
to its GEMMs, and a fused cuda kernel could only be tested here under the simulator, which
checks results, not speed; the op, its saved arrays and its gradients are the same on every
device, so a fused kernel can replace these functions without touching the op.
"""
from .layer_norm import norm_backward, norm_forward, rms_norm_backward


def _sum(x, r, sum_out):
    if sum_out is None:
        return x + r
    sum_out[...] = x + r
    return sum_out


def _plus_stream(dx, ds, dr_out):
    """dx + ds in place, then copied into ``dr_out`` when given (one more pass here)."""
    if dx is not None and ds is not None:
        dx += ds
    if dx is not None and dr_out is not None:
        dr_out[...] = dx
    return dx


def add_layer_norm_forward(x, r, weight, bias, eps, out=None, sum_out=None):
    s = _sum(x, r, sum_out)
    y, mean, rstd = norm_forward(s, weight, bias, eps, center=True, out=out)
    return s, y, mean, rstd


def add_layer_norm_backward(dy, ds, s, mean, rstd, weight, need_dx=True, need_dweight=True, need_dbias=True,
                            dx_out=None, dr_out=None):
    dx, dw, db = norm_backward(dy, s, mean, rstd, weight, need_dx, need_dweight, need_dbias, center=True,
                               dx_out=dx_out)
    return _plus_stream(dx, ds, dr_out), dw, db


def add_rms_norm_forward(x, r, weight, eps, out=None, sum_out=None):
    s = _sum(x, r, sum_out)
    y, _, rstd = norm_forward(s, weight, None, eps, center=False, out=out)
    return s, y, rstd


def add_rms_norm_backward(dy, ds, s, rstd, weight, need_dx=True, need_dweight=True, dx_out=None,
                          dr_out=None):
    dx, dw = rms_norm_backward(dy, s, rstd, weight, need_dx, need_dweight, dx_out=dx_out)
    return _plus_stream(dx, ds, dr_out), dw
