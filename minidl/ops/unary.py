"""Elementwise functions. Each backward is dL/dx = g * f'(x), with f' written from
whatever the forward already computed (often the output itself)."""
import numbers

import numpy as np
from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import DtypeNotImplementedError
from ._broadcast import shape_of, unbroadcast
from ._higher_order import constant, keep_where, sum_to
from ._kernel_switch import LAYER
from ._quiet import quiet


class Exp(Function):
    """y = e**x;  dy/dx = y. (Overflow gives inf without NumPy's warning, as PyTorch.)"""

    @staticmethod
    def forward(ctx, x):
        with quiet():
            y = namespace_of(x).exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g * inputs[0].exp()


class Log(Function):
    """y = ln x;  dy/dx = 1/x. (ln 0 = -inf and ln(-1) = nan without NumPy's warning, as PyTorch.)"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with quiet():
            return namespace_of(x).log(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with quiet():
            return g / x

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g / inputs[0]


class Sqrt(Function):
    """y = sqrt(x);  dy/dx = 1 / (2 y). (sqrt(-1) = nan and the gradient at 0 = inf without
    NumPy's warning, as PyTorch.)"""

    @staticmethod
    def forward(ctx, x):
        with quiet():
            y = namespace_of(x).sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        with quiet():
            return g / (2 * y)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g / (2 * inputs[0].sqrt())


class Tanh(Function):
    """y = tanh x;  dy/dx = 1 - y**2."""

    @staticmethod
    def forward(ctx, x):
        y = namespace_of(x).tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        y = inputs[0].tanh()
        return g * (1 - y * y)


class Sigmoid(Function):
    """y = 1 / (1 + e**-x);  dy/dx = y (1 - y).

    Computed as e**x / (1 + e**x) for negative x so that no exp overflows."""

    @staticmethod
    def forward(ctx, x):
        xp = namespace_of(x)
        z = xp.exp(-xp.abs(x))
        y = xp.where(x >= 0, 1 / (1 + z), z / (1 + z)).astype(x.dtype, copy=False)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * (1 - y)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        y = inputs[0].sigmoid()
        return g * y * (1 - y)


_INF_BITS = {np.dtype(np.float16): 0x7c00}   # the bits of +inf per 2-byte float (bfloat16 added below)


def _half_bits(a):
    """a's int16 view and its +inf bits when ``a`` is a float16/bfloat16 NumPy array, else None."""
    if type(a) is np.ndarray and a.dtype.itemsize == 2 and a.dtype.kind in "fV":
        inf = _INF_BITS.get(a.dtype)
        if inf is None:
            inf = _INF_BITS[a.dtype] = int(np.array(np.inf, a.dtype).view(np.int16))
        return a.view(np.int16), inf
    return None


def relu_forward_reference(x):
    """(y, mask) = (max(x, 0), y != 0), with NaN and -0.0 passed through as PyTorch's relu."""
    xp = namespace_of(x)
    y = xp.where(x < 0, xp.zeros((), dtype=x.dtype), x)
    return y, y != 0


def relu_backward_reference(mask, g):
    """dL/dx = g where the mask is set, else 0 (0 even where g is NaN, as PyTorch's threshold backward)."""
    xp = namespace_of(g)
    return xp.where(mask, g, xp.zeros((), dtype=g.dtype))


def add_relu_forward_reference(x, r):
    """relu(x + r): (y, mask) as relu_forward_reference of the sum."""
    return relu_forward_reference(x + r)


class Relu(Function):
    """y = max(x, 0) (NaN stays NaN);  dy/dx = 1 where y > 0 or y is NaN, else 0 (0 at x = 0),
    as PyTorch's threshold backward: the mask is ``y != 0``. The CPU kernels do each direction in
    one parallel pass (``minidl.kernels.cpu.relu``); the references above are the NumPy form.

    float16/bfloat16 on the CPU go through the bits: NumPy computes 2-byte floats one converted
    element at a time, while integer compares on the int16 view vectorise. x < 0 is "sign bit
    set, magnitude bits non-zero and at most those of inf" (not -0.0, not NaN), y takes 0 there
    and x's bits elsewhere (-0.0 and NaN kept, as PyTorch's clamp), and y != 0 is "magnitude bits
    non-zero"."""
    kernels = LAYER.kernels(("relu_forward", "relu_backward", "add_relu_forward"), __name__,
                            cpu="minidl.kernels.cpu.relu")

    @staticmethod
    def forward(ctx, x):
        half = _half_bits(x)
        if half is not None:
            bits, inf = half
            mag = bits & 0x7fff
            y = np.where((bits < 0) & (mag != 0) & (mag <= inf), np.int16(0), bits)
            ctx.save_for_backward((y & 0x7fff) != 0)
            return y.view(x.dtype)
        ctx.impl = Relu.kernels.select(x)
        y, positive = ctx.impl.relu_forward(x)
        ctx.save_for_backward(positive)
        return y

    @staticmethod
    def backward(ctx, g):
        (positive,) = ctx.saved_tensors
        half = _half_bits(g)
        if half is not None:
            return np.where(positive, half[0], np.int16(0)).view(g.dtype)
        return ctx.impl.relu_backward(positive, g)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (positive,) = ctx.saved_tensors
        return keep_where(positive, g)


class AddRelu(Function):
    """y = relu(a + b) for a and b of one shape and dtype, the residual add of a ResNet block and
    the ReLU after it: one forward pass (the sum rounded once, as the add, then ReLU's rule);
    dL/da = dL/db = g where y != 0, else 0, ReLU's backward. The two ops would write and read the
    sum once more and keep two nodes."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.impl = Relu.kernels.select(a)
        y, positive = ctx.impl.add_relu_forward(a, b)
        ctx.save_for_backward(positive)
        return y

    @staticmethod
    def backward(ctx, g):
        (positive,) = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        d = ctx.impl.relu_backward(positive, g) if na or nb else None
        return (d if na else None), (d if nb else None)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (positive,) = ctx.saved_tensors
        na, nb = ctx.needs_input_grad
        d = keep_where(positive, g)
        return (d if na else None), (d if nb else None)


def _sign(a):
    """-1, 0 or 1, and 0 for NaN (PyTorch's sign, where NumPy's gives NaN)."""
    xp = namespace_of(a)
    s = xp.sign(a)
    return xp.where(s != s, 0, s).astype(s.dtype, copy=False) if a.dtype.kind in "fV" else s


class Abs(Function):
    """y = |x|;  dy/dx = sign(x) (0 at x = 0, and at NaN, as PyTorch)."""

    @staticmethod
    def forward(ctx, x):
        xp = namespace_of(x)
        ctx.save_for_backward(_sign(x))
        return xp.abs(x)

    @staticmethod
    def backward(ctx, g):
        (sign,) = ctx.saved_tensors
        return g * sign

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (sign,) = ctx.saved_tensors
        return g * constant(sign)


class Clamp(Function):
    """y = min(max(x, lo), hi), lo and hi numbers, None or tensors (broadcast against x);
    lo > hi gives hi, as PyTorch.

    dy/dx = 1 where lo <= x <= hi; dy/dlo = 1 where x < lo (and lo < hi), dy/dhi = 1 where
    x > hi or hi < lo (hi is then the result); 0 elsewhere, each summed back to its shape.
    """

    @staticmethod
    def forward(ctx, x, lo, hi):
        xp = namespace_of(x)
        ctx.shapes = tuple(shape_of(v) for v in (x, lo, hi))
        _, need_lo, need_hi = ctx.needs_input_grad
        ctx.save_for_backward(x if need_lo or need_hi else None, lo if need_lo or need_hi else None,
                              hi if need_lo or need_hi else None,
                              ((x >= lo) if lo is not None else True) & ((x <= hi) if hi is not None else True))
        return xp.clip(x, lo, hi).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, lo, hi, inside = ctx.saved_tensors
        sx, slo, shi = ctx.shapes
        _, need_lo, need_hi = ctx.needs_input_grad
        glo = ghi = None
        if need_lo:
            below = (x < lo) & ((lo < hi) if hi is not None else True)
            glo = unbroadcast(g * below, slo)
        if need_hi:
            above = (x > hi) | ((hi < lo) if lo is not None else False)
            ghi = unbroadcast(g * above, shi)
        return unbroadcast(g * inside, sx), glo, ghi

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x, lo, hi, inside = ctx.saved_tensors
        sx, slo, shi = ctx.shapes
        _, need_lo, need_hi = ctx.needs_input_grad
        glo = ghi = None
        if need_lo:
            glo = sum_to(keep_where((x < lo) & ((lo < hi) if hi is not None else True), g), slo)
        if need_hi:
            ghi = sum_to(keep_where((x > hi) | ((hi < lo) if lo is not None else False), g), shi)
        return sum_to(keep_where(inside, g), sx), glo, ghi


class Clone(Function):
    """y = x (a copy);  dy/dx = 1."""

    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, g):
        return g

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g


def _floating(x):
    """Integer and bool tensors become float32 first, as in PyTorch (NumPy would give
    float64 for exp, and truncate sigmoid's result back to integers)."""
    data = getattr(x, "_data", None)
    if data is None or data.dtype.kind in "fV":   # V: bfloat16
        return x
    from ..tensor import dtype as dtypes
    return x.to(dtypes.DEFAULT_FLOAT)


def exp(x):
    return Exp.apply(_floating(x))


def log(x):
    return Log.apply(_floating(x))


def sqrt(x):
    return Sqrt.apply(_floating(x))


def tanh(x):
    return Tanh.apply(_floating(x))


def sigmoid(x):
    return Sigmoid.apply(_floating(x))


def relu(x):
    return Relu.apply(x)


def add_relu(input, other):
    """``relu(input + other)`` as one op (not in PyTorch; see ``AddRelu``) where both are tensors
    of one shape and dtype on one device; anything else (broadcasting, a number, mixed dtypes)
    runs as the two ops, with their rules and errors."""
    Tensor = _op_function.Tensor
    if (isinstance(input, Tensor) and isinstance(other, Tensor) and input.shape == other.shape
            and input.dtype == other.dtype and type(input._data) is type(other._data)):
        return AddRelu.apply(input, other)
    return Relu.apply(input + other)


def abs(x):
    if x.dtype.kind == "b":
        raise DtypeNotImplementedError('"abs" is not implemented for bool tensors (as PyTorch)')
    return Abs.apply(x)


def clamp(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    if x.dtype.kind in "biu" and any(_is_floating_bound(b) for b in (min, max)):
        x = _floating(x)                  # PyTorch promotes: an integer tensor clamped at 0.5 becomes float
    elif x.dtype.kind in "iu":
        info = np.iinfo(x._data.dtype)
        for b in (min, max):
            if isinstance(b, numbers.Integral) and not isinstance(b, bool) and not info.min <= b <= info.max:
                raise RuntimeError(f"clamp: value {b} cannot be converted to type {x.dtype} without overflow")
    return Clamp.apply(x, min, max)


def _is_floating_bound(bound):
    if bound is None or isinstance(bound, (bool, numbers.Integral)):
        return False
    return getattr(getattr(bound, "dtype", None), "kind", "f") in "fV"


def clone(x):
    return Clone.apply(x)
