"""Weight Standardization (Qiao et al. 2019): each output channel's filter standardized to zero
mean and unit variance before the convolution uses it.

Forward. For a weight W of shape (O, *) (a convolution's (O, C/G, kH, kW)), output channel o owns
the K = prod(*) values w_k = W[o, ...]:

    mu   = (1/K) sum_k w_k
    var  = (1/K) sum_k (w_k - mu)^2
    rstd = 1 / sqrt(var + eps)
    what_k = (w_k - mu) rstd

(The paper's code divides by the unbiased std plus eps; this is the biased variance with eps
inside the square root, as timm's StdConv2d and the NF-ResNet code. The difference is a factor
sqrt(K / (K - 1)) on every filter, which the following norm removes.)

Backward. Each row is a LayerNorm without affine over the filter's K values, so with
g_k = dL/dwhat_k (from the convolution's weight gradient) and the derivation of
``normalization/layer_norm.py``:

    dxhat_j / dw_k = rstd (delta_jk - 1/K - what_j what_k / K)
    dL/dw_k = rstd (g_k - mean_j g_j - what_k mean_j (g_j what_j)).

The result is orthogonal to the constant filter and (with eps = 0; eps leaves a trace) to the
centred filter: shifting or rescaling a filter changes nothing downstream, so no gradient points
that way (a filter's scale gets no gradient, which is why WS is paired with GroupNorm or BatchNorm,
whose affine supplies the scale).

Weights are small (a ResNet's largest filter bank is 64 x 576 values) and standardized once per
step, so this is not a hot path: the readable array-namespace code below runs on every device
(NumPy on the CPU, the device's array namespace on cuda), with no separate kernel.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of


def weight_standardization_forward(w, eps):
    """(what, rstd): what of w's shape and dtype, rstd float64 (O,) (statistics in float64)."""
    xp = namespace_of(w)
    if w.size == 0:     # no filter, or filters of no value: nothing to standardize
        return w.copy(), xp.ones(w.shape[0], np.float64)
    rows = w.reshape(w.shape[0], w.size // w.shape[0]).astype(np.float64)
    centred = rows - rows.mean(axis=1).reshape(-1, 1)
    rstd = 1.0 / xp.sqrt((centred * centred).mean(axis=1) + eps)
    return (centred * rstd.reshape(-1, 1)).reshape(w.shape).astype(w.dtype), rstd


def weight_standardization_backward(g, what, rstd):
    """dL/dw from g = dL/dwhat, the forward's what and rstd (formula in the module docstring)."""
    if g.size == 0:
        return g.copy()
    gr = g.reshape(g.shape[0], g.size // g.shape[0]).astype(np.float64)
    wr = what.reshape(gr.shape).astype(np.float64)
    dw = rstd.reshape(-1, 1) * (gr - gr.mean(axis=1).reshape(-1, 1) - wr * (gr * wr).mean(axis=1).reshape(-1, 1))
    return dw.reshape(g.shape).astype(g.dtype)


class WeightStandardization(Function):
    """what = (w - mean) / sqrt(var + eps) per output channel (dim 0). Saves what and rstd."""

    @staticmethod
    def forward(ctx, w, eps):
        what, rstd = weight_standardization_forward(w, eps)
        ctx.save_for_backward(what, rstd)
        return what

    @staticmethod
    def backward(ctx, g):
        what, rstd = ctx.saved_tensors
        return weight_standardization_backward(g, what, rstd), None


