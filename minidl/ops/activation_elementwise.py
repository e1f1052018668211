"""Elementwise activations beyond ReLU/tanh/sigmoid/GELU, with PyTorch's semantics:
silu, elu, selu, celu, leaky_relu, relu6, hardtanh, hardsigmoid, hardswish, softplus,
softsign, mish, logsigmoid, tanhshrink; and the two with more than one operand, prelu (a
learned slope) and glu (one half of the input gates the other).

Each elementwise one is y = f(x; constants) with dL/dx = g f'(x), f' stated in the class
docstring and written from x (and y, where that is what f' is made of). ``inplace=True``
overwrites the input with y and returns it, as PyTorch does (tensor/inplace.py's rules: not on
a leaf that requires grad, and not on a tensor whose values a recorded op still needs).
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_floating
from ..tensor.inplace import maybe_inplace
from ..tensor.tensor import Tensor
from ._broadcast import unbroadcast
from ._higher_order import keep_where, sum_to


class Elementwise(Function):
    """Subclasses define ``f(xp, x, *constants)`` and ``df(xp, x, y, *constants)``."""

    @staticmethod
    def f(xp, x, *constants):
        raise NotImplementedError

    @staticmethod
    def df(xp, x, y, *constants):
        raise NotImplementedError

    @classmethod
    def forward(cls, ctx, x, *constants):
        with np.errstate(over="ignore"):
            y = cls.f(namespace_of(x), x, *constants).astype(x.dtype, copy=False)
        ctx.save_for_backward(x, y)
        ctx.constants = constants
        return y

    @classmethod
    def backward(cls, ctx, g):
        x, y = ctx.saved_tensors
        with np.errstate(over="ignore", invalid="ignore"):
            dx = (g * cls.df(namespace_of(x), x, y, *ctx.constants)).astype(x.dtype, copy=False)
        return (dx,) + (None,) * len(ctx.constants)


def _sigmoid(xp, x):
    e = xp.exp(-xp.abs(x))   # never overflows
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(xp, x):
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


class SiLU(Elementwise):
    """y = x s(x), s the sigmoid;  dy/dx = s(x) (1 + x (1 - s(x)))."""

    @staticmethod
    def f(xp, x):
        return x * _sigmoid(xp, x)

    @staticmethod
    def df(xp, x, y):
        s = _sigmoid(xp, x)
        return s * (1 + x * (1 - s))

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        s = x.sigmoid()
        return g * (s * (1 + x * (1 - s)))


class ELU(Elementwise):
    """y = scale * (x if x > 0 else alpha (e**(c x) - 1)) with c the input scale (scale = c = 1
    for elu, selu's constants for selu, c = 1 / alpha for celu, as PyTorch writes all three);
    dy/dx = scale if x > 0 else scale alpha c e**(c x)."""

    @staticmethod
    def f(xp, x, alpha, scale, input_scale=1.0):
        return scale * xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, 0) * input_scale))

    @staticmethod
    def df(xp, x, y, alpha, scale, input_scale=1.0):
        return scale * xp.where(x > 0, 1.0, alpha * input_scale * xp.exp(xp.minimum(x, 0) * input_scale))

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return _elu_differentiable_backward(ctx, inputs, g)


def _elu_differentiable_backward(ctx, inputs, g):
    """ELU's (and CELU's) f' on Tensors: scale where x > 0, scale alpha c e**(c x) elsewhere."""
    x = inputs[0]
    alpha, scale, input_scale = (tuple(ctx.constants) + (1.0,))[:3]
    above = x._data > 0
    below = keep_where(~above, x)        # 0 where x > 0: no overflow in the exp that is not used
    slope = (scale * alpha * input_scale) * (below * input_scale).exp()
    dx = keep_where(above, g * scale) + keep_where(~above, g * slope)
    return (dx,) + (None,) * len(ctx.constants)


class CELU(ELU):
    """celu: ELU with scale 1 and input scale c = 1 / alpha (f and f' as stated there)."""

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return _elu_differentiable_backward(ctx, inputs, g)


