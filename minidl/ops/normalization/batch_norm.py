"""BatchNorm: normalize every channel with statistics taken across the batch.

Forward. For x of shape (N, C, *), channel c owns the M = N * prod(*) values x_i = x[:, c, ...]:

    mean = (1/M) sum_i x_i
    var  = (1/M) sum_i (x_i - mean)^2            (biased; this is what normalizes)
    rstd = 1 / sqrt(var + eps)
    xhat_i = (x_i - mean) * rstd
    y_i = gamma * xhat_i + beta

In training the running estimates are updated with the *unbiased* variance var * M / (M - 1):
running = (1 - momentum) * running + momentum * batch. A batch without values (M = 0: no
sample, or no position) leaves them as they are, as in PyTorch; its output is empty and its
weight and bias gradients are 0. In eval, mean and var are the running estimates: constants.

Backward (training). Write g_i = dL/dy_i. The affine part gives

    dL/dbeta = sum_i g_i,   dL/dgamma = sum_i g_i xhat_i,   d_i := dL/dxhat_i = gamma g_i.

Now the coupling: mean and rstd are functions of *every* x_j of the channel, over all samples
of the batch, so xhat_i depends on every x_j and not only on x_i:

    d mean / d x_j = 1/M
    d var  / d x_j = (2/M) (x_j - mean)         (the term from d mean drops out: sum_i (x_i - mean) = 0)
    d rstd / d x_j = -1/2 (var + eps)^(-3/2) d var / d x_j = -rstd^2 xhat_j / M
    d xhat_i / d x_j = rstd (delta_ij - 1/M) + (x_i - mean) d rstd / d x_j
                     = (rstd / M) (M delta_ij - 1 - xhat_i xhat_j)

and the chain rule sums over every output that x_j reaches:

    dL/dx_j = sum_i d_i dxhat_i/dx_j = (rstd / M) (M d_j - sum_i d_i - xhat_j sum_i d_i xhat_i).

The two sums run over the whole batch: sample n's gradient depends on the other samples'
inputs and output gradients, just as its output depends on their inputs. (With a random
cotangent this is visible; with g = 1 everywhere the sums cancel exactly and dL/dx = 0.)
In eval mode mean and rstd are constants, the sums vanish: dL/dx = gamma * rstd * g.

Masked BatchNorm1d on (N, C, L) with a bool mask (N, L), True at real tokens: every sum above
runs over the real positions only (M = number of real tokens), so padding changes neither the
statistics nor the running estimates. Padded positions get y = 0 and dL/dx = 0 (no output
depends on them), and their incoming g is ignored: the result equals BatchNorm on the real
tokens alone, scattered back into a zero-padded tensor.
"""
import numpy as np

from ...autograd.op_function import Function
from ...backends import namespace_of
from .._higher_order import channel_sum, constant, keep_where, norm_input_grad, norm_statistics
from .._quiet import quiet
from .._saved import keep_for_backward
from ..unary import relu_backward_reference, relu_forward_reference
from ._dispatch import NORMS, affine_meta, param_grads
from .running_stats import update_running_stats


def _axes(x):
    return (0,) + tuple(range(2, x.ndim))


def _per_channel(v, x):
    return v.reshape((1, -1) + (1,) * (x.ndim - 2))


def _mask_like(mask, x):
    """(N, L) -> (N, 1, L), broadcasting over channels."""
    return None if mask is None else mask.astype(bool)[:, None, :]


def batch_norm_forward_reference(x, weight=None, bias=None, eps=1e-5, mask=None, stats=None):
    """Returns (y, mean, rstd); mean and rstd are float64 of shape (C,). ``stats=(mean, rstd)``
    uses given statistics (eval) instead of the batch's."""
    xp = namespace_of(x)
    xf = x.astype(np.float64)
    axes = _axes(x)
    m = _mask_like(mask, x)
    if stats is None:
        if m is None:
            w, count = 1.0, x.size / max(x.shape[1], 1)
        else:
            w = m.astype(np.float64)
            count = w.sum()
        with np.errstate(invalid="ignore", divide="ignore"):   # no samples: NaN statistics, as PyTorch's
            mean = (xf * w).sum(axis=axes) / count
            var = ((xf - _per_channel(mean, x)) ** 2 * w).sum(axis=axes) / count
            rstd = 1.0 / xp.sqrt(var + eps)
    else:
        mean, rstd = stats
    y = (xf - _per_channel(mean, x)) * _per_channel(rstd, x)
    if weight is not None:
        y = y * _per_channel(weight, x)
    if bias is not None:
        y = y + _per_channel(bias, x)
    if m is not None:
        y = xp.where(m, y, 0.0)
    return y.astype(x.dtype), mean, rstd


def batch_norm_apply_reference(x, mean, rstd, weight=None, bias=None, mask=None):
    """y with the given (eval) statistics."""
    return batch_norm_forward_reference(x, weight, bias, mask=mask, stats=(mean, rstd))[0]


