"""Softmax's relatives, with PyTorch's semantics: softmin (softmax of -x) and gumbel_softmax
(a softmax of logits perturbed by Gumbel noise, a differentiable stand-in for sampling a
category). Both are compositions of recorded ops (neg, add, div, softmax), which is their
definition, so their gradients are those ops' gradients."""
import warnings

import numpy as np

from .. import random
from ..tensor.dtype import check_floating
from ..tensor.tensor import Tensor
from .softmax import softmax


def implicit_softmax_dim(ndim):
    """PyTorch's legacy choice of dim when a softmax-like call is given none."""
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """As ``torch.nn.functional.softmin``: softmax(-x) along ``dim``, so the smallest entry
    gets the largest weight. ``dtype`` casts the input first (to compute in float64, say)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"softmin: expected input to be a Tensor, got {type(input).__name__}")
    if dim is None:
        warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call to include "
                      "dim=X as an argument.", UserWarning, stacklevel=_stacklevel)
        dim = implicit_softmax_dim(input.ndim)
    x = input if dtype is None else input.to(dtype)
    check_floating("softmin", x.dtype)
    return softmax(-x, dim)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """As ``torch.nn.functional.gumbel_softmax``: y = softmax((logits + g) / tau) with
    g = -log(E), E ~ Exponential(1) drawn from minidl.random's generator (so ``md.manual_seed``
    fixes it), i.e. g ~ Gumbel(0, 1). ``hard=True`` returns the one-hot of y's argmax along
    ``dim`` in the forward pass with y's gradient (straight-through: y_hard - y.detach() + y).
    ``eps`` is deprecated in PyTorch and has no effect."""
    if not isinstance(logits, Tensor):
        raise TypeError(f"gumbel_softmax: expected logits to be a Tensor, got {type(logits).__name__}")
    check_floating("gumbel_softmax", logits.dtype)
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    from ..tensor.factories import tensor
    noise = -np.log(random.generator().standard_exponential(tuple(logits.shape)))
    gumbels = tensor(noise.astype(logits.dtype), device=logits.device)
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    soft = y_soft.numpy(force=True)
    axis = dim % max(soft.ndim, 1)
    one_hot = np.zeros_like(soft) if soft.ndim else np.ones_like(soft)   # a 0-d softmax is 1
    if soft.size and soft.ndim:
        np.put_along_axis(one_hot, np.expand_dims(soft.argmax(axis=axis), axis), 1, axis=axis)
    y_hard = tensor(one_hot, device=logits.device)
    return y_hard - y_soft.detach() + y_soft