class LeakyReLU(Elementwise):
    """y = x if x > 0 else slope x;  dy/dx = 1 if x > 0 else slope."""

    @staticmethod
    def f(xp, x, slope):
        return xp.where(x > 0, x, slope * x)

    @staticmethod
    def df(xp, x, y, slope):
        return xp.where(x > 0, 1.0, slope)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        (slope,) = ctx.constants
        above = x._data > 0
        return keep_where(above, g) + keep_where(~above, g * slope), None


class Hardtanh(Elementwise):
    """y = clamp(x, lo, hi) (relu6 is lo = 0, hi = 6);  dy/dx = 1 where lo < x < hi, else 0."""

    @staticmethod
    def f(xp, x, lo, hi):
        return xp.clip(x, lo, hi)

    @staticmethod
    def df(xp, x, y, lo, hi):
        return ((x > lo) & (x < hi)).astype(x.dtype)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]._data
        lo, hi = ctx.constants
        return keep_where((x > lo) & (x < hi), g), None, None


class Hardsigmoid(Elementwise):
    """y = relu6(x + 3) / 6;  dy/dx = 1/6 where -3 < x < 3, else 0 (0 at the kinks, as PyTorch)."""

    @staticmethod
    def f(xp, x):
        return xp.clip(x + 3, 0, 6) / 6

    @staticmethod
    def df(xp, x, y):
        return ((x > -3) & (x < 3)).astype(x.dtype) / 6

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]._data
        return keep_where((x > -3) & (x < 3), g / 6)


class Hardswish(Elementwise):
    """y = x relu6(x + 3) / 6;  dy/dx = 0 for x <= -3, x / 3 + 1/2 for -3 < x < 3, 1 for x >= 3
    (PyTorch's choice at the kinks: the one-sided derivative from outside, 0 at -3 and 1 at 3)."""

    @staticmethod
    def f(xp, x):
        return x * xp.clip(x + 3, 0, 6) / 6

    @staticmethod
    def df(xp, x, y):
        return xp.where(x <= -3, 0.0, xp.where(x < 3, x / 3 + 0.5, 1.0))

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        a = x._data
        return keep_where((a > -3) & (a < 3), g * (x / 3 + 0.5)) + keep_where(a >= 3, g)


class Softplus(Elementwise):
    """y = log(1 + e**(beta x)) / beta, and y = x where beta x > threshold (where the two agree
    to float precision); dy/dx = s(beta x), and 1 where beta x > threshold."""

    @staticmethod
    def f(xp, x, beta, threshold):
        return xp.where(beta * x > threshold, x, _softplus(xp, beta * x) / beta)

    @staticmethod
    def df(xp, x, y, beta, threshold):
        return xp.where(beta * x > threshold, 1.0, _sigmoid(xp, beta * x))

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        beta, threshold = ctx.constants
        linear = beta * x._data > threshold
        return keep_where(linear, g) + keep_where(~linear, g * (beta * x).sigmoid()), None, None


class Softsign(Elementwise):
    """y = x / (1 + |x|);  dy/dx = 1 / (1 + |x|)**2."""

    @staticmethod
    def f(xp, x):
        return x / (1 + xp.abs(x))

    @staticmethod
    def df(xp, x, y):
        return 1 / (1 + xp.abs(x)) ** 2

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g / (1 + inputs[0].abs()) ** 2


class Mish(Elementwise):
    """y = x tanh(softplus(x));  with t = tanh(softplus(x)), dy/dx = t + x s(x) (1 - t**2)
    (softplus' = s, the sigmoid)."""

    @staticmethod
    def f(xp, x):
        return x * xp.tanh(_softplus(xp, x))

    @staticmethod
    def df(xp, x, y):
        t = xp.tanh(_softplus(xp, x))
        return t + x * _sigmoid(xp, x) * (1 - t * t)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        t = (-LogSigmoid.apply(-x)).tanh()      # tanh(softplus(x)), softplus(x) = -log s(-x)
        return g * (t + x * x.sigmoid() * (1 - t * t))