def batch_norm_statistics_reference(running_mean, running_var, eps, dtype):
    """Eval mode's (mean, rstd): the running estimates as float64 constants (``dtype``, x's, is for
    the implementations that keep statistics in an accumulator dtype). A negative running_var
    (loaded, or edited by hand) gives NaN silently, as in PyTorch."""
    mean = running_mean.astype(np.float64)
    with quiet():
        return mean, 1.0 / namespace_of(running_var).sqrt(running_var.astype(np.float64) + eps)


def batch_norm_backward_reference(dy, x, mean, rstd, weight=None, training=True, mask=None, need_dx=True,
                                  need_dweight=True, need_dbias=True):
    """Returns (dx, dweight, dbias), the weight and bias gradients in float64."""
    xp = namespace_of(x)
    axes = _axes(x)
    m = _mask_like(mask, x)
    g = dy.astype(np.float64) if m is None else xp.where(m, dy.astype(np.float64), 0.0)
    mean, rstd = _per_channel(mean, x), _per_channel(rstd, x)
    xhat = (x.astype(np.float64) - mean) * rstd
    dbias = g.sum(axis=axes)
    dweight = (g * xhat).sum(axis=axes)
    d = g if weight is None else g * _per_channel(weight, x)
    if training:
        count = x.size / max(x.shape[1], 1) if m is None else mask.astype(np.float64).sum()
        sum_d = d.sum(axis=axes, keepdims=True)
        sum_dxhat = (d * xhat).sum(axis=axes, keepdims=True)
        dx = rstd / count * (count * d - sum_d - xhat * sum_dxhat)
    else:
        dx = rstd * d
    if m is not None:
        dx = xp.where(m, dx, 0.0)
    return dx.astype(x.dtype), dweight, dbias


BATCH_NORM = NORMS.kernels(("batch_norm_forward", "batch_norm_apply", "batch_norm_backward", "batch_norm_statistics"),
                           __name__, cpu="minidl.kernels.cpu.batch_norm", cuda="minidl.kernels.cuda.channel_norm",
                           fallback=("batch_norm_statistics",))


def _normalized(x, running_mean, running_var, training, momentum, eps, mask, with_batch_stats, with_stats):
    """(y, mean, rstd): in training ``with_batch_stats()``, whose statistics are then folded into
    the running estimates; in eval ``with_stats(mean, rstd)`` of the running estimates."""
    if training:
        y, mean, rstd = with_batch_stats()
        count = x.size / max(x.shape[1], 1) if mask is None or x.size == 0 else mask.astype(mean.dtype).sum()
        update_running_stats(running_mean, running_var, mean, 1.0 / rstd ** 2 - eps, count, momentum)
    else:
        mean, rstd = BATCH_NORM.select(x).batch_norm_statistics(running_mean, running_var, eps, x.dtype)
        y = with_stats(mean, rstd)
    return y, mean, rstd


class BatchNormFunction(Function):
    """y = gamma * (x - mean) * rstd + beta per channel; training uses (and, if running tensors
    are given, folds into them) the batch statistics, eval the running ones. Saves x and the
    two (C,) statistics; xhat is recomputed in backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps, mask):
        impl = ctx.impl = BATCH_NORM.select(x)
        y, mean, rstd = _normalized(x, running_mean, running_var, training, momentum, eps, mask,
                                    lambda: impl.batch_norm_forward(x, weight, bias, eps, mask),
                                    lambda mean, rstd: impl.batch_norm_apply(x, mean, rstd, weight, bias, mask))
        ctx.save_for_backward(x, weight, mean, rstd, keep_for_backward(ctx, mask))   # the caller's mask may change
        ctx.training, ctx.affine, ctx.eps = training, affine_meta(weight, bias), eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd, mask = ctx.saved_tensors
        need = ctx.needs_input_grad[:3]
        dx, dw, db = ctx.impl.batch_norm_backward(dy, x, mean, rstd, weight, ctx.training, mask, *need)
        return (dx if need[0] else None,) + param_grads(ctx.affine, need[1:], (dw, db)) + (None,) * 6

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors (batch_norm_grads); the running estimates are constants."""
        _, _, mean, rstd, mask = ctx.saved_tensors
        return batch_norm_grads(ctx, inputs[0], inputs[1], dy, mean, rstd, mask, ctx.needs_input_grad[:3]) + (None,) * 6


def batch_norm_grads(ctx, x, weight, g, mean, rstd, mask, need, dims=None, training=None):
    """(dx, dweight, dbias) of a channel norm for the Tensors x, weight (or None) and g = dL/dy,
    with recorded ops. In training (``training``, default ``ctx.training``) mean and rstd are recomputed from x over
    ``dims`` (default BatchNorm's: every dim but 1; InstanceNorm's: the spatial dims), so their
    dependence on x is differentiated too; in eval they are the given (C,) arrays, constants.
    ``mask`` (N, L) or None: masked BatchNorm1d (statistics and gradients over the real tokens)."""
    dims = _axes(x) if dims is None else dims
    training = ctx.training if training is None else training
    w = count = None
    if mask is not None:
        m = _mask_like(mask, x)
        w, count = constant(m.astype(x.dtype)), float(mask.astype(np.float64).sum())
        g = keep_where(m, g)
    if training:
        xhat, rstd_t = norm_statistics(x, dims, ctx.eps, True, w, count)
    else:
        rstd_t = constant(_per_channel(rstd, x).astype(x.dtype))
        xhat = (x - constant(_per_channel(mean, x).astype(x.dtype))) * rstd_t
    dx = dw = db = None
    if need[0]:
        d = g if weight is None else g * weight.reshape((1, -1) + (1,) * (x.ndim - 2))
        dx = norm_input_grad(d, xhat, rstd_t, dims, True, w, count) if training else d * rstd_t
        if mask is not None:
            dx = keep_where(m, dx)
    if need[1]:
        dw = channel_sum(g * xhat, (x.shape[1],))
    if need[2]:
        db = channel_sum(g, (x.shape[1],))
    return dx, dw, db


