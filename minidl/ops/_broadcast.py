"""Helpers shared by ops: summing a broadcast gradient back, and normalising dims and size
arguments."""
import numbers
import operator


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


def normalize_dims(dim, ndim, op):
    """``dim`` as a sorted tuple of non-negative axes (None means all of them)."""
    if dim is None:
        return tuple(range(ndim))
    if type(dim) is int and 0 <= dim < ndim:  # the common case, without the general checks
        return (dim,)
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    out = []
    for d in dims:
        d = operator.index(d)  # ints and NumPy integers; a float dim is a TypeError
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"{op}: dimension {d} is out of range for a tensor with {ndim} dims")
        out.append(d % ndim if ndim else None)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: dimension repeated in {dim}")
    # a 0-d tensor accepts dim 0 or -1 (as PyTorch) and has no axis to reduce
    return tuple(sorted(d for d in out if d is not None))


def normalize_dim(dim, ndim, op):
    """One dim in [-ndim, ndim) as a non-negative axis, or an IndexError naming the op.
    (For an op that inserts an axis, such as stack or unsqueeze, pass ndim + 1.)"""
    d = operator.index(dim)
    if not -ndim <= d < ndim:
        raise IndexError(f"{op}: dimension {dim} is out of range (expected one in [{-ndim}, {ndim - 1}])")
    return d % ndim


def int_pair(v, name, op):
    """An int or a pair of ints (kernel size, stride, padding...) as a pair of Python ints that
    fit the kernels' int64, or a ValueError naming the op (PyTorch: "Overflow when unpacking
    long long"), never an overflow inside a kernel."""
    t = (v, v) if isinstance(v, numbers.Integral) else tuple(int(a) for a in v)
    if len(t) != 2:
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}")
    if not all(-2 ** 63 <= a < 2 ** 63 for a in t):
        raise ValueError(f"{op}: {name} {v!r} overflows a 64-bit integer")
    return tuple(int(a) for a in t)


def shape_of(value):
    """The shape of an array operand, or () for a Python number."""
    return getattr(value, "shape", ())
