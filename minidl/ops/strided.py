"""Views that PyTorch describes by strides: ``narrow``, ``unfold`` (sliding windows), ``diagonal``,
and ``stride()`` itself. Each result shares the input's memory, as PyTorch's does, so an in-place
write to the input shows in it (and autograd treats it as a view: autograd/views.py).

Strides are in elements, as PyTorch counts them (NumPy counts bytes). On a device the views are
the device namespace's views of the device buffer (cuda: ``strided_view``); backward passes
allocate their zeros in the gradient's namespace, so they run on its device."""
import operator

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import normalize_dim


class Unfold(Function):
    """out[..., i, ..., j] = x[..., i * step + j, ...]: the windows of ``size`` elements, ``step`` apart,
    along ``dim``, as a new last dim (a strided view of x; windows overlap when step < size).

    dL/dx[k] = sum over the (i, j) with i * step + j = k of g[i, j]: for each offset j in the
    window, g[..., j] is added into every step-th element starting at j."""

    @staticmethod
    def forward(ctx, x, dim, size, step):
        ctx.args = (x.shape, dim, size, step)
        n = (x.shape[dim] - size) // step + 1
        shape = x.shape[:dim] + (n,) + x.shape[dim + 1:] + (size,)
        item = x.itemsize
        s = tuple(b // item for b in x.strides)   # in elements
        strides = s[:dim] + (s[dim] * step,) + s[dim + 1:] + (s[dim],)
        xp = namespace_of(x)
        if xp is np:
            return np.lib.stride_tricks.as_strided(x, shape, tuple(v * item for v in strides),
                                                   writeable=x.flags.writeable)
        return xp.strided_view(x, shape, strides)

    @staticmethod
    def backward(ctx, g):
        shape, dim, size, step = ctx.args
        n = g.shape[dim]
        gx = namespace_of(g).zeros(shape, g.dtype)
        lead = (slice(None),) * dim
        for j in range(size):   # window positions j, j + step, ...: distinct for one j, so += is exact
            gx[lead + (slice(j, j + step * (n - 1) + 1, step),)] += g[..., j]
        return gx, None, None, None


class Diagonal(Function):
    """out[..., i] = x[..., i, ..., i + offset, ...] over dims (dim1, dim2), the diagonal as the last
    dim (a view of x);  dL/dx = zeros with g written on that diagonal."""

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.args = (x.shape, offset, dim1, dim2)
        return diagonal_view(x, offset, dim1, dim2)

    @staticmethod
    def backward(ctx, g):
        shape, offset, dim1, dim2 = ctx.args
        gx = namespace_of(g).zeros(shape, g.dtype)
        diagonal_view(gx, offset, dim1, dim2)[...] = g
        return gx, None, None, None


def diagonal_view(a, offset, dim1, dim2):
    """NumPy's diagonal of ``a`` (already in PyTorch's layout: the diagonal last), writable where
    ``a`` is, as PyTorch's view is (NumPy and the cuda namespace hand it out read-only)."""
    d = np.diagonal(a, offset, dim1, dim2)
    xp = namespace_of(a)
    if xp is not np:
        return xp.strided_view(d, d.shape, tuple(b // d.itemsize for b in d.strides), writeable=a.flags.writeable)
    if a.flags.writeable:
        d.flags.writeable = True
    return d


def _int(value, name, op):
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op}(): argument '{name}' must be an int, got {type(value).__name__} ({value!r})") from None


def narrow(x, dim, start, length):
    """x's elements start .. start + length - 1 along ``dim``, a view; a negative start counts from
    the end. Out of range is PyTorch's IndexError (start) or RuntimeError (length)."""
    if x.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = normalize_dim(dim, x.ndim, "narrow")
    start, length = _int(start, "start", "narrow"), _int(length, "length", "narrow")
    n = x.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    start %= n if n else 1
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return x[(slice(None),) * d + (slice(start, start + length),)]


def unfold(x, dimension, size, step):
    """The windows of ``size`` elements, ``step`` apart, along ``dimension``, as a new last dim
    (see Unfold): PyTorch's ``Tensor.unfold``, a view of x."""
    size, step = _int(size, "size", "unfold"), _int(step, "step", "unfold")
    scalar = x.ndim == 0
    if scalar:   # PyTorch: its one element, as a dim of length 1, with no window dim added
        normalize_dim(dimension, 1, "unfold")
        x, d = x.reshape(1), 0
    else:
        d = normalize_dim(dimension, x.ndim, "unfold")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if size > x.shape[d]:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {x.shape[d]} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    out = Unfold.apply(x, d, size, step)
    return out.reshape(size) if scalar else out


def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` above the main one (below, for a negative offset) of the matrices
    over dims (dim1, dim2), as the last dim: a view, as PyTorch's."""
    d1, d2 = normalize_dim(dim1, x.ndim, "diagonal"), normalize_dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return Diagonal.apply(x, _int(offset, "offset", "diagonal"), d1, d2)


def stride(x, dim=None):
    """The step in elements between neighbours along each dim (or along ``dim``), as PyTorch's
    ``Tensor.stride``: (4, 1) for a C-ordered (3, 4) tensor, 0 along a broadcast (expanded) dim."""
    item = x._data.dtype.itemsize
    strides = tuple(int(s) // item for s in x._data.strides)
    if dim is None:
        return strides
    return strides[normalize_dim(dim, x.ndim, "stride")]
