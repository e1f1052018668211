"""Broadcasting arithmetic: + - * / ** and unary minus.

Each forward is NumPy's broadcasting op; each backward takes dL/dout and returns
dL/da and dL/db, summed back to each operand's own shape (``unbroadcast``).
Either operand may be a Python number, which gets no gradient.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import shape_of, unbroadcast
from ._higher_order import keep_where, needed, sum_to
from ._quiet import quiet
from .shape_error import ShapeError


class Add(Function):
    """out = a + b;  dL/da = g,  dL/db = g. (Two large float CPU arrays of one shape add in one
    parallel Numba pass, ``minidl.kernels.cpu.half_cast.add``: NumPy's adds run on one thread,
    and its 2-byte arithmetic is slow.)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = shape_of(a), shape_of(b)
        if type(a) is np.ndarray and type(b) is np.ndarray:
            from ..kernels.cpu.half_cast import add
            return add(a, b)
        return a + b

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g, sa) if na else None), (unbroadcast(g, sb) if nb else None)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        sa, sb = ctx.shapes
        return needed(ctx, (sum_to(g, sa), sum_to(g, sb)))


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

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (sum_to(g, sa) if na else None), (sum_to(-g, sb) if nb else None)


class Mul(Function):
    """out = a * b;  dL/da = g * b,  dL/db = g * a.

    Only what a needed gradient reads is saved: b for dL/da, a for dL/db (as PyTorch). So
    ``y = a * 3`` keeps nothing of ``a``, and ``a`` may then be modified in place."""

    @staticmethod
    def forward(ctx, a, b):
        na, nb = ctx.needs_input_grad
        ctx.shapes = shape_of(a), shape_of(b)
        ctx.save_for_backward(a if nb else None, b if na else None)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (unbroadcast(g * b, sa) if na else None), (unbroadcast(g * a, sb) if nb else None)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        a, b = _operands(ctx, inputs)
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (sum_to(g * b, sa) if na else None), (sum_to(g * a, sb) if nb else None)


class Div(Function):
    """out = a / b;  dL/da = g / b,  dL/db = -g * a / b**2, computed as -g * ((a / b) / b).

    Saved: b for either gradient, a only for dL/db; not the output (as PyTorch), so the
    result may be modified in place. x / 0 = inf and 0 / 0 = nan (an IoU over empty masks) come
    without NumPy's warning, as PyTorch's; dividing by a nonzero number skips that guard's cost."""

    @staticmethod
    def forward(ctx, a, b):
        na, nb = ctx.needs_input_grad
        ctx.shapes = shape_of(a), shape_of(b)
        ctx.save_for_backward(a if nb else None, b if na or nb else None)
        if (type(b) is float or type(b) is int) and b:
            return a / b
        with quiet():
            return a / b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        with quiet():
            ga = unbroadcast(g / b, sa) if na else None
            gb = unbroadcast(-g * ((a / b) / b), sb) if nb else None
        return ga, gb

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        a, b = _operands(ctx, inputs)
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        return (sum_to(g / b, sa) if na else None), (sum_to(-g * ((a / b) / b), sb) if nb else None)


class Pow(Function):
    """out = a ** b;  dL/da = g * b * a**(b-1),  dL/db = g * out * log(a), with PyTorch's values
    where those are NaN: dL/da = 0 where b = 0, dL/db = 0 where a = 0 and b >= 0.

    Saved: a and b; the output only when b is a tensor (dL/db reads it), as PyTorch:
    ``y = x ** 2`` may be modified in place afterwards, ``y = x ** e`` (e a tensor) may not."""

    @staticmethod
    def forward(ctx, a, b):
        xp = namespace_of(a if hasattr(a, "shape") else b)
        if _kind(a) in "iub" and _kind(b) in "iub":
            out = _integer_power(xp, a, b)
        elif isinstance(b, (int, float)) and b >= 0 and b % 1 == 0:   # x**2: no pole, no NaN, no errstate cost
            out = xp.power(a, b)
        else:   # 0**-0.5 = inf (a GCN's isolated node), (-1)**0.5 = NaN: silently, as PyTorch
            with quiet():
                out = xp.power(a, b)
        ctx.shapes = shape_of(a), shape_of(b)
        ctx.save_for_backward(a, b, out if hasattr(b, "shape") else None)
        return out

    @staticmethod
    def backward(ctx, g):
        a, b, out = ctx.saved_tensors
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        xp = namespace_of(g)
        with quiet():
            ga = gb = None
            if na:   # b = 0: a**0 = 1 is constant, so 0 even at a = 0 (where 0 * a**-1 is NaN)
                ga = g * b * xp.power(a, b - 1)
                ga = unbroadcast(xp.where(b == 0, 0, ga) if _any_zero(b) else ga, sa)
            if nb:   # a = 0, b >= 0: 0**b is 0 (or 1) on that side, so 0 rather than 0 * log 0
                gb = g * out * xp.log(a)
                gb = unbroadcast(xp.where((a == 0) & (b >= 0), 0, gb) if _any_zero(a) else gb, sb)
        return ga, gb

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        a, b = _operands(ctx, inputs)
        raw_a, raw_b = ctx.saved_tensors[:2]
        sa, sb = ctx.shapes
        na, nb = ctx.needs_input_grad
        xp = namespace_of(g._data)
        ga = gb = None
        with quiet():
            if na:
                ga = g * b * a ** (b - 1)
                ga = sum_to(keep_where(xp.asarray(raw_b != 0), ga) if _any_zero(raw_b) else ga, sa)
            if nb:
                log_a = a.log() if inputs[0] is not None else float(np.log(np.float64(a)))
                gb = g * a ** b * log_a
                if _any_zero(raw_a):
                    gb = keep_where(xp.asarray(~((raw_a == 0) & (raw_b >= 0))), gb)
                gb = sum_to(gb, sb)
        return ga, gb


