"""F.local_response_norm (AlexNet's lateral inhibition), as PyTorch's: each activation is
divided by the energy of its neighbours across channels (dim 1).

With W(c) = channels c - n//2 .. c + (n-1)//2 (clipped to the tensor), s_c = sum_{c' in W(c)} x_c'^2,
d_c = k + alpha / n * s_c:

    y_c = x_c d_c**-beta
    dL/dx_j = g_j d_j**-beta - (2 alpha beta / n) x_j sum_{c : j in W(c)} g_c x_c d_c**(-beta-1)

The sum in the last line runs over the windows containing j, which is the window sum with
its two sides swapped (the adjoint of a window sum).

Under autocast the dtype follows PyTorch's composition: it sums the window of a 4-D or 5-D
input with avg_pool3d, which its CPU autocast runs in float32, so d and then y = x / d**beta
come out in float32 for a float16/bfloat16 input; a 3-D input goes through avg_pool2d, which has
no rule, and stays in its dtype. Here the whole op then runs on the input cast to float32
(PyTorch squares in the low dtype before the cast: values within that rounding).
"""
import numpy as np

from ..autograd import autocast_state
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.tensor import Tensor


def window_sum(a, before, after):
    """out[:, c] = sum of a[:, c - before .. c + after] along dim 1 (positions past the edges are 0)."""
    xp = namespace_of(a)
    C = a.shape[1]
    pad = [(0, 0)] * a.ndim
    pad[1] = (before + 1, after)
    csum = xp.cumsum(xp.pad(a, pad), axis=1)
    return csum[:, before + 1 + after: before + 1 + after + C] - csum[:, :C]


class LocalResponseNorm(Function):
    """See the module docstring."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        d = k + alpha / size * window_sum(x * x, size // 2, (size - 1) // 2)
        y = x * d ** -beta
        ctx.save_for_backward(x, d)
        ctx.args = (size, alpha, beta)
        return y.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, d = ctx.saved_tensors
        size, alpha, beta = ctx.args
        inner = window_sum(g * x * d ** (-beta - 1), (size - 1) // 2, size // 2)
        dx = g * d ** -beta - (2 * alpha * beta / size) * x * inner
        return dx.astype(x.dtype, copy=False), None, None, None, None


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """As ``torch.nn.functional.local_response_norm`` over (N, C, *) input."""
    if not isinstance(input, Tensor):
        raise TypeError(f"local_response_norm: expected a Tensor input, got {type(input).__name__}")
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"local_response_norm: expected a positive int size, got {size!r}")
    if input.numel() == 0:
        return input
    if input.ndim >= 4 and input.dtype.name in ("float16", "bfloat16") and autocast_state.state.on:
        if autocast_state.casts("avg_pool3d", "cpu" if type(input._data) is np.ndarray else "cuda"):
            input = input.float()   # (see the module docstring)
    return LocalResponseNorm.apply(input, size, float(alpha), float(beta), float(k))
