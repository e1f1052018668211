"""Creating tensors: md.tensor and the factories (zeros, ones, randn, ...)."""
import math
import numbers

import numpy as np

from .. import backends
from . import dtype as dtypes
from .allocation import check_allocation
from .generator import numpy_generator
from .tensor import Tensor


def _leaf(array, requires_grad, device):
    if device is not None and str(device) != "cpu":
        array = backends.get(device).from_host(array)
    t = Tensor._wrap(array, None, 0)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, requires_grad=False, device="cpu"):
    """A new leaf tensor holding a copy of ``data`` (a number, nested lists, an ndarray or a
    Tensor). Float data becomes float32 unless it is an ndarray (or NumPy scalar) of another
    float dtype, as torch.tensor does."""
    if isinstance(data, Tensor):
        data = data.numpy()
    from_ndarray = isinstance(data, (np.ndarray, np.generic))
    try:
        array = np.array(data)
    except ValueError as exc:
        raise ValueError(f"tensor: data is not a rectangular array of numbers ({exc})") from None
    if array.dtype == object:
        raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__} holding non-numbers")
    dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.default_dtype_for(array, from_ndarray)
    return _leaf(array.astype(dt, copy=False), requires_grad, device)


def as_tensor(data, dtype=None):
    """``data`` as a tensor, sharing memory when it already is one of the right dtype."""
    if isinstance(data, Tensor) and (dtype is None or data.dtype == dtypes.to_dtype(dtype)):
        return data
    return tensor(data, dtype=dtype)


def from_numpy(array):
    """A tensor sharing memory with an ndarray."""
    return Tensor._wrap(np.asarray(array), None, 0)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(int(n) for n in size)
    _check_size(shape)
    return shape


def _check_size(shape):
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")


def _sized(size, dtype, op):
    """The shape ``size`` asks for, refused before allocating if no machine's memory holds it
    (``dtype``: what NumPy allocates, e.g. float64 for a draw cast afterwards)."""
    shape = _shape(size)
    check_allocation(op, shape, dtype)
    return shape


def _float(dtype):
    return dtypes.DEFAULT_FLOAT if dtype is None else dtypes.to_dtype(dtype)


def zeros(*size, dtype=None, requires_grad=False, device="cpu"):
    return _leaf(np.zeros(_sized(size, _float(dtype), "zeros"), _float(dtype)), requires_grad, device)


def ones(*size, dtype=None, requires_grad=False, device="cpu"):
    return _leaf(np.ones(_sized(size, _float(dtype), "ones"), _float(dtype)), requires_grad, device)


def full(size, fill_value, dtype=None, requires_grad=False, device="cpu"):
    return _leaf(np.full(_sized((size,), _float(dtype), "full"), fill_value, _float(dtype)), requires_grad, device)


def empty(*size, dtype=None, requires_grad=False, device="cpu"):
    return zeros(*size, dtype=dtype, requires_grad=requires_grad, device=device)


def randn(*size, generator=None, dtype=None, requires_grad=False, device="cpu"):
    data = numpy_generator(generator).standard_normal(_sized(size, np.float64, "randn")).astype(_float(dtype))
    return _leaf(data, requires_grad, device)


def rand(*size, generator=None, dtype=None, requires_grad=False, device="cpu"):
    data = numpy_generator(generator).random(_sized(size, np.float64, "rand")).astype(_float(dtype))
    return _leaf(data, requires_grad, device)


def randint(low, high=None, size=(), *, generator=None, dtype=None, requires_grad=False, device="cpu"):
    """Integers drawn uniformly from [low, high): ``randint(high, size)`` or ``randint(low, high, size)``."""
    if high is None:
        low, high = 0, low
    elif isinstance(high, (tuple, list)):   # randint(high, size), as PyTorch's overload
        low, high, size = 0, low, high
    if requires_grad:
        raise RuntimeError("randint: only floating point tensors can require gradients")
    data = numpy_generator(generator).integers(low, high, _sized((size,), np.int64, "randint"))
    return _leaf(data.astype(dtypes.to_dtype(dtype or dtypes.int64)), False, device)


def randperm(n, *, generator=None, dtype=None, requires_grad=False, device="cpu"):
    _check_size((int(n),))
    check_allocation("randperm", (int(n),), np.int64)
    data = numpy_generator(generator).permutation(int(n)).astype(dtypes.to_dtype(dtype or dtypes.int64))
    return _leaf(data, requires_grad, device)


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device="cpu"):
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError(f"arange: step must be nonzero, got start={start}, end={end}, step={step}")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign, got start={start}, "
                           f"end={end}, step={step}")
    if all(isinstance(v, numbers.Integral) for v in (start, end, step)):
        if not all(-2 ** 63 <= v < 2 ** 63 for v in (start, end, step)):   # NumPy would fill an object array
            raise RuntimeError(f"arange: value cannot be converted to type int64 without overflow, got "
                               f"start={start}, end={end}, step={step}")
        check_allocation("arange", (max(-((start - end) // step), 0),), np.int64)   # exact for any int
    elif math.isfinite((end - start) / step):   # (NumPy refuses an infinite range itself)
        check_allocation("arange", (max(math.ceil((end - start) / step), 0),), np.float64)
    data = np.arange(start, end, step)
    if dtype is None:
        dtype = dtypes.int64 if data.dtype.kind in "iu" else dtypes.DEFAULT_FLOAT
    return _leaf(data.astype(dtypes.to_dtype(dtype)), requires_grad, device)


def linspace(start, end, steps, dtype=None, device="cpu"):
    if int(steps) < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got steps={steps}")
    check_allocation("linspace", (int(steps),), np.float64)
    return _leaf(np.linspace(start, end, steps).astype(_float(dtype)), False, device)


def eye(n, m=None, dtype=None, device="cpu"):
    _check_size((int(n),) if m is None else (int(n), int(m)))
    check_allocation("eye", (int(n), int(n if m is None else m)), _float(dtype))
    return _leaf(np.eye(n, m, dtype=_float(dtype)), False, device)


def _like(t, fill, dtype, requires_grad):
    dt = t.dtype if dtype is None else dtypes.to_dtype(dtype)
    return _leaf(np.full(t.shape, fill, dt), requires_grad, t.device)


def zeros_like(t, dtype=None, requires_grad=False):
    return _like(t, 0, dtype, requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    return _like(t, 1, dtype, requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False):
    return _like(t, fill_value, dtype, requires_grad)


def randn_like(t, dtype=None, requires_grad=False):
    return randn(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad, device=t.device)


def rand_like(t, dtype=None, requires_grad=False):
    return rand(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad, device=t.device)