def _integer_power(xp, a, b):
    """a ** b for integers with PyTorch's values where an exponent tensor holds negative numbers
    (NumPy refuses them): a**b = 1 / a**|b| truncated to an integer, so 1 for a = 1, +-1 for
    a = -1 (by the parity of b), and 0 for any other a (0 ** -1 included, as PyTorch's CPU
    kernel). A negative Python exponent never gets here: ``pow`` refuses it, as PyTorch."""
    negative = b < 0
    if not hasattr(b, "shape") or not bool(negative.any()):
        return xp.power(a, b)
    out = xp.power(a, xp.where(negative, 0, b))
    sign = xp.where(b % 2 == 0, 1, -1)
    at_negative = xp.where(xp.asarray(a == 1), 1, xp.where(xp.asarray(a == -1), sign, 0))
    return xp.where(negative, at_negative, out).astype(out.dtype, copy=False)


def _operands(ctx, inputs):
    """The two operands of a binary op for its differentiable backward: the input Tensors, and
    for a Python number the value the forward saved."""
    saved = ctx.saved_tensors
    return tuple(t if t is not None else s for t, s in zip(inputs, saved[:2]))


def _any_zero(v):
    """Whether v holds a 0 (a device array: assumed, rather than synchronising to find out)."""
    if not hasattr(v, "shape"):
        return v == 0
    return type(v) is not np.ndarray or bool((v == 0).any())


class Neg(Function):
    """out = -a;  dL/da = -g."""

    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, g):
        return -g

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return -g


def _binary(fn, a, b, *constants):
    """``fn.apply(a, b, *constants)`` after PyTorch's type promotion of the two operands."""
    if _needs_promotion(a, b):
        a, b = _promote(fn, a, b)
    try:
        return fn.apply(a, b, *constants)
    except ValueError as exc:
        if "broadcast" not in str(exc):
            raise
        raise ShapeError(f"{fn.__name__.lower()}: shapes {list(shape_of(_raw(a)))} and {list(shape_of(_raw(b)))} "
                         "cannot be broadcast together") from None


def _needs_promotion(a, b):
    """False in the common cases, where NumPy's result dtype already is PyTorch's: float
    tensors of one dtype, or a float tensor and a Python number."""
    da, db = _float_dtype(a), _float_dtype(b)
    if da is None or db is None:
        return True
    return da is not _NUMBER and db is not _NUMBER and da != db


_NUMBER = object()


def _float_dtype(x):
    """The dtype of a float tensor, _NUMBER for a Python int or float, else None."""
    t = type(x)
    if t is float or t is int:
        return _NUMBER
    data = getattr(x, "_data", None)
    if data is None or data.dtype.kind not in "fV":   # V: bfloat16
        return None
    return data.dtype


def _promote(fn, a, b):
    """PyTorch's type promotion where NumPy's differs, so float32 models stay float32:

    - a NumPy scalar acts as a Python number (float32 tensor * np.float64(2) is float32,
      where NumPy 2 would give float64);
    - an integer or bool tensor meeting a float (tensor or number) becomes that float
      dtype (float32 for a number) instead of NumPy's float64;
    - dividing integers gives the default float dtype (float32), not float64;
    - a 0-d float tensor meeting a float tensor with dims takes that tensor's dtype (as
      PyTorch treats 0-d tensors like numbers): float32 x times a float64 scalar tensor is
      float32.
    """
    from ..tensor import dtype as dtypes

    a = a.item() if isinstance(a, np.generic) else a
    b = b.item() if isinstance(b, np.generic) else b
    ka, kb = _kind(a), _kind(b)
    if ka == kb == "f" and hasattr(a, "_data") and hasattr(b, "_data") and (a.ndim == 0) != (b.ndim == 0):
        if a.ndim == 0:
            a = a.to(b.dtype)
        else:
            b = b.to(a.dtype)
    elif ka == "f" and kb in "iub" and hasattr(b, "_data"):
        b = b.to(_raw(a).dtype if hasattr(a, "_data") else dtypes.DEFAULT_FLOAT)
    elif kb == "f" and ka in "iub" and hasattr(a, "_data"):
        a = a.to(_raw(b).dtype if hasattr(b, "_data") else dtypes.DEFAULT_FLOAT)
    elif fn is Div and ka in "iub" and kb in "iub":
        a = a.to(dtypes.DEFAULT_FLOAT) if hasattr(a, "_data") else a
        b = b.to(dtypes.DEFAULT_FLOAT) if hasattr(b, "_data") else b
    elif ka in "iu" and kb in "iu":
        a, b = _integer_operands(a, b)
    return a, b


