"""GroupNorm: normalize each sample's channels in groups, independently of the batch.

Forward. For x of shape (N, C, *), split the C channels into G groups of K = C / G
consecutive channels. Group (n, g) owns the M = K * prod(*) values x_i = x[n, gK:(g+1)K, ...]:

    mean = (1/M) sum_i x_i,   var = (1/M) sum_i (x_i - mean)^2,   rstd = 1 / sqrt(var + eps)
    xhat_i = (x_i - mean) * rstd
    y_i = gamma_c * xhat_i + beta_c          (c: the channel of element i; affine is per channel)

The statistics are the same in training and eval; G = 1 is LayerNorm over (C, *) with a
per-channel affine, G = C is InstanceNorm.

Backward. With g_i = dL/dy_i and d_i = gamma_c g_i (the gradient reaching xhat_i), the
derivation is BatchNorm's (see batch_norm.py) with the sums running over one group of one
sample instead of over the batch:

    dL/dx_j = (rstd / M) (M d_j - sum_i d_i - xhat_j sum_i d_i xhat_i)      (sums over the group)
    dL/dgamma_c = sum over (n, positions of channel c) of g * xhat,   dL/dbeta_c = sum of g.

No sum crosses samples, so a sample's output and gradient depend on that sample alone.
"""
import math

import numpy as np

from ...autograd.op_function import Function
from ...backends import namespace_of
from .._higher_order import channel_sum, keep_where, norm_input_grad, norm_statistics
from ..unary import relu_backward_reference, relu_forward_reference
from ._dispatch import NORMS, affine_meta, param_grads


def _spatial(a):
    """prod(*) of an (N, C, *) array (spelled out: a -1 in reshape is ambiguous for an empty array)."""
    return math.prod(a.shape[2:])


