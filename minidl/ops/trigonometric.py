"""The trigonometric functions and their inverses, the (inverse) hyperbolic functions, sinc, and
the degree/radian conversions. Each backward is dL/dx = g * f'(x), written as PyTorch writes it,
so the special points agree: asin'(+-1) = inf, asin' outside [-1, 1] = NaN, acosh'(1) = inf,
atanh'(+-1) = inf, sinc'(0) = 0. Integer and bool inputs compute in the default float dtype, as
PyTorch's.

At the domain's edges and outside it the values are NumPy's (NaN outside, +-inf at atanh(+-1)),
which are PyTorch's; no warning is printed for them (PyTorch prints none).
"""
import math

from ..autograd.op_function import Function
from ._elementwise_args import floating, ufunc
from ._quiet import quiet as _quiet



class Sin(Function):
    """y = sin x;  dy/dx = cos x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ufunc("sin", "sin", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ufunc("cos", "cos", x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * inputs[0].cos()


class Cos(Function):
    """y = cos x;  dy/dx = -sin x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ufunc("cos", "cos", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -g * ufunc("sin", "sin", x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return -g * inputs[0].sin()


class Tan(Function):
    """y = tan x;  dy/dx = 1 + y**2."""

    @staticmethod
    def forward(ctx, x):
        y = ufunc("tan", "tan", x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 + y * y)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        y = inputs[0].tan()
        return g * (1 + y * y)


class Asin(Function):
    """y = asin x;  dy/dx = 1 / sqrt(1 - x**2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ufunc("asin", "arcsin", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with _quiet():
            return g / ufunc("asin", "sqrt", 1 - x * x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        return g * (1 - x * x) ** -0.5


class Acos(Function):
    """y = acos x;  dy/dx = -1 / sqrt(1 - x**2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ufunc("acos", "arccos", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with _quiet():
            return -g / ufunc("acos", "sqrt", 1 - x * x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        return -g * (1 - x * x) ** -0.5


class Atan(Function):
    """y = atan x;  dy/dx = 1 / (1 + x**2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ufunc("atan", "arctan", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / (x * x + 1)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        return g / (1 + x * x)


class Sinh(Function):
    """y = sinh x = (e**x - e**-x) / 2;  dy/dx = cosh x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ufunc("sinh", "sinh", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with _quiet():
            return g * ufunc("sinh", "cosh", x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * inputs[0].cosh()


class Cosh(Function):
    """y = cosh x = (e**x + e**-x) / 2;  dy/dx = sinh x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ufunc("cosh", "cosh", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with _quiet():
            return g * ufunc("cosh", "sinh", x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * inputs[0].sinh()


class Asinh(Function):
    """y = asinh x = ln(x + sqrt(x**2 + 1));  dy/dx = 1 / sqrt(x**2 + 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ufunc("asinh", "arcsinh", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with _quiet():
            return g / ufunc("asinh", "sqrt", x * x + 1)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        return g * (x * x + 1) ** -0.5


class Acosh(Function):
    """y = acosh x = ln(x + sqrt(x**2 - 1)) for x >= 1;  dy/dx = 1 / sqrt(x**2 - 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ufunc("acosh", "arccosh", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with _quiet():
            return g / ufunc("acosh", "sqrt", x * x - 1)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        return g * ((x - 1) * (x + 1)) ** -0.5


class Atanh(Function):
    """y = atanh x = ln((1 + x) / (1 - x)) / 2 for |x| < 1;  dy/dx = 1 / (1 - x**2)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with _quiet():
            return ufunc("atanh", "arctanh", x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with _quiet():
            return g / (1 - x * x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        return g / (1 - x * x)


class Sinc(Function):
    """y = sin(pi x) / (pi x), 1 at x = 0 (the normalized sinc);
    dy/dx = (pi x cos(pi x) - sin(pi x)) / (pi x**2), 0 at x = 0 (the limit, and PyTorch's)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        px = x * math.pi
        with _quiet():
            y = ufunc("sinc", "sin", px) / px
        return ufunc("sinc", "where", x == 0, x.dtype.type(1), y).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        px = x * math.pi
        with _quiet():
            d = (px * ufunc("sinc", "cos", px) - ufunc("sinc", "sin", px)) / (px * x)
        return g * ufunc("sinc", "where", x == 0, x.dtype.type(0), d).astype(g.dtype, copy=False)


def _unary(cls):
    def fn(input):
        return cls.apply(floating(input))
    fn.__name__ = fn.__qualname__ = cls.__name__.lower()
    fn.__doc__ = cls.__doc__
    return fn


sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, sinc = (
    _unary(c) for c in (Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Sinc))


def deg2rad(input):
    """x * pi / 180 (a scaling: the gradient is pi / 180)."""
    return floating(input) * (math.pi / 180)


def rad2deg(input):
    """x * 180 / pi (a scaling: the gradient is 180 / pi)."""
    return floating(input) * (180 / math.pi)
