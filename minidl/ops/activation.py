"""Activations that are layer-level rather than Tensor methods: GELU (exact and tanh) and dropout."""
import math

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_floating, is_floating
from ..tensor.inplace import maybe_inplace
from ._kernel_switch import LAYER
from ._higher_order import constant
from .low_precision import float32_compute

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_reference(x):
    erf = _erf if type(x) is np.ndarray else namespace_of(x).erf   # a device's own erf
    return (0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))).astype(x.dtype, copy=False)


def gelu_backward_reference(x, g):
    xp = namespace_of(x)
    cdf = 0.5 * (1.0 + (_erf if xp is np else xp.erf)(x / math.sqrt(2.0)))
    pdf = xp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return (g * (cdf + x * pdf)).astype(g.dtype, copy=False)


class _KernelActivation(Function):
    """An elementwise activation with an array-namespace reference and a Numba kernel pair
    (``kernels`` with the names ``<kernel_name>_forward`` and ``<kernel_name>_backward``): forward
    saves x, backward recomputes what it needs from x. Subclasses set ``kernels`` and ``kernel_name``."""
    kernels = kernel_name = None  # set by subclasses

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        ctx.impl = cls.kernels.select(x)
        return getattr(ctx.impl, cls.kernel_name + "_forward")(_contiguous(x))

    @classmethod
    def backward(cls, ctx, g):
        (x,) = ctx.saved_tensors
        return getattr(ctx.impl, cls.kernel_name + "_backward")(_contiguous(x), _contiguous(g))


def _contiguous(a):
    # (reshaped back: ascontiguousarray turns a 0-d array into a 1-d one)
    return namespace_of(a).ascontiguousarray(a).reshape(a.shape)


gelu_forward_reference = gelu_reference   # the names the switch looks up


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class Gelu(_KernelActivation):
    """y = x Phi(x), Phi the standard normal CDF, Phi(x) = (1 + erf(x / sqrt 2)) / 2;
    dy/dx = Phi(x) + x phi(x), with phi(x) = exp(-x**2/2) / sqrt(2 pi)."""
    kernels = LAYER.kernels(("gelu_forward", "gelu_backward"), __name__, cpu="minidl.kernels.cpu.gelu")
    kernel_name = "gelu"

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        cdf = 0.5 * (1.0 + (x / math.sqrt(2.0)).erf())
        pdf = (-0.5 * x * x).exp() / math.sqrt(2.0 * math.pi)
        return g * (cdf + x * pdf)


def gelu_tanh_reference(x):
    t = namespace_of(x).tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    return (0.5 * x * (1 + t)).astype(x.dtype, copy=False)


def gelu_tanh_backward_reference(x, g):
    t = namespace_of(x).tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    return (g * d).astype(g.dtype, copy=False)


gelu_tanh_forward_reference = gelu_tanh_reference


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class GeluTanh(_KernelActivation):
    """y = x (1 + tanh u) / 2 with u = sqrt(2/pi) (x + 0.044715 x**3);
    dy/dx = (1 + t) / 2 + x (1 - t**2) / 2 * sqrt(2/pi) (1 + 3 * 0.044715 x**2), t = tanh u."""
    kernels = LAYER.kernels(("gelu_tanh_forward", "gelu_tanh_backward"), __name__, cpu="minidl.kernels.cpu.gelu")
    kernel_name = "gelu_tanh"

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        t = (_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh()
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x))


def gelu(input, approximate="none"):
    """GELU as ``torch.nn.functional.gelu``: exact (erf) or approximate="tanh"."""
    check_floating("gelu", input.dtype)
    if approximate == "none":
        return Gelu.apply(input)
    if approximate == "tanh":
        return GeluTanh.apply(input)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


class Dropout(Function):
    """y = x * m with m = keep / (1 - p), keep ~ Bernoulli(1 - p) drawn once per element;
    dy/dx = m (the same mask)."""

    @staticmethod
    def forward(ctx, x, mask):
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return g * mask, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (mask,) = ctx.saved_tensors
        return g * constant(mask), None


def dropout_mask(shape, p, dtype):
    """The scaled keep mask, drawn from minidl.random's generator (so md.manual_seed fixes it)."""
    from .. import random
    u = random.generator().random(shape, dtype=np.float32 if np.dtype(dtype) != np.float64 else np.float64)
    if p >= 1.0:
        return np.zeros(shape, dtype=dtype)
    return ((u >= p) * (1.0 / (1.0 - p))).astype(dtype)


def check_dropout_dtype(op, input, p):
    """The kept elements are scaled by 1/(1-p), a float: an integer or bool input cannot hold
    them (NumPy would truncate), so PyTorch raises "result type Float can't be cast to the
    desired output type Long". (p = 1 zeroes everything and needs no scaling.)"""
    if p < 1.0 and not is_floating(input.dtype):
        raise RuntimeError(f"{op}: expected a floating point input in training with 0 < p < 1, got dtype "
                           f"{input.dtype} (result type Float can't be cast to the desired output type)")


def dropout(input, p=0.5, training=True, inplace=False):
    """As ``torch.nn.functional.dropout``: in training, zero each element with probability p
    and scale the rest by 1/(1-p); the identity otherwise. With ``inplace=True`` the result is
    written into ``input``, which is returned (in training; otherwise input is returned as it is)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    check_dropout_dtype("dropout", input, p)
    from .. import backends
    if input.device != "cpu":   # drawn where the data lives: no host -> device copy of a mask
        mask = backends.get(input.device).dropout_mask(input.shape, p, input.dtype)
    else:
        mask = dropout_mask(input.shape, p, input.dtype)
    return maybe_inplace(input, inplace, "dropout_", lambda x: Dropout.apply(x, mask))
