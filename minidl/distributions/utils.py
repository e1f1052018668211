"""Helpers the distributions share, as torch.distributions.utils: broadcasting parameters,
converting between probabilities and logits, lazily computed parameters, and drawing the
standard noise of a reparameterised sample from minidl's global generator (so ``md.manual_seed``
makes every sample reproducible).
"""
import numbers
from functools import update_wrapper
from operator import attrgetter

import numpy as np

from .. import autograd
from ..tensor import Tensor
from ..tensor.dtype_info import finfo, get_default_dtype
from ..tensor.generator import numpy_generator
from ..tensor.size import Size

euler_constant = 0.57721566490153286060   # the Euler-Mascheroni constant

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits", "lazy_property",
           "tril_matrix_to_vec", "vec_to_tril_matrix"]


def broadcast_all(*values):
    """Broadcast tensors and numbers together; numbers become tensors of the first tensor's dtype and
    device (the default dtype when all are numbers), as torch.distributions.utils.broadcast_all."""
    import minidl as md
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of Number, minidl.Tensor or objects "
                         "implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        first = next((v for v in values if isinstance(v, Tensor)), None)
        opts = dict(dtype=get_default_dtype()) if first is None else dict(dtype=first.dtype, device=first.device)
        values = [v if isinstance(v, Tensor) else md.tensor(v, **opts) for v in values]
    return md.broadcast_tensors(*values)


def _host_draw(draw, shape, dtype, device):
    """A leaf tensor of ``shape`` holding ``draw(rng, shape)`` (a NumPy draw from the global generator)."""
    import minidl as md
    data = np.asarray(draw(numpy_generator(None), tuple(shape)))
    return md.tensor(data, dtype=dtype, device=device)


def _standard_normal(shape, dtype, device):
    import minidl as md
    return md.randn(tuple(shape), dtype=dtype, device=device)


def _uniform01(shape, dtype, device):
    import minidl as md
    return md.rand(tuple(shape), dtype=dtype, device=device)


def _pad_last(x, left, right, value):
    """``x`` padded with ``value``: ``left`` entries before and ``right`` after along its last dim."""
    from ..nn import functional as F
    return F.pad(x, (left, right), value=value)


def _sum_rightmost(value, dim):
    """Sum out the ``dim`` rightmost dims of ``value``."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    """sigmoid(logits) for a binary variable; softmax over the last dim otherwise."""
    if is_binary:
        return logits.sigmoid()
    return logits.softmax(-1)


def clamp_probs(probs):
    """Probabilities clamped to [eps, 1 - eps] (eps of their dtype), so their logs stay finite."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """log(p) - log(1 - p) for a binary variable; log(p) otherwise (each on clamped p)."""
    ps = clamp_probs(probs)
    if is_binary:
        return ps.log() - (-ps).log1p()
    return ps.log()


def _probs_or_logits(probs, logits):
    """(name, value) of the one of ``probs`` and ``logits`` that was given; ValueError unless exactly one was."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    return ("probs", probs) if probs is not None else ("logits", logits)


def _probs_logits_properties(is_binary):
    """The lazy ``logits`` and ``probs`` of a distribution given by either one: each is computed from
    the other on first use (``is_binary``: sigmoid/logit of one probability, else softmax/log over the
    last dim). Use as ``logits, probs = _probs_logits_properties(is_binary=True)`` in a class body."""
    def logits(self):
        return probs_to_logits(self.probs, is_binary=is_binary)

    def probs(self):
        return logits_to_probs(self.logits, is_binary=is_binary)
    return lazy_property(logits), lazy_property(probs)


def _attr_property(name, doc=None):
    """A read-only property returning the attribute ``name``: for a moment that is a parameter (a
    Normal's mean and mode are its loc)."""
    return property(attrgetter(name), doc=doc)


class lazy_property:
    """A property computed on first access (with grad enabled, so it stays differentiable) and then
    stored on the instance; how a distribution keeps only the parameterisation it was given."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with autograd.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _tril_mask(n, diag):
    ar = np.arange(n)
    return ar[None, :] < ar[:, None] + (diag + 1)


def tril_matrix_to_vec(mat, diag=0):
    """The lower-triangular elements of a (batch of) D x D matrix, in row order."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    import minidl as md
    idx = md.tensor(np.flatnonzero(_tril_mask(n, diag)))
    return mat.reshape(tuple(mat.shape[:-2]) + (n * n,))[..., idx]


def vec_to_tril_matrix(vec, diag=0):
    """The inverse of ``tril_matrix_to_vec``: a (batch of) lower-triangular D x D matrix."""
    m = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * m + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if round(n) - n > finfo(vec.dtype).eps:
        raise ValueError(f"The size of last dimension is {m} which cannot be expressed as "
                         "the lower triangular part of a square D x D matrix.")
    n = round(n)
    import minidl as md
    flat = np.flatnonzero(_tril_mask(n, diag))
    # scatter the vector into the flat matrix with a differentiable gather from [0, vec]
    src = np.full(n * n, m, dtype=np.int64)
    src[flat] = np.arange(m)
    padded = md.cat([vec, vec.new_zeros(tuple(vec.shape[:-1]) + (1,))], -1)
    return padded[..., md.tensor(src)].reshape(tuple(vec.shape[:-1]) + (n, n))


def _size(shape):
    return shape if isinstance(shape, Size) else Size(tuple(shape))


def _softplus(x):
    """ln(1 + e**x) = -ln sigmoid(-x): LogSigmoid's op is stable for any x and has the derivative
    sigmoid(x) everywhere, 1/2 at 0 included (a max(x, 0) composition would not)."""
    from ..ops.activation_elementwise import logsigmoid
    return -logsigmoid(-x)


def _bce_with_logits(logits, target):
    """-(t ln sigmoid(l) + (1 - t) ln(1 - sigmoid(l))) = softplus(l) - l t, elementwise."""
    return _softplus(logits) - logits * target


def _where(cond, value, x):
    """x with ``value`` (a number) where ``cond`` holds; differentiable in x elsewhere."""
    import minidl as md
    return md.where(cond, md.full_like(x, value), x)


def _param_shape(self):
    """The shape of the parameter the distribution was given (probs or logits)."""
    return self._param.size()


_param_shape = property(_param_shape)


def _delegated(attr, *names):
    """Read-only properties returning ``getattr(self.<attr>, name)`` for each name: for a distribution
    built on another (a OneHotCategorical's probs are its Categorical's)."""
    return tuple(property(attrgetter(f"{attr}.{name}"), doc=f"The {name} of ``{attr}``.") for name in names)
