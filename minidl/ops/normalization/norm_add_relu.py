"""BatchNorm or GroupNorm, a residual add and ReLU as one op: r = relu(norm(x) + s), the end of a
ResNet block (s the shortcut).

Forward is the norm's forward with s added before the ReLU. Backward: ReLU's mask is r != 0
(NaN passes, 0 and -0.0 do not), so with g = dL/dr masked by it,

    dL/ds = g where r != 0, else 0
    dL/dx, dL/dgamma, dL/dbeta = the norm's backward of that same masked g

which are exactly the gradients of the three ops run one after the other. The CPU kernels add
s in the norm's output pass and write dL/ds in its first backward pass, which its second pass
then reads instead of dL/dr and r (``minidl.kernels.cpu.batch_norm_relu``, ``group_norm``);
against BatchNorm/GroupNorm + ReLU as one op and a separate add + ReLU, that saves writing
norm(x) and reading it back. The references below run the ops in turn, on every device.
"""
from ...autograd.function import Function
from ..unary import add_relu_forward_reference, relu_backward_reference
from ._dispatch import NORMS, affine_meta, param_grads
from .batch_norm import (_normalized, batch_norm_apply_reference, batch_norm_backward_reference,
                         batch_norm_forward_reference)
from .group_norm import group_norm_backward_reference, group_norm_forward_reference


def _masked(dy, r):
    return relu_backward_reference(r != 0, dy)


# BatchNorm ------------------------------------------------------------------------------------------
def batch_norm_add_relu_forward_reference(x, residual, weight=None, bias=None, eps=1e-5):
    """(relu(y + residual), mean, rstd) for batch_norm_forward_reference's (y, mean, rstd)."""
    y, mean, rstd = batch_norm_forward_reference(x, weight, bias, eps)
    return add_relu_forward_reference(y, residual)[0], mean, rstd


def batch_norm_add_relu_apply_reference(x, residual, mean, rstd, weight=None, bias=None):
    """relu(y + residual) with the given (eval) statistics."""
    return add_relu_forward_reference(batch_norm_apply_reference(x, mean, rstd, weight, bias), residual)[0]


def batch_norm_add_relu_backward_reference(dy, r, x, mean, rstd, weight=None, training=True, need_dx=True,
                                           need_dweight=True, need_dbias=True, need_dresidual=True):
    """(dx, dweight, dbias, dresidual): BatchNorm's backward of dy where r != 0, and that masked dy."""
    g = _masked(dy, r)
    return batch_norm_backward_reference(g, x, mean, rstd, weight, training, None, need_dx, need_dweight,
                                         need_dbias) + (g,)


BATCH_NORM_ADD_RELU = NORMS.kernels(("batch_norm_add_relu_forward", "batch_norm_add_relu_apply",
                                     "batch_norm_add_relu_backward"), __name__,
                                    cpu="minidl.kernels.cpu.batch_norm_relu")


class BatchNormAddReLUFunction(Function):
    """r = relu(gamma * (x - mean) * rstd + beta + s) per channel, statistics and running
    estimates as BatchNormFunction's. Saves x, the statistics and r."""

    @staticmethod
    def forward(ctx, x, residual, weight, bias, running_mean, running_var, training, momentum, eps):
        impl = ctx.impl = BATCH_NORM_ADD_RELU.select(x)
        r, mean, rstd = _normalized(x, running_mean, running_var, training, momentum, eps, None,
                                    lambda: impl.batch_norm_add_relu_forward(x, residual, weight, bias, eps),
                                    lambda mean, rstd: impl.batch_norm_add_relu_apply(x, residual, mean, rstd, weight,
                                                                                      bias))
        ctx.save_for_backward(x, weight, mean, rstd, r)
        ctx.training, ctx.affine = training, affine_meta(weight, bias)
        return r

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd, r = ctx.saved_tensors
        need_x, need_s, need_w, need_b = ctx.needs_input_grad[:4]
        dx, dw, db, ds = ctx.impl.batch_norm_add_relu_backward(dy, r, x, mean, rstd, weight, ctx.training, need_x,
                                                               need_w, need_b, need_s)
        return ((dx if need_x else None, ds if need_s else None) + param_grads(ctx.affine, (need_w, need_b), (dw, db))
                + (None,) * 5)


# GroupNorm ------------------------------------------------------------------------------------------
def group_norm_add_relu_forward_reference(x, residual, num_groups, weight=None, bias=None, eps=1e-5):
    """(relu(y + residual), mean, rstd) for group_norm_forward_reference's (y, mean, rstd)."""
    y, mean, rstd = group_norm_forward_reference(x, num_groups, weight, bias, eps)
    return add_relu_forward_reference(y, residual)[0], mean, rstd


def group_norm_add_relu_backward_reference(dy, r, x, mean, rstd, weight, num_groups, need_dx=True, need_dweight=True,
                                           need_dbias=True, need_dresidual=True):
    """(dx, dweight, dbias, dresidual): GroupNorm's backward of dy where r != 0, and that masked dy."""
    g = _masked(dy, r)
    return group_norm_backward_reference(g, x, mean, rstd, weight, num_groups, need_dx, need_dweight,
                                         need_dbias) + (g,)


GROUP_NORM_ADD_RELU = NORMS.kernels(("group_norm_add_relu_forward", "group_norm_add_relu_backward"), __name__,
                                    cpu="minidl.kernels.cpu.group_norm")


class GroupNormAddReLUFunction(Function):
    """r = relu(GroupNorm(x) + s); saves x, mean, rstd and r."""

    @staticmethod
    def forward(ctx, x, residual, num_groups, weight, bias, eps):
        ctx.impl = GROUP_NORM_ADD_RELU.select(x)
        r, mean, rstd = ctx.impl.group_norm_add_relu_forward(x, residual, num_groups, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd, r)
        ctx.num_groups, ctx.affine = num_groups, affine_meta(weight, bias)
        return r

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd, r = ctx.saved_tensors
        need_x, need_s, _, need_w, need_b, _ = ctx.needs_input_grad
        dx, dw, db, ds = ctx.impl.group_norm_add_relu_backward(dy, r, x, mean, rstd, weight, ctx.num_groups, need_x,
                                                               need_w, need_b, need_s)
        return ((dx if need_x else None, ds if need_s else None, None)
                + param_grads(ctx.affine, (need_w, need_b), (dw, db)) + (None,))
