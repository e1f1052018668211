"""Helpers shared by ops: summing a broadcast gradient back, and normalising dims."""


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
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"{op}: dimension {d} is out of range for a tensor with {ndim} dims")
        out.append(d % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: dimension repeated in {dim}")
    return tuple(sorted(out))


def shape_of(value):
    """The shape of an array operand, or () for a Python number."""
    return getattr(value, "shape", ())
