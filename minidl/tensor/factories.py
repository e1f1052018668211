"""Creating tensors: md.tensor and the factories (zeros, ones, randn, ...)."""
import math
import numbers

import numpy as np

from .. import backends
from ..ops import _elementwise_args
from . import dtype as dtypes
from .allocation import check_allocation
from .generator import numpy_generator
from .layout import check as check_layout
from .scalar_fit import fit
from .size import as_ints
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
        data = data.numpy(force=True)
    from_ndarray = isinstance(data, (np.ndarray, np.generic))
    try:
        array = np.array(data)
    except ValueError as exc:
        raise ValueError(f"tensor: data is not a rectangular array of numbers ({exc})") from None
    dt = dtypes.to_dtype(dtype) if dtype is not None else None
    if dt is None and isinstance(data, (list, tuple)):
        dt = _promoted_leaf_dtype(data)
    if not from_ndarray and (array.dtype == object or array.dtype == np.uint64):
        # NumPy holds an int beyond int64 as an object (or, below 2**64, a uint64 that the
        # int64 default would wrap to a negative number)
        values = list(_flat(data if array.dtype == object else array.tolist()))
        if dt is None and any(isinstance(v, float) for v in values):
            dt = dtypes.DEFAULT_FLOAT   # [1.5, 2**70] is float data, as in PyTorch
        if dt is None or dt.kind in "iu":
            _check_int64(values)
    if array.dtype == object:
        try:
            array = array.astype(dt) if dt is not None and dt.kind == "f" else None
        except (TypeError, ValueError):
            array = None
        if array is None:
            raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__} holding non-numbers")
    dt = dt if dt is not None else dtypes.default_dtype_for(array, from_ndarray)
    return _leaf(array.astype(dt, copy=False), requires_grad, device)


def _promoted_leaf_dtype(data):
    """The dtype of a list that holds NumPy scalars, arrays or tensors, as torch.tensor infers it:
    each element brings its own dtype (a Python float the default float dtype, a Python int
    int64, a bool bool) and the result is their promotion, so ``[np.float64(1.5), 2.0]`` is
    float64 and ``[np.int32(1), 2.5]`` float32. None for a list of Python numbers alone, whose
    dtype default_dtype_for decides."""
    leaves = list(_flat(data))
    if not any(isinstance(v, (np.generic, np.ndarray, Tensor)) for v in leaves):
        return None
    result = None
    for v in leaves:
        if isinstance(v, Tensor):
            dt = np.dtype(v.dtype)
        elif isinstance(v, (np.generic, np.ndarray)):
            dt = v.dtype
        else:
            dt = np.dtype(bool if isinstance(v, bool) else np.int64 if isinstance(v, int) else dtypes.DEFAULT_FLOAT)
        if dt not in dtypes.SUPPORTED:
            return None
        result = dt if result is None else _elementwise_args._promote(result, dt)
    return result


def _check_int64(values):
    """ValueError for a Python int outside int64, as PyTorch ("Overflow when unpacking long long")."""
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool) and not -2 ** 63 <= v < 2 ** 63:
            raise ValueError(f"tensor: integer {v} does not fit in int64 (Overflow when unpacking long long)")


def _flat(data):
    """The scalars of nested lists and tuples (or ``data`` itself, a scalar)."""
    if not isinstance(data, (list, tuple)):
        yield data
        return
    for item in data:
        yield from _flat(item)


def as_tensor(data, dtype=None):
    """``data`` as a tensor, sharing memory when it already is one of the right dtype."""
    if isinstance(data, Tensor) and (dtype is None or data.dtype == dtypes.to_dtype(dtype)):
        return data
    return tensor(data, dtype=dtype)


def from_numpy(array):
    """A tensor sharing memory with an ndarray (with a copy of one not in the machine's byte
    order: see dtypes.native)."""
    return Tensor._wrap(dtypes.native(np.asarray(array)), None, 0)


