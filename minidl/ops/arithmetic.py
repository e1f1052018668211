"""Broadcasting arithmetic: + - * / ** and unary minus.

Each forward is NumPy's broadcasting op; each backward takes dL/dout and returns
dL/da and dL/db, summed back to each operand's own shape (``unbroadcast``).
Either operand may be a Python number, which gets no gradient.
"""
from ..autograd.function import Function
from ..backends import namespace_of
from ._broadcast import shape_of, unbroadcast


class Add(Function):
    """out = a + b;  dL/da = g,  dL/db = g."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_of(a), shape_of(b)
        return a + b

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, sa) if na else None), (unbroadcast(g, sb) if nb else None)


class Sub(Function):
    """out = a - b;  dL/da = g,  dL/db = -g."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_of(a), shape_of(b)
        return a - b

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, sa) if na else None), (unbroadcast(-g, sb) if nb else None)


class Mul(Function):
    """out = a * b;  dL/da = g * b,  dL/db = g * a."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g * b, shape_of(a)) if na else None), (unbroadcast(g * a, shape_of(b)) if nb else None)


class Div(Function):
    """out = a / b;  dL/da = g / b,  dL/db = -g * a / b**2 = -g * out / b."""

    @staticmethod
    def forward(ctx, a, b):
        out = a / b
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        ga = unbroadcast(g / b, shape_of(a)) if na else None
        gb = unbroadcast(-g * out / b, shape_of(b)) if nb else None
        return ga, gb


class Pow(Function):
    """out = a ** b;  dL/da = g * b * a**(b-1),  dL/db = g * out * log(a)."""

    @staticmethod
    def forward(ctx, a, b):
        xp = namespace_of(a if hasattr(a, "shape") else b)
        out = xp.power(a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        xp = namespace_of(g)
        ga = unbroadcast(g * b * xp.power(a, b - 1), shape_of(a)) if na else None
        gb = unbroadcast(g * out * xp.log(a), shape_of(b)) if nb else None
        return ga, gb


class Neg(Function):
    """out = -a;  dL/da = -g."""

    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, g):
        return -g


def _binary(fn, a, b):
    try:
        return fn.apply(a, b)
    except ValueError as exc:
        if "broadcast" not in str(exc):
            raise
        raise ValueError(f"{fn.__name__.lower()}: shapes {list(shape_of(_raw(a)))} and {list(shape_of(_raw(b)))} "
                         "cannot be broadcast together") from None


def _raw(x):
    return getattr(x, "_data", x)


def add(a, b):
    return _binary(Add, a, b)


def sub(a, b):
    return _binary(Sub, a, b)


def mul(a, b):
    return _binary(Mul, a, b)


def div(a, b):
    return _binary(Div, a, b)


def pow(a, b):
    return _binary(Pow, a, b)


def neg(a):
    return Neg.apply(a)