def _integer_operands(a, b):
    """Two integer operands in PyTorch's dtype where NumPy's differs: a 0-d tensor meeting a
    tensor with dims takes that tensor's dtype (``int8 tensor + tensor(1000)`` is int8, as with a
    number), and a Python int the tensor's dtype cannot hold wraps around into it (``uint8 + -1``
    adds 255, where NumPy 2 raises OverflowError), as PyTorch casts the scalar to the
    computation's dtype."""
    ta, tb = hasattr(a, "_data"), hasattr(b, "_data")
    if ta and tb:
        if (a.ndim == 0) != (b.ndim == 0):
            if a.ndim == 0:
                a = a.to(b.dtype)
            else:
                b = b.to(a.dtype)
    elif ta:
        b = _wrapped_int(b, _raw(a).dtype)
    elif tb:
        a = _wrapped_int(a, _raw(b).dtype)
    return a, b


def _wrapped_int(v, dtype):
    """A Python int as a NumPy scalar of ``dtype``, wrapped around when out of its range."""
    info = np.iinfo(dtype)
    if info.min <= v <= info.max:
        return v
    return np.asarray(v).astype(dtype)[()]


def _kind(x):
    """The dtype kind of a tensor ("f", "i", "u", "b"; bfloat16 counts as "f"); Python numbers
    count as their type."""
    if isinstance(x, bool):
        return "b"
    if isinstance(x, int):
        return "i"
    if isinstance(x, float):
        return "f"
    kind = getattr(_raw(x), "dtype", np.dtype(object)).kind
    return "f" if kind == "V" else kind


def _raw(x):
    return getattr(x, "_data", x)


def add(a, b, alpha=1):
    """a + alpha * b (PyTorch's ``alpha=``: the scaled operand of an axpy, as optimizers write)."""
    return _binary(Add, a, b if alpha.__class__ is int and alpha == 1 else _scaled(a, b, alpha))


def sub(a, b, alpha=1):
    """a - alpha * b. Two bool operands have no difference (PyTorch points to xor instead)."""
    if _kind(a) == "b" and _kind(b) == "b":
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    return _binary(Sub, a, b if alpha.__class__ is int and alpha == 1 else _scaled(a, b, alpha))


def _scaled(a, b, alpha):
    """alpha * b, with PyTorch's checks: a float alpha cannot scale an integer result (it would
    be truncated silently), and a bool alpha only a bool one."""
    integral = _kind(a) in "iub" and _kind(b) in "iub"
    if isinstance(alpha, (bool, np.bool_)):
        if not (_kind(a) == "b" and _kind(b) == "b"):
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif integral and _kind(alpha) == "f":
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    elif alpha == 1:
        return b
    return mul(b, alpha) if hasattr(b, "_data") else b * alpha


def mul(a, b):
    return _binary(Mul, a, b)


def div(a, b):
    return _binary(Div, a, b)


def pow(a, b):
    """a ** b. An integer (or bool) base with a negative Python int exponent is refused, as
    PyTorch (the result would not be an integer); with an exponent tensor, see _integer_power."""
    if _kind(a) == "b" and _kind(b) == "b":   # PyTorch has no bool power, but for a Python bool exponent
        if isinstance(b, (bool, np.bool_)) and hasattr(a, "_data"):
            return a.clone() if b else a | True
        from ..tensor.dtype import DtypeNotImplementedError
        raise DtypeNotImplementedError('"pow" is not implemented for two bool operands (as PyTorch)')
    if isinstance(b, (int, np.integer)) and not isinstance(b, (bool, np.bool_)) and b < 0 and _kind(a) in "iub":
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if isinstance(b, int) and not isinstance(b, bool) and _kind(a) in "iu" and hasattr(a, "_data"):
        info = np.iinfo(a._data.dtype)
        if not info.min <= b <= info.max:
            raise RuntimeError(f"pow: exponent {b} cannot be converted to type {a.dtype} without overflow")
    return _binary(Pow, a, b)


def neg(a):
    if _kind(a) == "b":
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                           "invert a mask, use the `~` or `logical_not()` operator instead.")
    return Neg.apply(a)
