"""Helpers shared by ops: summing a broadcast gradient back, and normalising dims and size
arguments."""
import numbers
import operator

from .shape_error import ShapeError


def unbroadcast(grad, shape):
    """Sum ``grad`` down to ``shape``: the adjoint of NumPy broadcasting.

    If y = broadcast(x) copies x along some axes, then dL/dx is dL/dy summed along those
    axes: the leading axes broadcasting added, and the axes where x had size 1.
    """
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and grad.shape[i + lead] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


class RepeatedDimError(RuntimeError, ValueError):
    """A dim given twice to a reduction: a RuntimeError, as PyTorch raises, and a ValueError, since
    the value of the argument is wrong."""


def normalize_dims(dim, ndim, op):
    """``dim`` as a sorted tuple of non-negative axes. None, and as in PyTorch's reductions an
    empty tuple or list, means all of them (``x.sum(())`` is the total; NumPy's axis=() would
    reduce nothing)."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(ndim))
    if type(dim) is int and 0 <= dim < ndim:  # the common case, without the general checks
        return (dim,)
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    out = []
    for d in dims:
        d = _dim_index(d, dim, op)
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"{op}: dimension {d} is out of range for a tensor with {ndim} dims")
        out.append(d % ndim if ndim else None)
    if len(set(out)) != len(out):
        repeated = next(d for d in out if out.count(d) > 1)
        raise RepeatedDimError(f"{op}: dim {repeated} appears multiple times in the list of dims {dim} "
                               "(a dimension repeated)")
    # a 0-d tensor accepts dim 0 or -1 (as PyTorch) and has no axis to reduce
    return tuple(sorted(d for d in out if d is not None))


def _dim_index(d, dim, op):
    """``d`` (an element of ``dim``) as an int: ints and NumPy integers pass; a float or a bool is
    a TypeError naming the op and the value, as PyTorch (int() would truncate 1.5)."""
    try:
        if isinstance(d, bool):
            raise TypeError
        return operator.index(d)
    except TypeError:
        raise TypeError(f"{op}(): argument 'dim' must be an int or a tuple of ints, got {type(d).__name__} "
                        f"({d!r})" + ("" if d is dim else f" in {dim!r}")) from None


def normalize_dim(dim, ndim, op):
    """One dim in [-ndim, ndim) as a non-negative axis, or an IndexError naming the op.
    (For an op that inserts an axis, such as stack or unsqueeze, pass ndim + 1.)"""
    d = _dim_index(dim, dim, op)
    if not -ndim <= d < ndim:
        raise IndexError(f"{op}: dimension {dim} is out of range (expected one in [{-ndim}, {ndim - 1}])")
    return d % ndim


def int_tuple(v, n, name, op):
    """An int or ``n`` ints (kernel size, stride, padding...) as a tuple of ``n`` Python ints that
    fit the kernels' int64 (one int in a tuple stands for all, as PyTorch's), or an error naming
    the op: a float is a TypeError naming the argument, as in PyTorch (int() would truncate a
    stride of 1.5 silently); another length a ShapeError; an overflow a ValueError (PyTorch:
    "Overflow when unpacking long long"), never an overflow inside a kernel."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        t = (v,) * n
    elif hasattr(v, "__index__") and not isinstance(v, bool):   # an integer 0-d tensor
        t = (operator.index(v),) * n
    elif isinstance(v, (tuple, list)):
        from ..tensor.size import as_ints   # (minidl.tensor imports the ops: not at module level)
        t = as_ints(v, op, name)
        if len(t) == 1:
            t = t * n
    else:
        raise TypeError(f"{op}(): argument '{name}' must be an int or a tuple of ints, got {type(v).__name__} "
                        f"({v!r})")
    if len(t) != n:
        raise ShapeError(f"{op}: {name} must be an int or {'a pair' if n == 2 else f'a tuple of {n}'} ints, "
                         f"got {v!r}")
    if not all(-2 ** 63 <= a < 2 ** 63 for a in t):
        raise ValueError(f"{op}: {name} {v!r} overflows a 64-bit integer")
    return tuple(int(a) for a in t)


def int_pair(v, name, op):
    return int_tuple(v, 2, name, op)


def shape_of(value):
    """The shape of an array operand, or () for a Python number."""
    return getattr(value, "shape", ())