# BatchNorm + ReLU -------------------------------------------------------------------------------
# r = relu(BN(x)) as one node: the pair a CNN block runs after each convolution; and with a
# residual s added before the ReLU, r = relu(BN(x) + s): the end of a ResNet block, s its
# shortcut. ReLU's mask is r != 0 (NaN passes, 0 and -0.0 do not), so with g = dy where r != 0
# (else 0),
#
#     dL/ds = g,   dL/dx, dL/dgamma, dL/dbeta = BatchNorm's backward of g,
#
# exactly the gradients of the ops run one after the other. The CPU kernels fold the ReLU (and
# the add) into BatchNorm's passes (``minidl.kernels.cpu.batch_norm_relu``): no ReLU pass, no mask,
# and no sum written and read back.
def batch_norm_relu_forward_reference(x, weight=None, bias=None, eps=1e-5, residual=None):
    """(relu(y [+ residual]), mean, rstd) for batch_norm_forward_reference's (y, mean, rstd)."""
    y, mean, rstd = batch_norm_forward_reference(x, weight, bias, eps)
    return relu_forward_reference(y if residual is None else y + residual)[0], mean, rstd


def batch_norm_relu_apply_reference(x, mean, rstd, weight=None, bias=None, residual=None):
    """relu(y [+ residual]) with the given (eval) statistics."""
    y = batch_norm_apply_reference(x, mean, rstd, weight, bias)
    return relu_forward_reference(y if residual is None else y + residual)[0]


def batch_norm_relu_backward_reference(dy, r, x, mean, rstd, weight=None, training=True, need_dx=True,
                                       need_dweight=True, need_dbias=True, need_dresidual=False):
    """(dx, dweight, dbias, dresidual): BatchNorm's backward of g = dy where the output r != 0
    (else 0), and g itself as the residual's gradient (with ``need_dresidual``, else None)."""
    g = relu_backward_reference(r != 0, dy)
    return batch_norm_backward_reference(g, x, mean, rstd, weight, training, None, need_dx, need_dweight,
                                         need_dbias) + (g if need_dresidual else None,)


BATCH_NORM_RELU = NORMS.kernels(("batch_norm_relu_forward", "batch_norm_relu_apply", "batch_norm_relu_backward"),
                                __name__, cpu="minidl.kernels.cpu.batch_norm_relu")


class BatchNormReLUFunction(Function):
    """r = relu(gamma * (x - mean) * rstd + beta [+ s]) per channel (s: a residual of x's shape, or
    None), statistics and running estimates as BatchNormFunction's. Saves x, the statistics and r
    (ReLU's mask is r != 0)."""

    @staticmethod
    def forward(ctx, x, residual, weight, bias, running_mean, running_var, training, momentum, eps):
        impl = ctx.impl = BATCH_NORM_RELU.select(x)
        r, mean, rstd = _normalized(x, running_mean, running_var, training, momentum, eps, None,
                                    lambda: impl.batch_norm_relu_forward(x, weight, bias, eps, residual),
                                    lambda mean, rstd: impl.batch_norm_relu_apply(x, mean, rstd, weight, bias,
                                                                                  residual))
        ctx.save_for_backward(x, weight, mean, rstd, r)
        ctx.training, ctx.affine, ctx.eps = training, affine_meta(weight, bias), eps
        return r

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd, r = ctx.saved_tensors
        need_x, need_s, need_w, need_b = ctx.needs_input_grad[:4]
        dx, dw, db, ds = ctx.impl.batch_norm_relu_backward(dy, r, x, mean, rstd, weight, ctx.training, need_x,
                                                           need_w, need_b, need_s)
        return ((dx if need_x else None, ds if need_s else None) + param_grads(ctx.affine, (need_w, need_b), (dw, db))
                + (None,) * 5)

    @staticmethod
    def differentiable_backward(ctx, inputs, dy):
        """backward's formula on Tensors: batch_norm_grads of g = dy where r != 0, and g for s."""
        x, _, weight = inputs[:3]
        _, _, mean, rstd, r = ctx.saved_tensors
        need_x, need_s, need_w, need_b = ctx.needs_input_grad[:4]
        g = keep_where(r != 0, dy)
        dx, dw, db = batch_norm_grads(ctx, x, weight, g, mean, rstd, None, (need_x, need_w, need_b))
        return (dx, g if need_s else None, dw, db) + (None,) * 5