def _grouped(a, num_groups):
    """(N, C, *) -> (N, G, K * prod(*)): one row per (sample, group)."""
    return a.reshape(a.shape[0], num_groups, a.shape[1] // num_groups * _spatial(a))


def _channel_sum(a):
    """(N, C, *) -> (C,): sum over every axis but the channels."""
    return a.reshape(a.shape[0], a.shape[1], _spatial(a)).sum(axis=(0, 2))


def _affine(y, weight, bias):
    shape = (1, -1) + (1,) * (y.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def group_norm_forward_reference(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Returns (y, mean, rstd); mean and rstd float64 of shape (N, num_groups)."""
    xg = _grouped(x.astype(np.float64), num_groups)
    mean = xg.mean(axis=2)
    var = ((xg - mean[:, :, None]) ** 2).mean(axis=2)
    rstd = 1.0 / namespace_of(x).sqrt(var + eps)
    xhat = ((xg - mean[:, :, None]) * rstd[:, :, None]).reshape(x.shape)
    return _affine(xhat, weight, bias).astype(x.dtype), mean, rstd


def group_norm_backward_reference(dy, x, mean, rstd, weight, num_groups, need_dx=True, need_dweight=True,
                                  need_dbias=True):
    """Returns (dx, dweight, dbias), the weight and bias gradients in float64."""
    g = dy.astype(np.float64)
    xg = _grouped(x.astype(np.float64), num_groups)
    xhat = (xg - mean[:, :, None]) * rstd[:, :, None]
    dweight = _channel_sum(g * xhat.reshape(x.shape))
    dbias = _channel_sum(g)
    d = _grouped(_affine(g, weight, None), num_groups)
    m = xg.shape[2]
    sum_d = d.sum(axis=2, keepdims=True)
    sum_dxhat = (d * xhat).sum(axis=2, keepdims=True)
    dx = rstd[:, :, None] / m * (m * d - sum_d - xhat * sum_dxhat)
    return dx.reshape(x.shape).astype(x.dtype), dweight, dbias


GROUP_NORM = NORMS.kernels(("group_norm_forward", "group_norm_backward"), __name__,
                           cpu="minidl.kernels.cpu.group_norm", cuda="minidl.kernels.cuda.channel_norm")


class GroupNormFunction(Function):
    """Per (sample, group) statistics, per-channel affine; saves x, mean and rstd (N, G)."""

    @staticmethod
    def forward(ctx, x, num_groups, weight, bias, eps):
        ctx.impl = GROUP_NORM.select(x)
        y, mean, rstd = ctx.impl.group_norm_forward(x, num_groups, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.num_groups, ctx.affine, ctx.eps = num_groups, affine_meta(weight, bias), eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        need_x, _, need_w, need_b, _ = ctx.needs_input_grad
        dx, dw, db = ctx.impl.group_norm_backward(dy, x, mean, rstd, weight, ctx.num_groups, need_x, need_w, need_b)
        return (dx if need_x else None, None) + param_grads(ctx.affine, (need_w, need_b), (dw, db)) + (None,)

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors (group_norm_grads)."""
        x, _, weight = inputs[:3]
        need_x, _, need_w, need_b, _ = ctx.needs_input_grad
        dx, dw, db = group_norm_grads(ctx, x, weight, dy, (need_x, need_w, need_b))
        return dx, None, dw, db, None


def group_norm_grads(ctx, x, weight, g, need):
    """(dx, dweight, dbias) of GroupNorm for the Tensors x, weight (or None) and g = dL/dy, with
    recorded ops: each (sample, group)'s mean and rstd recomputed from x, so that the second
    derivative sees them move."""
    n, groups = x.shape[0], ctx.num_groups
    m = x.numel() // (n * groups) if n and groups else 0
    xhat, rstd = norm_statistics(x.reshape(n, groups, m), (2,), ctx.eps)
    dx = dw = db = None
    if need[0]:
        d = g if weight is None else g * weight.reshape((1, -1) + (1,) * (x.ndim - 2))
        dx = norm_input_grad(d.reshape(n, groups, m), xhat, rstd, (2,)).reshape(x.shape)
    if need[1]:
        dw = channel_sum(g * xhat.reshape(x.shape), ctx.affine[0][0])
    if need[2]:
        db = channel_sum(g, ctx.affine[1][0])
    return dx, dw, db


# GroupNorm + ReLU: r = relu(GroupNorm(x) [+ s]) as one node, as BatchNorm + ReLU (batch_norm.py):
# the backward is GroupNorm's backward of g = dy where r != 0 (ReLU's mask: NaN passes, 0 and -0.0
# do not), and the residual's gradient is g
def group_norm_relu_forward_reference(x, num_groups, weight=None, bias=None, eps=1e-5, residual=None):
    """(relu(y [+ residual]), mean, rstd) for group_norm_forward_reference's (y, mean, rstd)."""
    y, mean, rstd = group_norm_forward_reference(x, num_groups, weight, bias, eps)
    return relu_forward_reference(y if residual is None else y + residual)[0], mean, rstd


def group_norm_relu_backward_reference(dy, r, x, mean, rstd, weight, num_groups, need_dx=True, need_dweight=True,
                                       need_dbias=True, need_dresidual=False):
    """(dx, dweight, dbias, dresidual): GroupNorm's backward of g = dy where the output r != 0
    (else 0), and g itself as the residual's gradient (with ``need_dresidual``, else None)."""
    g = relu_backward_reference(r != 0, dy)
    return group_norm_backward_reference(g, x, mean, rstd, weight, num_groups, need_dx, need_dweight,
                                         need_dbias) + (g if need_dresidual else None,)


GROUP_NORM_RELU = NORMS.kernels(("group_norm_relu_forward", "group_norm_relu_backward"), __name__,
                                cpu="minidl.kernels.cpu.group_norm")


class GroupNormReLUFunction(Function):
    """r = relu(GroupNorm(x) [+ s]) (s: a residual of x's shape, or None); saves x, mean, rstd and
    r (ReLU's mask is r != 0)."""

    @staticmethod
    def forward(ctx, x, residual, num_groups, weight, bias, eps):
        ctx.impl = GROUP_NORM_RELU.select(x)
        r, mean, rstd = ctx.impl.group_norm_relu_forward(x, num_groups, weight, bias, eps, residual)
        ctx.save_for_backward(x, weight, mean, rstd, r)
        ctx.num_groups, ctx.affine, ctx.eps = num_groups, affine_meta(weight, bias), eps
        return r

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd, r = ctx.saved_tensors
        need_x, need_s, _, need_w, need_b, _ = ctx.needs_input_grad
        dx, dw, db, ds = ctx.impl.group_norm_relu_backward(dy, r, x, mean, rstd, weight, ctx.num_groups, need_x,
                                                           need_w, need_b, need_s)
        return ((dx if need_x else None, ds if need_s else None, None)
                + param_grads(ctx.affine, (need_w, need_b), (dw, db)) + (None,))

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors: group_norm_grads of g = dy where r != 0, and g for s."""
        x, _, _, weight = inputs[:4]
        need_x, need_s, _, need_w, need_b, _ = ctx.needs_input_grad
        g = keep_where(ctx.saved_tensors[4] != 0, dy)
        dx, dw, db = group_norm_grads(ctx, x, weight, g, (need_x, need_w, need_b))
        return (dx, g if need_s else None, None, dw, db, None)
