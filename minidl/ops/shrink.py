"""Shrinkage and thresholding activations, with PyTorch's semantics: hardshrink, softshrink,
threshold, and rrelu (leaky ReLU with a random slope in training).

hardshrink, softshrink and threshold are ``activation_elementwise.Elementwise`` ops: y = f(x)
with dL/dx = g f'(x), f' in the class docstring. They are written as PyTorch's kernels compare
(``x <= threshold``, ``-lambd <= x <= lambd``), so a NaN input passes through as NaN, as there.

rrelu in training draws one slope r ~ U(lower, upper) per element from minidl's generator
(``md.manual_seed`` fixes it), y = x for x > 0 and r x otherwise, and backward multiplies by the
same slopes; in eval it is leaky_relu with the mean slope (lower + upper) / 2. PyTorch draws
only for the elements x <= 0; drawing for every element keeps the draw independent of the
values (same seed, same slopes), and the slopes of x > 0 are never used.

``inplace=True`` (threshold, rrelu) overwrites the input with y and returns it (tensor/inplace.py).
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import holds_numbers
from ..tensor.inplace import maybe_inplace
from ..tensor.tensor import Tensor
from ._higher_order import constant, keep_where
from .activation_elementwise import Elementwise, LeakyReLU, _floating


class Hardshrink(Elementwise):
    """y = x where |x| > lambd, else 0;  dy/dx = 1 where |x| > lambd, else 0 (0 at |x| = lambd)."""

    @staticmethod
    def f(xp, x, lambd):
        return xp.where((x >= -lambd) & (x <= lambd), 0, x)

    @staticmethod
    def df(xp, x, y, lambd):
        return xp.where((x >= -lambd) & (x <= lambd), 0.0, 1.0)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]._data
        (lambd,) = ctx.constants
        return keep_where(~((x >= -lambd) & (x <= lambd)), g), None


class Softshrink(Elementwise):
    """y = x - lambd for x > lambd, x + lambd for x < -lambd, else 0 (lambd >= 0);
    dy/dx = 1 where |x| > lambd, else 0 (0 at |x| = lambd)."""

    @staticmethod
    def f(xp, x, lambd):
        return xp.where(x > lambd, x - lambd, xp.where(x < -lambd, x + lambd, x * 0))

    @staticmethod
    def df(xp, x, y, lambd):
        return xp.where((x >= -lambd) & (x <= lambd), 0.0, 1.0)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]._data
        (lambd,) = ctx.constants
        return keep_where(~((x >= -lambd) & (x <= lambd)), g), None


class Threshold(Elementwise):
    """y = value where x <= threshold, else x;  dy/dx = 0 where x <= threshold, else 1."""

    @staticmethod
    def f(xp, x, threshold, value):
        return xp.where(x <= threshold, value, x)

    @staticmethod
    def df(xp, x, y, threshold, value):
        return xp.where(x <= threshold, 0.0, 1.0)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        threshold, _ = ctx.constants
        return keep_where(~(inputs[0]._data <= threshold), g), None, None


class RReLU(Function):
    """Training: y = x n with n = 1 where x > 0 and n = r (the drawn slope) elsewhere;
    dy/dx = n (the same slopes)."""

    @staticmethod
    def forward(ctx, x, slopes):
        xp = namespace_of(x)
        noise = xp.where(x > 0, 1, slopes).astype(x.dtype, copy=False)
        ctx.save_for_backward(noise)
        return x * noise

    @staticmethod
    def backward(ctx, g):
        (noise,) = ctx.saved_tensors
        return g * noise, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (noise,) = ctx.saved_tensors
        return g * constant(noise), None


# functional entry points -----------------------------------------------------------------

def hardshrink(input, lambd=0.5):
    """As ``torch.nn.functional.hardshrink``: x where |x| > lambd, else 0."""
    return Hardshrink.apply(_floating("hardshrink", input), float(lambd))


def softshrink(input, lambd=0.5):
    """As ``torch.nn.functional.softshrink``: x shrunk towards 0 by lambd (0 inside [-lambd, lambd])."""
    _floating("softshrink", input)
    if not lambd >= 0:
        try:
            limit = float(np.finfo(np.dtype(input.dtype)).max)
        except ValueError:   # bfloat16: NumPy's finfo does not know it
            limit = 3.3895313892515355e38
        raise RuntimeError(f"lambda must be in range [0, {limit:g}] for input dtype {input.dtype}, but found {lambd}")
    return Softshrink.apply(input, float(lambd))


def threshold(input, threshold, value, inplace=False):
    """As ``torch.nn.functional.threshold``: value where x <= threshold, else x. Like PyTorch's, it
    takes integer tensors too (the result in their dtype), not bool ones."""
    if not isinstance(input, Tensor):
        raise TypeError(f"threshold: expected input to be a Tensor, got {type(input).__name__}")
    if not holds_numbers(input.dtype, "iuf"):
        raise NotImplementedError(f"threshold: not implemented for dtype {input.dtype}; expected a floating point "
                                  "or integer input")
    return maybe_inplace(input, inplace, "threshold_", lambda x: Threshold.apply(x, threshold, value))


def _check_bounds(lower, upper):
    if not lower <= upper:
        raise RuntimeError(f"Lower bound should be less than or equal to the upper bound (rrelu: lower={lower}, "
                           f"upper={upper})")


def rrelu_slopes(shape, lower, upper, dtype):
    """One slope per element from U(lower, upper), drawn from minidl.random's generator on the
    host (float32 unless dtype is float64, as dropout_mask draws)."""
    from .. import random
    u = random.generator().random(shape, dtype=np.float64 if np.dtype(dtype) == np.float64 else np.float32)
    return (lower + (upper - lower) * u).astype(dtype)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """As ``torch.nn.functional.rrelu``: leaky_relu with slope r ~ U(lower, upper) drawn per element
    in training, and the mean slope (lower + upper) / 2 otherwise."""
    _floating("rrelu", input)
    _check_bounds(lower, upper)
    if not training:
        return maybe_inplace(input, inplace, "rrelu_", lambda x: LeakyReLU.apply(x, (lower + upper) / 2))
    slopes = rrelu_slopes(input.shape, float(lower), float(upper), input.dtype)
    if input.device != "cpu":   # drawn on the host (minidl's generator), like the channel-dropout masks
        from .. import backends
        slopes = backends.get(input.device).from_host(slopes)
    return maybe_inplace(input, inplace, "rrelu_", lambda x: RReLU.apply(x, slopes))