def _shape(size, op):
    """``zeros(2, 3)`` and ``zeros((2, 3))`` alike as the shape (2, 3)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = as_ints(size, op, "size")
    _check_size(shape)
    return shape


def _check_size(shape):
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")


def _sized(size, dtype, op):
    """The shape ``size`` asks for, refused before allocating if no machine's memory holds it
    (``dtype``: what NumPy allocates, e.g. float64 for a draw cast afterwards)."""
    shape = _shape(size, op)
    check_allocation(op, shape, dtype)
    return shape


def _float(dtype):
    return dtypes.DEFAULT_FLOAT if dtype is None else dtypes.to_dtype(dtype)


def _sampled(dtype, op):
    """The dtype of a draw from a continuous distribution, which only a floating dtype holds
    (an integer one would truncate randn's values to mostly zeros)."""
    dt = _float(dtype)
    dtypes.check_floating(op, dt, "dtype")
    return dt


def zeros(*size, dtype=None, layout=None, requires_grad=False, device="cpu"):
    check_layout(layout, "zeros")
    return _leaf(np.zeros(_sized(size, _float(dtype), "zeros"), _float(dtype)), requires_grad, device)


def ones(*size, dtype=None, layout=None, requires_grad=False, device="cpu"):
    check_layout(layout, "ones")
    return _leaf(np.ones(_sized(size, _float(dtype), "ones"), _float(dtype)), requires_grad, device)


def full(size, fill_value, dtype=None, requires_grad=False, device="cpu", *, layout=None):
    check_layout(layout, "full")
    if not isinstance(fill_value, (numbers.Number, np.generic)) and \
            not (isinstance(fill_value, Tensor) and fill_value.ndim == 0):
        # np.full would try to convert a string, or broadcast a list, into the tensor
        raise TypeError(f"full(): argument 'fill_value' must be a number, got {type(fill_value).__name__} "
                        f"({fill_value!r})")
    dt = _fill_dtype(fill_value) if dtype is None else dtypes.to_dtype(dtype)
    fill_value = fit(fill_value, dt)
    return _leaf(np.full(_sized((size,), dt, "full"), fill_value, dt), requires_grad, device)


def _fill_dtype(fill_value):
    """full()'s dtype when none is given, inferred as PyTorch does: bool for a bool, int64 for
    an integer, the default float for a float (a 0-d tensor gives its own dtype)."""
    if isinstance(fill_value, Tensor):
        return fill_value.dtype
    if isinstance(fill_value, (bool, np.bool_)):
        return dtypes.to_dtype("bool")
    if isinstance(fill_value, numbers.Integral):
        return dtypes.int64
    return dtypes.DEFAULT_FLOAT


def empty(*size, dtype=None, layout=None, requires_grad=False, device="cpu"):
    return zeros(*size, dtype=dtype, layout=layout, requires_grad=requires_grad, device=device)


def randn(*size, generator=None, dtype=None, layout=None, requires_grad=False, device="cpu"):
    check_layout(layout, "randn")
    dt = _sampled(dtype, "randn")
    data = numpy_generator(generator).standard_normal(_sized(size, np.float64, "randn")).astype(dt)
    return _leaf(data, requires_grad, device)


def rand(*size, generator=None, dtype=None, layout=None, requires_grad=False, device="cpu"):
    check_layout(layout, "rand")
    dt = _sampled(dtype, "rand")
    data = numpy_generator(generator).random(_sized(size, np.float64, "rand")).astype(dt)
    return _leaf(data, requires_grad, device)


def randint(low, high=None, size=(), *, generator=None, dtype=None, layout=None, requires_grad=False, device="cpu"):
    """Integers drawn uniformly from [low, high): ``randint(high, size)`` or ``randint(low, high, size)``."""
    check_layout(layout, "randint")
    if high is None:
        low, high = 0, low
    elif isinstance(high, (tuple, list)):   # randint(high, size), as PyTorch's overload
        low, high, size = 0, low, high
    if requires_grad:
        raise RuntimeError("randint: only floating point tensors can require gradients")
    if not low < high:
        raise RuntimeError(f"randint: random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    data = numpy_generator(generator).integers(low, high, _sized((size,), np.int64, "randint"))
    return _leaf(data.astype(dtypes.to_dtype(dtype or dtypes.int64)), False, device)


def randperm(n, *, generator=None, dtype=None, layout=None, requires_grad=False, device="cpu"):
    check_layout(layout, "randperm")
    _check_size((int(n),))
    check_allocation("randperm", (int(n),), np.int64)
    data = numpy_generator(generator).permutation(int(n)).astype(dtypes.to_dtype(dtype or dtypes.int64))
    return _leaf(data, requires_grad, device)


def arange(start, end=None, step=1, dtype=None, requires_grad=False, device="cpu", *, layout=None):
    check_layout(layout, "arange")
    if end is None:
        start, end = 0, start
    # an infinite end: NumPy's "Maximum allowed size exceeded" names neither the op nor the range
    if not all(isinstance(v, numbers.Integral) or math.isfinite(v) for v in (start, end)):
        raise RuntimeError(f"arange: unsupported range: {start} -> {end}")
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


def linspace(start, end, steps, dtype=None, device="cpu", *, layout=None):
    check_layout(layout, "linspace")
    if int(steps) < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got steps={steps}")
    check_allocation("linspace", (int(steps),), np.float64)
    return _leaf(np.linspace(start, end, steps).astype(_float(dtype)), False, device)


def eye(n, m=None, dtype=None, device="cpu", *, layout=None):
    check_layout(layout, "eye")
    _check_size((int(n),) if m is None else (int(n), int(m)))
    check_allocation("eye", (int(n), int(n if m is None else m)), _float(dtype))
    return _leaf(np.eye(n, m, dtype=_float(dtype)), False, device)


def _like(t, fill, dtype, requires_grad):
    dt = t.dtype if dtype is None else dtypes.to_dtype(dtype)
    fill = fit(fill, dt)
    return _leaf(np.full(t.shape, fill, dt), requires_grad, t.device)


def zeros_like(t, dtype=None, requires_grad=False, *, layout=None):
    check_layout(layout, "zeros_like")
    return _like(t, 0, dtype, requires_grad)


def ones_like(t, dtype=None, requires_grad=False, *, layout=None):
    check_layout(layout, "ones_like")
    return _like(t, 1, dtype, requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False, *, layout=None):
    check_layout(layout, "full_like")
    return _like(t, fill_value, dtype, requires_grad)


def randn_like(t, dtype=None, requires_grad=False, *, layout=None):
    check_layout(layout, "randn_like")
    return randn(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad, device=t.device)


def rand_like(t, dtype=None, requires_grad=False, *, layout=None):
    check_layout(layout, "rand_like")
    return rand(*t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad, device=t.device)