class LogSigmoid(Elementwise):
    """y = log s(x) = -softplus(-x);  dy/dx = 1 - s(x) = s(-x)."""

    @staticmethod
    def f(xp, x):
        return -_softplus(xp, -x)

    @staticmethod
    def df(xp, x, y):
        return _sigmoid(xp, -x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * (-inputs[0]).sigmoid()


class Tanhshrink(Elementwise):
    """y = x - tanh x;  dy/dx = tanh(x)**2."""

    @staticmethod
    def f(xp, x):
        return x - xp.tanh(x)

    @staticmethod
    def df(xp, x, y):
        t = xp.tanh(x)
        return t * t

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        t = inputs[0].tanh()
        return g * (t * t)


class PReLU(Function):
    """y = x if x > 0 else w_c x, with w one slope per channel c (dim 1) or a single shared one;
    dy/dx = 1 if x > 0 else w_c;  dL/dw_c = sum over the elements of channel c where x <= 0 of g x."""

    @staticmethod
    def forward(ctx, x, w, shape):
        wb = w.reshape(shape)
        ctx.save_for_backward(x, wb)
        ctx.w_shape = w.shape
        return namespace_of(x).where(x > 0, x, wb * x).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, wb = ctx.saved_tensors
        xp = namespace_of(x)
        pos = x > 0
        dx = xp.where(pos, g, wb * g) if ctx.needs_input_grad[0] else None
        dw = unbroadcast(xp.where(pos, 0, g * x), wb.shape).reshape(ctx.w_shape) if ctx.needs_input_grad[1] else None
        return dx, dw, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x, w = inputs[:2]
        _, wb = ctx.saved_tensors
        pos = x._data > 0
        nx, nw = ctx.needs_input_grad[:2]
        dx = keep_where(pos, g) + keep_where(~pos, g * w.reshape(wb.shape)) if nx else None
        dw = sum_to(keep_where(~pos, g * x), wb.shape).reshape(ctx.w_shape) if nw else None
        return dx, dw, None


class GLU(Function):
    """With input split in halves a, b along dim: y = a s(b);
    dy/da = s(b),  dy/db = a s(b) (1 - s(b))."""

    @staticmethod
    def forward(ctx, x, dim):
        xp = namespace_of(x)
        a, b = xp.split(x, 2, axis=dim)
        s = _sigmoid(xp, b).astype(x.dtype, copy=False)
        ctx.save_for_backward(a, s)
        ctx.dim = dim
        return a * s

    @staticmethod
    def backward(ctx, g):
        a, s = ctx.saved_tensors
        return namespace_of(a).concatenate([g * s, g * a * s * (1 - s)], axis=ctx.dim), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        from .join import cat
        x = inputs[0]
        half = x.shape[ctx.dim] // 2
        a, b = x.narrow(ctx.dim, 0, half), x.narrow(ctx.dim, half, half)
        s = b.sigmoid()
        return cat([g * s, g * a * s * (1 - s)], ctx.dim), None


# functional entry points -----------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _floating(op, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    check_floating(op, input.dtype)
    return input


def silu(input, inplace=False):
    """As ``torch.nn.functional.silu`` (also called swish): x * sigmoid(x)."""
    return maybe_inplace(_floating("silu", input), inplace, "silu_", SiLU.apply)


def elu(input, alpha=1.0, inplace=False):
    """As ``torch.nn.functional.elu``: x for x > 0, alpha (e**x - 1) otherwise."""
    return maybe_inplace(_floating("elu", input), inplace, "elu_", lambda x: ELU.apply(x, float(alpha), 1.0))


def selu(input, inplace=False):
    """As ``torch.nn.functional.selu``: scale * elu(x, alpha) with the self-normalising constants."""
    return maybe_inplace(_floating("selu", input), inplace, "selu_",
                         lambda x: ELU.apply(x, _SELU_ALPHA, _SELU_SCALE))


def celu(input, alpha=1.0, inplace=False):
    """As ``torch.nn.functional.celu``: x for x > 0, alpha (e**(x / alpha) - 1) otherwise."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU (celu divides the input by alpha)")
    return maybe_inplace(_floating("celu", input), inplace, "celu_",
                         lambda x: CELU.apply(x, float(alpha), 1.0, 1.0 / alpha))


def hardsigmoid(input, inplace=False):
    """As ``torch.nn.functional.hardsigmoid``: relu6(x + 3) / 6, a piecewise-linear sigmoid."""
    return maybe_inplace(_floating("hardsigmoid", input), inplace, "hardsigmoid_", Hardsigmoid.apply)


def hardswish(input, inplace=False):
    """As ``torch.nn.functional.hardswish``: x * relu6(x + 3) / 6, a piecewise silu."""
    return maybe_inplace(_floating("hardswish", input), inplace, "hardswish_", Hardswish.apply)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """As ``torch.nn.functional.leaky_relu``: x for x > 0, negative_slope * x otherwise."""
    return maybe_inplace(_floating("leaky_relu", input), inplace, "leaky_relu_",
                         lambda x: LeakyReLU.apply(x, float(negative_slope)))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """As ``torch.nn.functional.hardtanh``: x clamped to [min_val, max_val]."""
    if min_val > max_val:
        raise ValueError(f"min_val cannot be greater than max_val; got min_val={min_val}, max_val={max_val}")
    return maybe_inplace(_floating("hardtanh", input), inplace, "hardtanh_",
                         lambda x: Hardtanh.apply(x, float(min_val), float(max_val)))


def relu6(input, inplace=False):
    """As ``torch.nn.functional.relu6``: hardtanh(x, 0, 6)."""
    return maybe_inplace(_floating("relu6", input), inplace, "relu6_", lambda x: Hardtanh.apply(x, 0.0, 6.0))


def softplus(input, beta=1.0, threshold=20.0):
    """As ``torch.nn.functional.softplus``: log(1 + e**(beta x)) / beta, linear past ``threshold``."""
    return Softplus.apply(_floating("softplus", input), float(beta), float(threshold))


def softsign(input):
    """As ``torch.nn.functional.softsign``: x / (1 + |x|)."""
    return Softsign.apply(_floating("softsign", input))


def mish(input, inplace=False):
    """As ``torch.nn.functional.mish``: x * tanh(softplus(x))."""
    return maybe_inplace(_floating("mish", input), inplace, "mish_", Mish.apply)


def logsigmoid(input):
    """As ``torch.nn.functional.logsigmoid``: log(sigmoid(x)), without overflow."""
    return LogSigmoid.apply(_floating("logsigmoid", input))


def tanhshrink(input):
    """As ``torch.nn.functional.tanhshrink``: x - tanh(x)."""
    return Tanhshrink.apply(_floating("tanhshrink", input))


def prelu(input, weight):
    """As ``torch.nn.functional.prelu``: leaky_relu with a learned slope ``weight``, one per
    channel (dim 1 of input; a 0-d or 1-D input has one channel) or a single shared one."""
    _floating("prelu", input)
    if not isinstance(weight, Tensor):
        raise TypeError(f"prelu: expected weight to be a Tensor, got {type(weight).__name__}")
    from ..tensor.dtype import check_same_dtype
    check_same_dtype("prelu", [("input", input), ("weight", weight)])
    channels = input.shape[1] if input.ndim >= 2 else 1
    n = weight.numel()
    if n != 1 and n != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} "
                           f"and channel size = {channels}.")
    shape = (1,) * input.ndim if n == 1 else (1, n) + (1,) * (input.ndim - 2)   # broadcasts along dim 1
    return PReLU.apply(input, weight, shape)


def glu(input, dim=-1):
    """As ``torch.nn.functional.glu``: a * sigmoid(b) for the halves a, b of input along ``dim``."""
    _floating("glu", input)
    from .distance import check_dim
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = check_dim(dim, input.ndim)
    if input.shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {input.shape[d]}")
    return GLU.apply(input, d)
