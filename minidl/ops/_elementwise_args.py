"""What the further elementwise functions (trigonometric.py, elementwise_binary.py, special.py,
elementwise_parts.py) and md.promote_types / result_type / can_cast share: PyTorch's result dtype for two operands and the operands brought to
it, and the device checks, so that a function a device cannot compute raises NotImplementedError
naming itself and the device.

PyTorch's type promotion (c10 ``result_type``) ranks operands in three groups: tensors with
dims, 0-d tensors, and Python numbers. Within a group the dtypes promote as usual (an integer
meeting a float becomes that float, two floats the wider); across groups a lower group counts
only when it is of a higher category (bool < integer < float): ``float32 tensor + float64 0-d
tensor`` is float32, ``int64 tensor + 2.5`` is the default float dtype (float32).
"""
import numbers

import numpy as np

from .. import backends
from ..autograd import op_function as _op_function
from ..tensor import dtype as _dtypes
from .shape_error import broadcast_shape

_F16, _F32 = np.dtype("float16"), np.dtype("float32")
_BF16 = np.dtype(_dtypes.bfloat16.dtype) if _dtypes.bfloat16 is not None else None


def _category(dt):
    return 0 if dt.kind == "b" else 2 if dt.kind in "fV" else 1   # V: bfloat16


def is_floating(dt):
    return np.dtype(dt).kind in "fV"


def _promote(a, b):
    """Two dtypes of one group, as torch.promote_types."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 2:
        if {a, b} == {_F16, _BF16}:
            return _F32
        return a if a.itemsize >= b.itemsize else b
    return np.promote_types(a, b)


def _combine(higher, lower):
    """A higher-ranked group's dtype with a lower one's: the lower counts only from a higher category."""
    if higher is None:
        return lower
    if lower is None or _category(higher) == 2:
        return higher
    if _category(higher) == 0 or _category(lower) == 2:
        return _promote(higher, lower)
    return higher


def _number_dtype(v):
    if isinstance(v, (bool, np.bool_)):
        return np.dtype(bool)
    if isinstance(v, numbers.Integral):
        return np.dtype(np.int64)
    return np.dtype(_dtypes.DEFAULT_FLOAT)


def result_dtype(*operands):
    """PyTorch's result dtype (a NumPy dtype) for Tensors and Python numbers."""
    Tensor = _op_function.Tensor
    dims = zero = wrapped = None
    for v in operands:
        if isinstance(v, Tensor):
            if v.ndim:
                dims = _promote(dims, v._data.dtype)
            else:
                zero = _promote(zero, v._data.dtype)
        else:
            wrapped = _promote(wrapped, _number_dtype(v))
    return _combine(dims, _combine(zero, wrapped))


def check_operand(op, name, v):
    Tensor = _op_function.Tensor
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, (Tensor, numbers.Number)) or isinstance(v, complex):
        raise TypeError(f"{op}(): argument '{name}' must be a Tensor or a real number, got {type(v).__name__}")
    return v


def operands(op, a, b, floating=True, integers=True, names=("input", "other")):
    """``a`` and ``b`` (Tensors or numbers, at least one a Tensor) as two Tensors of PyTorch's result
    dtype, broadcast-compatible; a number becomes a 0-d tensor on the other operand's device. With
    ``floating`` an integer or bool result dtype becomes the default float dtype (as PyTorch's float
    functions); without ``integers`` an integer result is refused, as PyTorch's kernels that have no
    integer version."""
    Tensor = _op_function.Tensor
    a, b = check_operand(op, names[0], a), check_operand(op, names[1], b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{op}(): expected at least one of {names[0]} and {names[1]} to be a Tensor, got two numbers")
    dt = result_dtype(a, b)
    if not is_floating(dt):
        if not integers:
            raise NotImplementedError(f'"{op}" not implemented for \'{_dtypes.wrap(dt)}\' tensors '
                                      "(PyTorch has it for floating point tensors only)")
        if floating:
            dt = _number_dtype(1.0)
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        broadcast_shape(op, a.shape, b.shape, *names)
    device = (a if isinstance(a, Tensor) else b).device
    return _as(a, dt, device), _as(b, dt, device)


def _as(v, dt, device):
    Tensor = _op_function.Tensor
    if isinstance(v, Tensor):
        return v if v._data.dtype == dt else v.to(_dtypes.wrap(dt))
    from ..tensor.factories import tensor
    return tensor(np.asarray(v, dtype=dt) if dt.kind != "V" else float(v), dtype=_dtypes.wrap(dt), device=device)


def floating(x):
    """An integer or bool tensor as the default float dtype (PyTorch's float functions)."""
    from .unary import _floating
    return _floating(x)


def ufunc(op, name, *args, **kwargs):
    """``xp.<name>(*args)`` in the namespace of the first array argument; on a device whose namespace
    lacks it, NotImplementedError naming ``op`` and the device."""
    x = next(a for a in args if hasattr(a, "dtype"))
    xp = backends.namespace_of(x)
    try:
        fn = getattr(xp, name)
    except (AttributeError, NotImplementedError):
        raise NotImplementedError(f"{op} is not implemented for device '{backends.device_of(x)}' (its array "
                                  f"namespace has no {name}); move the tensor to the CPU with .cpu()") from None
    return fn(*args, **kwargs)


def host_only(op, x):
    """The ops computed per element with Python's math module run on the CPU only."""
    device = backends.device_of(x)
    if device != "cpu":
        raise NotImplementedError(f"{op} is not implemented for device '{device}': it is computed per element "
                                  "on the host (Python's math module); move the tensor to the CPU with .cpu()")
