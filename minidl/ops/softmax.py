"""softmax and log_softmax along one dim, both shifted by the max so that inputs near
1e3 do not overflow exp. A row that is all -inf (every key masked) has no finite max: it
comes out NaN, as in PyTorch, and silently (NumPy would warn of inf - inf)."""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_floating
from .low_precision import float32_compute


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class Softmax(Function):
    """y_i = e**(x_i - m) / sum_j e**(x_j - m), m = max_j x_j (the shift cancels).

    The Jacobian is dy_i/dx_j = y_i (delta_ij - y_j), so
    dL/dx_i = sum_j g_j y_j (delta_ij - y_i) = y_i (g_i - sum_j g_j y_j).
    """

    @staticmethod
    def forward(ctx, x, dim):
        xp = namespace_of(x)
        if x.size == 0:     # no entries (a dim of length 0 has no max): empty out, as PyTorch
            return _saved(ctx, x.copy(), dim)
        with np.errstate(invalid="ignore"):
            e = xp.exp(x - x.max(axis=dim, keepdims=True))
            return _saved(ctx, e / e.sum(axis=dim, keepdims=True), dim)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(axis=ctx.dim, keepdims=True)), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        y = Softmax.apply(inputs[0], ctx.dim)
        return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class LogSoftmax(Function):
    """y_i = x_i - m - log sum_j e**(x_j - m).

    dy_i/dx_j = delta_ij - softmax_j, so dL/dx_j = g_j - softmax_j * sum_i g_i.
    """

    @staticmethod
    def forward(ctx, x, dim):
        xp = namespace_of(x)
        if x.size == 0:     # as Softmax
            return _saved(ctx, x.copy(), dim)
        with np.errstate(invalid="ignore"):
            shifted = x - x.max(axis=dim, keepdims=True)
            return _saved(ctx, shifted - xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True)), dim)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        xp = namespace_of(g)
        return g - xp.exp(y) * g.sum(axis=ctx.dim, keepdims=True), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g - Softmax.apply(inputs[0], ctx.dim) * g.sum(ctx.dim, keepdim=True), None


def _saved(ctx, y, dim):
    ctx.save_for_backward(y)
    ctx.dim = dim
    return y


def _dim(x, dim, op):
    if not -max(x.ndim, 1) <= dim < max(x.ndim, 1):
        raise IndexError(f"{op}: dim {dim} out of range for a tensor with {x.ndim} dims")
    return dim % max(x.ndim, 1)


def softmax(x, dim):
    check_floating("softmax", x.dtype)
    return Softmax.apply(x, _dim(x, dim, "softmax"))


def log_softmax(x, dim):
    check_floating("log_softmax", x.dtype)
    return LogSoftmax.apply(x, _dim(x, dim, "log_softmax"))
