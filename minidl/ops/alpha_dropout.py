"""Alpha dropout, as ``torch.nn.functional.alpha_dropout`` / ``feature_alpha_dropout``: dropout
for self-normalising (SELU) networks that keeps an input of mean 0 and variance 1 at mean 0 and
variance 1 (Klambauer et al. 2017).

A dropped element is set to SELU's negative saturation alpha' = -scale * alpha = -1.7580993...
instead of 0, and the result is rescaled and shifted, with keep ~ Bernoulli(1 - p):

    y = a (x keep + alpha' (1 - keep)) + b,   a = ((1 - p) (1 + p alpha'^2)) ** -1/2,   b = -a alpha' p

(a and b chosen so that E[y] = 0, Var[y] = 1 when E[x] = 0, Var[x] = 1). Computed as PyTorch
does, y = x m + c with m = a keep and c = b + a alpha' (1 - keep), that is c = a alpha' (1 - p)
where dropped and -a alpha' p where kept; dy/dx = m (the same mask). p = 1 gives zeros (PyTorch's x * 0);
eval, p = 0 or an empty input return the input as it is.

feature_alpha_dropout draws one keep per (sample, channel): a mask of shape (N, C, 1, ...)
broadcast over the rest, as dropout2d does. The keep masks are ``activation.dropout_mask``'s
(F.dropout's), drawn from minidl's generator; on cuda the elementwise one is drawn on the device
(the backend's ``dropout_mask``), the per-channel one on the host, like the channel dropouts.
"""
import math

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.inplace import maybe_inplace
from ._higher_order import constant
from .activation import check_dropout_dtype, dropout_mask

SELU_NEGATIVE_SATURATION = -1.7580993408473766   # alpha' = -scale * alpha of selu


class AlphaDropout(Function):
    """y = x m + c with m = a keep and c = a alpha' (1 - keep) + b (module docstring); dy/dx = m."""

    @staticmethod
    def forward(ctx, x, m, c):
        ctx.save_for_backward(m)
        return x * m + c

    @staticmethod
    def backward(ctx, g):
        (m,) = ctx.saved_tensors
        return g * m, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (m,) = ctx.saved_tensors
        return g * constant(m), None, None


def alpha_dropout_coefficients(keep, p, dtype):
    """(m, c) of the module docstring from the boolean ``keep`` (on any device), in ``dtype``."""
    xp = namespace_of(keep)
    t = np.dtype(dtype).type
    if p >= 1.0:
        return xp.where(keep, t(0), t(0)), t(0)
    alpha = SELU_NEGATIVE_SATURATION
    a = 1.0 / math.sqrt((1.0 - p) * (1.0 + p * alpha * alpha))
    b = -a * alpha * p
    return xp.where(keep, t(a), t(0)), xp.where(keep, t(b), t(a * alpha + b))


def _alpha_dropout(input, p, training, inplace, feature, op):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    check_dropout_dtype(op, input, p)
    from .. import backends
    if feature:
        shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
        keep = dropout_mask(shape, p, input.dtype) != 0
        if input.device != "cpu":
            keep = backends.get(input.device).from_host(keep)
    elif input.device != "cpu":   # drawn where the data lives, as F.dropout does
        keep = backends.get(input.device).dropout_mask(tuple(input.shape), p, input.dtype) != 0
    else:
        keep = dropout_mask(tuple(input.shape), p, input.dtype) != 0
    m, c = alpha_dropout_coefficients(keep, p, input.dtype)
    return maybe_inplace(input, inplace, f"{op}_", lambda x: AlphaDropout.apply(x, m, c))


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """As ``torch.nn.functional.alpha_dropout``: in training, each element is dropped with
    probability p to SELU's saturation value and the result affinely renormalised (module
    docstring); the identity otherwise."""
    return _alpha_dropout(input, p, training, inplace, False, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """As ``torch.nn.functional.feature_alpha_dropout``: alpha_dropout of whole channels (dim 1)."""
    return _alpha_dropout(input, p, training, inplace, True, "feature_alpha_dropout")
